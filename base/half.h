// 16-bit floats as stored in files and (later) on devices: bfloat16 (f32's exponent, 7 mantissa
// bits) and IEEE binary16. Conversions to f32 are exact; from f32 they round to nearest, ties to
// even, as PyTorch and the hardware do, so a weight written by disc reads back in PyTorch as the
// value PyTorch itself would have stored.
#pragma once

#include <cstdint>

namespace disc {

float bf16_to_f32(uint16_t bits);
// NaN stays NaN (quiet); values beyond bf16's range round to infinity.
uint16_t f32_to_bf16(float value);

float f16_to_f32(uint16_t bits);
// Subnormal results are rounded like the rest; beyond 65504 (after rounding) is infinity.
uint16_t f32_to_f16(float value);

}  // namespace disc
