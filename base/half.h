// 16-bit floats as stored in files and (later) on devices: bfloat16 (f32's exponent, 7 mantissa
// bits) and IEEE binary16. Conversions to f32 are exact; from f32 they round to nearest, ties to
// even, as PyTorch and the hardware do, so a weight written by disc reads back in PyTorch as the
// value PyTorch itself would have stored.
#pragma once

#include <bit>
#include <cstdint>

#include "base/dtype.h"

namespace disc {

// Inline and branch-free, so that loops over arrays vectorise.
inline float bf16_to_f32(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}
// NaN stays NaN (quiet); values beyond bf16's range round to infinity.
inline uint16_t f32_to_bf16(float value) {
  const uint32_t u = std::bit_cast<uint32_t>(value);
  const uint32_t rounded = (u + 0x7fff + ((u >> 16) & 1)) >> 16;  // ties to even
  // Rounding could carry a NaN's payload into the exponent and make it infinite: keep it a NaN.
  // (Tested on the bits, not by value != value: an integer select vectorizes, a float compare
  // there did not.)
  const uint32_t nan = (u >> 16) | 0x40;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

float f16_to_f32(uint16_t bits);
// Subnormal results are rounded like the rest; beyond 65504 (after rounding) is infinity.
uint16_t f32_to_f16(float value);

// n values of `type` (bf16 or f16) to f32, and n f32 values rounded to `type`: the loops of every
// whole-array conversion (callers split large arrays into blocks across threads), built in AVX-512
// and AVX2 as well (base/vector_clones.h).
void half_to_f32(DType type, const uint16_t* from, float* to, int64_t n);
void f32_to_half(DType type, const float* from, uint16_t* to, int64_t n);

}  // namespace disc
