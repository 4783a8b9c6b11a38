// bf16 and f16 attention as f32 block attention (devices/cpu/block_attention.h), a chunk of heads
// at a time: the chunk's q, k, v (and dout) widened to f32 exactly, the f32 kernels run over them,
// and each result rounded once to the 16-bit type. That is what the reference kernels compute on
// such tensors (ir/ops/half_widening.h), and what lets a bf16 step keep q, k and v for the backward
// at half the bytes. The f32 copies are kernel scratch of at most kWidenedAttentionBytes (one
// head's at the least), outside the memory cap like block attention's panels.
#pragma once

#include <cstdint>

#include "devices/device.h"

namespace disc::devices {
struct AttentionArgs;
}

namespace disc::devices::cpu {

inline constexpr int64_t kWidenedAttentionBytes = int64_t{8} << 20;

// As attention_forward and attention_backward, for a.dtype bf16 or f16.
void widened_attention_forward(Device& dev, const AttentionArgs& a, void* out);
void widened_attention_backward(Device& dev, const AttentionArgs& a, const void* dout, void* dq,
                                void* dk, void* dv);

}  // namespace disc::devices::cpu
