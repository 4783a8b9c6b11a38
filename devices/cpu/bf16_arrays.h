// Whole arrays of bf16 to f32 and back, in blocks over TBB's threads: for kernels that run bf16
// tensors through their f32 code (devices/cpu/widened_gemm.h, widened_attention.h).
#pragma once

#include <cstdint>

namespace disc::devices::cpu {

// to[i] = bf16 bits from[i] as f32 (exact).
void widen_bf16(const void* from, float* to, int64_t n);
// to[i] = from[i] rounded to bf16 (nearest, ties to even; base/half.h).
void narrow_to_bf16(const float* from, void* to, int64_t n);

}  // namespace disc::devices::cpu
