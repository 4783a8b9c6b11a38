// The loss of a linear layer followed by cross-entropy (a language model's head), with its
// gradients, without the [rows, classes] logits: chunks of rows go through the device's GEMM into
// a panel of logits, each panel row becomes its loss term and then its gradient
// (softmax - onehot) / count in place, and two more GEMMs turn the panel into the chunk's rows of
// dh and its share of dw. The gradients are those of the mean loss (dloss = 1); they cost no
// GEMM beyond what the separate layer and loss would run forward and backward.
//
//   LinearCrossEntropyArgs a{.dtype = DType::kF32, .rows = B * S, .d = 512, .classes = 32000,
//                            .h = h, .w = w, .labels = labels, .count = counted};
//   linear_cross_entropy(dev, a, &loss, dh, dw);
//
// Memory: besides the operands and results, one panel of at most kCrossEntropyPanel bytes
// (at least one row), reused between calls on one thread.
//
// bf16 h and w (the head of a bf16 step), where the device has bf16 dot products
// (Device::has_16bit_dot): the logits in f32 from bf16 GEMMs, the loss and G in f32, G rounded to
// bf16 for the dh and dw GEMMs (as autocast's bf16 logits' gradient is), dh rounded once, dw summed
// in f32 over the chunks and rounded once. Scratch: the panel's bf16 copy and dw's f32 sums (at
// 512 x 32000 classes, 66 MB), outside the memory cap like the panel.
// Otherwise bf16 and f16 run through the f32 kernel: h and w widened to f32 exactly, dh and dw
// summed in f32 and rounded once, the loss f32, with f32 copies of h, w, dh and dw as scratch (at
// 5600 rows x 512 x 32000 classes, 154 MB).
#pragma once

#include <cstdint>

#include "devices/device.h"

namespace disc::devices {

// Large enough that dw's accumulating GEMM, which reads and writes all of dw per panel, runs over
// some 256 rows at a vocabulary of 32000: with 8 MiB (65 rows) the op took 2.15 s at 5600 x 512
// rows x 32000 classes on 2 cores, with 32 MiB 1.55 s, against 1.33 s for the three whole GEMMs.
inline constexpr int64_t kCrossEntropyPanel = int64_t{32} << 20;

// Row-major: h [rows, d]; w [d, classes], or [classes, d] with transpose_w; labels [rows].
struct LinearCrossEntropyArgs {
  DType dtype = DType::kF32;  // of h, w, dh and dw: f32, f64, bf16 or f16 (then the loss is f32)
  int64_t rows = 0, d = 0, classes = 0;
  bool transpose_w = false;
  const void* h = nullptr;
  const void* w = nullptr;
  const int64_t* labels = nullptr;  // each in [0, classes) or ignore_index
  int64_t ignore_index = -100;
  int64_t count = 0;  // labels other than ignore_index (the caller checks and counts them)
};

// loss (one element of a.dtype, f32 for 16-bit types) = mean over counted rows of -log_softmax(h
// w)[label] (0 when none is counted); dh [rows, d] and dw (w's shape) its gradients. Throws
// InvalidArgument for negative sizes and for a device whose memory is not host memory.
void linear_cross_entropy(Device& dev, const LinearCrossEntropyArgs& a, void* loss, void* dh,
                          void* dw);

// Rows per panel for these sizes: the most that fit in kCrossEntropyPanel, at least one.
int64_t cross_entropy_chunk(const LinearCrossEntropyArgs& a);

}  // namespace disc::devices
