// How an optimizer holds a moment in less than f32 (OptimizerConfig::state): in bf16, or in 8-bit
// codes with an f32 scale (the largest magnitude) per block of kBlock elements, as 8-bit AdamW
// does (Dettmers et al., "8-bit Optimizers via Block-wise Quantization").
//
// The 8-bit code is logarithmic: code k in 1..top means scale * 2^((k - top) / 8), so every code
// is within 9% of the next, from the block's largest value down to 2^-15.75 of it (signed, top
// 127, a sign bit above) or 2^-31.75 (unsigned, top 255); code 0 is 0. A linear code would put
// every second moment below 1/255 of its block's largest at 0, and then m / (sqrt(v) + eps)
// explodes: the second moment needs a code that keeps small values, and v's spread within a block
// (the square of the gradient's) needs 2^-31.75. A nonzero second moment is never coded 0.
//
// Both forms round stochastically: up or down with probability by distance, so that the mean is
// the value. Rounding to nearest would drop every change below half a step, and an average with
// beta2 = 0.999 changes by 0.1% a step: v would stop following the gradients. The random numbers
// are a hash of (salt, step, element), so a run's numbers are the same run to run and under any
// memory cap.
#pragma once

#include <bit>
#include <cstdint>

#include "base/half.h"

namespace disc::ir::state_codec {

inline constexpr int64_t kBlock = 256;
inline int64_t blocks_of(int64_t n) {
  return (n + kBlock - 1) / kBlock;
}

// A number in [0, 1) fixed by (salt, step, i): splitmix64's finaliser over the three mixed in,
// so that consecutive elements and steps decorrelate. Inline, so that loops over it vectorise.
inline float dither(uint64_t salt, int64_t step, int64_t i) {
  uint64_t z = salt ^ (static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(i) * 0xD1B54A32D192ED03ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1p-24f;
}

// x as bf16, rounded down or up by `u` (from dither()): up when u falls below the distance to the
// lower value, in units of the gap. NaN stays NaN.
inline uint16_t to_bf16_stochastic(float x, float u) {
  // The low 16 bits are the distance above the lower bf16 in units of 2^-16 of the gap: adding
  // u's 16 bits carries into the upper half exactly when u is below that distance.
  const auto bits = std::bit_cast<uint32_t>(x);
  const auto rounded = static_cast<uint16_t>((bits + static_cast<uint32_t>(u * 65536.0f)) >> 16);
  return x != x ? f32_to_bf16(x) : rounded;
}

enum class Sign { kSigned, kUnsigned };

// n <= kBlock values to codes; returns the block's scale (its largest magnitude; 0 when every
// value is 0). `salt`, `step` and `first` (the index of x[0] in its tensor) draw the dither.
float encode_block(const float* x, int64_t n, Sign sign, uint8_t* codes, uint64_t salt,
                   int64_t step, int64_t first);
void decode_block(const uint8_t* codes, int64_t n, float scale, Sign sign, float* x);

}  // namespace disc::ir::state_codec
