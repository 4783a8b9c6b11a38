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

#include <cstdint>

namespace disc::ir::state_codec {

inline constexpr int64_t kBlock = 256;
inline int64_t blocks_of(int64_t n) {
  return (n + kBlock - 1) / kBlock;
}

// A number in [0, 1) fixed by (salt, step, i).
float dither(uint64_t salt, int64_t step, int64_t i);

// x as bf16, rounded down or up by `u` (from dither()): up when u falls below the distance to the
// lower value, in units of the gap. NaN stays NaN.
uint16_t to_bf16_stochastic(float x, float u);

enum class Sign { kSigned, kUnsigned };

// n <= kBlock values to codes; returns the block's scale (its largest magnitude; 0 when every
// value is 0). `salt`, `step` and `first` (the index of x[0] in its tensor) draw the dither.
float encode_block(const float* x, int64_t n, Sign sign, uint8_t* codes, uint64_t salt,
                   int64_t step, int64_t first);
void decode_block(const uint8_t* codes, int64_t n, float scale, Sign sign, float* x);

}  // namespace disc::ir::state_codec
