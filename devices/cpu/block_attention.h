// Scaled dot-product attention by blocks of query rows, without the [S, S] score matrices: for
// each block of kAttentionRows query rows, the scores against every key (for causal attention,
// every key up to the block's last row) are one batched GEMM into a panel that stays in cache,
// softmax runs over the panel's rows, and a second GEMM multiplies the panel into the output.
// The backward pass recomputes each panel the same way (so its probabilities equal the forward
// pass's bit for bit), then forms dS in the panel and adds its share of dK and dV.
//
//   AttentionArgs a{.dtype = DType::kF32, .heads = B * H, .sq = S, .sk = S, .d = 64,
//                   .dv = 64, .causal = true, .scale = 0.125, .q = q, .k = k, .v = v};
//   attention_forward(dev, a, out);               // out = softmax(scale q k^T, masked) v
//   attention_backward(dev, a, dout, dq, dk, dv);
//
// Packed sequences (AttentionArgs::offsets): the blocks of query rows are cut per sequence and
// each block's panel spans only its own sequence's keys, so a step of many short examples costs
// what its examples cost, not what a [T, T] rectangle would.
//
// Memory: besides the operands, two panels of [heads in a chunk, kAttentionRows, sk] elements,
// with the chunk of heads sized so that they take at most kAttentionWorkspace bytes (one head per
// chunk when a single head needs more). The panels are reused between calls on one thread. bf16 on
// bf16 dot products adds 16-bit copies of the panels and, backward, f32 sums of dK and dV for one
// chunk of heads.
#pragma once

#include <cstdint>

#include "devices/device.h"

namespace disc::devices {

// Query rows per panel: enough for the library GEMMs to run near their peak, few enough that a
// causal panel skips most keys above the diagonal.
inline constexpr int64_t kAttentionRows = 64;
// Bytes of both panels together for one chunk of heads. Each block's GEMMs and row loops take
// every head of a chunk in one call, and each call hands the threads over between oneDNN's OpenMP
// pool and TBB's: at 4 MiB (12 heads of S = 480 in bf16) those hand-offs took a sixth of bf16
// attention on a 2-core AMX Xeon (forward 5.8 -> 4.8 ms, backward 14.1 -> 12.3 ms at 32 heads x
// 480 x 64 with 16 MiB; f32 6.7 -> 6.0 and 15.2 -> 14.3 ms).
inline constexpr int64_t kAttentionWorkspace = int64_t{16} << 20;

// Row-major tensors with the heads (batch and heads flattened) leading:
// q [heads, sq, d], k [heads, sk, d], v [heads, sk, dv]; outputs and gradients alike.
struct AttentionArgs {
  // f32, f64, bf16 or f16. bf16 runs on the device's bf16 dot products where it has them
  // (Device::has_16bit_dot): f32 sums, softmax in f32, P and dS rounded to bf16 for the GEMMs
  // that read them, dK and dV summed in f32 and rounded once. Otherwise 16-bit types run as f32
  // (cpu/widened_attention.h).
  DType dtype = DType::kF32;
  int64_t heads = 0;
  int64_t sq = 0, sk = 0, d = 0, dv = 0;
  bool causal = true;  // query row i sees keys 0..i (needs sq == sk)
  double scale = 1.0;  // multiplies q k^T before the softmax
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  // Packed sequences: sequences + 1 offsets, sequence n the rows [offsets[n], offsets[n+1]) of
  // q, k and v (sq == sk), and no query sees another sequence's keys. nullptr: one sequence.
  const int64_t* offsets = nullptr;
  int64_t sequences = 0;
};

// out [heads, sq, dv] = softmax(scale q k^T) v, rows of the softmax over the visible keys.
// Throws InvalidArgument for sizes that do not fit (causal with sq != sk, negative sizes) and
// for a device whose memory is not host memory.
void attention_forward(Device& dev, const AttentionArgs& a, void* out);

// The gradients of attention_forward's output towards q, k and v, given dout [heads, sq, dv].
void attention_backward(Device& dev, const AttentionArgs& a, const void* dout, void* dq, void* dk,
                        void* dv);

// Heads per chunk for these sizes: the most whose two panels fit in kAttentionWorkspace, at
// least one, at most `a.heads`.
int64_t attention_chunk(const AttentionArgs& a);

// The most keys one query row can see: sk, or the longest packed sequence.
int64_t widest_keys(const AttentionArgs& a);

}  // namespace disc::devices
