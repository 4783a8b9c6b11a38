// Whole arrays of bf16 or f16 to f32 and back, in blocks over TBB's threads: for kernels that run
// 16-bit tensors through their f32 code (devices/cpu/widened_gemm.h, widened_attention.h).
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace disc::devices::cpu {

// to[i] = the bf16 or f16 (`type`) bits from[i] as f32 (exact).
void widen_half(DType type, const void* from, float* to, int64_t n);
// to[i] = from[i] rounded to `type`, bf16 or f16 (nearest, ties to even; base/half.h).
void narrow_half(DType type, const float* from, void* to, int64_t n);

}  // namespace disc::devices::cpu
