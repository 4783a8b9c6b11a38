// Whole arrays of bf16 or f16 to f32 and back, in blocks over TBB's threads: for kernels that run
// 16-bit tensors through their f32 code (devices/cpu/widened_gemm.h, widened_attention.h).
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace disc::devices::cpu {

// base/half.h's half_to_f32 and f32_to_half over blocks of the arrays in parallel.
void widen_half(DType type, const void* from, float* to, int64_t n);
void narrow_half(DType type, const float* from, void* to, int64_t n);

}  // namespace disc::devices::cpu
