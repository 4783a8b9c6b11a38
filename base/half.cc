#include "base/half.h"

#include <bit>
#include <cmath>

#include "base/vector_clones.h"

namespace disc {

float f16_to_f32(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  uint32_t exp = (bits >> 10) & 0x1f, mant = bits & 0x3ff;
  float magnitude;
  if (exp == 0) {
    magnitude = std::ldexp(static_cast<float>(mant), -24);  // zero or subnormal: mant * 2^-24
  } else if (exp == 31) {  // infinity, or a NaN made quiet as the hardware does
    return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0));
  } else {
    magnitude = std::bit_cast<float>(((exp + 112) << 23) | (mant << 13));  // rebias 15 -> 127
  }
  return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
}

uint16_t f32_to_f16(float value) {
  uint32_t u = std::bit_cast<uint32_t>(value);
  auto sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  float a = std::fabs(value);
  if (std::isnan(value)) return sign | 0x7e00;
  if (a >= 65520.0f) return sign | 0x7c00;  // rounds past the largest finite half (65504)
  if (a < 0x1p-14f) {
    // Subnormal halves are multiples of 2^-24: nearbyint rounds ties to even in the default mode.
    return sign | static_cast<uint16_t>(std::nearbyint(a * 0x1p24f));
  }
  uint32_t au = std::bit_cast<uint32_t>(a);
  uint32_t round = 0xfff + ((au >> 13) & 1);  // ties to even on the 13 dropped bits
  au += round;
  return sign | static_cast<uint16_t>(((au >> 23) - 112) << 10 | ((au >> 13) & 0x3ff));
}

// Cloned (vector_clones.h): the conversions of whole arrays and panel rows run in AVX-512 or AVX2.
DISC_VECTOR_CLONES void half_to_f32(DType type, const uint16_t* from, float* to, int64_t n) {
  if (type == DType::kBF16)
    for (int64_t i = 0; i < n; ++i) to[i] = bf16_to_f32(from[i]);
  else
    for (int64_t i = 0; i < n; ++i) to[i] = f16_to_f32(from[i]);
}

DISC_VECTOR_CLONES void f32_to_half(DType type, const float* from, uint16_t* to, int64_t n) {
  if (type == DType::kBF16)
    for (int64_t i = 0; i < n; ++i) to[i] = f32_to_bf16(from[i]);
  else
    for (int64_t i = 0; i < n; ++i) to[i] = f32_to_f16(from[i]);
}

}  // namespace disc
