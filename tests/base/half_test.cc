// bf16 and f16 conversions against independent references: the compiler's own _Float16 (IEEE
// binary16, round to nearest even) for f16, and the nearest of the two neighbouring bf16 values,
// compared in double, for bf16.
#include "base/half.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

namespace disc {
namespace {

uint16_t reference_f16(float x) {
  return std::bit_cast<uint16_t>(static_cast<_Float16>(x));
}

// A bf16 value in double, infinity as 2^128 (where rounding past the largest finite value lands).
double bf16_value(uint16_t b) {
  float f = bf16_to_f32(b);
  return std::isinf(f) ? std::copysign(0x1p128, f) : f;
}

// The bf16 nearest to x: the truncation or the next value away from zero, ties to the even one.
uint16_t reference_bf16(float x) {
  auto lo = static_cast<uint16_t>(std::bit_cast<uint32_t>(x) >> 16);
  auto hi = static_cast<uint16_t>(lo + 1);
  double dl = std::fabs(bf16_value(lo) - x), dh = std::fabs(bf16_value(hi) - x);
  if (dl != dh) return dl < dh ? lo : hi;
  return (lo & 1) ? hi : lo;
}

TEST(Half, EveryF16ReadsAndWritesBackItself) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    auto bits = static_cast<uint16_t>(b);
    float f = f16_to_f32(bits);
    EXPECT_EQ(std::bit_cast<uint32_t>(f),
              std::bit_cast<uint32_t>(static_cast<float>(std::bit_cast<_Float16>(bits))))
        << std::hex << b;
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
    } else {
      EXPECT_EQ(f32_to_f16(f), bits) << std::hex << b;
    }
  }
}

TEST(Half, F32ToF16RoundsAsTheCompilerDoes) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  std::uniform_real_distribution<float> exponent(-27, 17);
  for (int i = 0; i < 1000000; ++i) {
    // Half of the draws near f16's range (subnormals, normals, overflow); half any bit pattern.
    float x = i % 2 ? std::bit_cast<float>(any(rng))
                    : std::ldexp(1.0f + static_cast<float>(any(rng) % 1024) / 1024.0f +
                                     static_cast<float>(any(rng) % 8192) / 8388608.0f,
                                 static_cast<int>(exponent(rng)));
    if (std::isnan(x)) continue;
    ASSERT_EQ(f32_to_f16(x), reference_f16(x)) << x;
    ASSERT_EQ(f32_to_f16(-x), reference_f16(-x)) << -x;
  }
  // Ties: halfway between 1 and the next half (1 + 2^-10) goes to the even 1; 65520 to infinity.
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);  // the tie below the smallest subnormal: to even 0
  EXPECT_EQ(f32_to_f16(0x1.8p-25f), 0x0001);
}

TEST(Half, F32ToBf16RoundsToNearestEven) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 1000000; ++i) {
    float x = std::bit_cast<float>(any(rng));
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(x))));
      continue;
    }
    ASSERT_EQ(f32_to_bf16(x), reference_bf16(x)) << x;
  }
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // a tie: to even
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to infinity
  // A NaN whose payload sits only in the dropped bits stays a NaN.
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::bit_cast<float>(0x7f800001u)))));
  for (uint32_t b = 0; b < 0x10000; ++b) {
    float f = bf16_to_f32(static_cast<uint16_t>(b));
    if (!std::isnan(f)) {
      EXPECT_EQ(f32_to_bf16(f), b);
    }
  }
}

}  // namespace
}  // namespace disc
