#include "ir/ops/state_codec.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

#include "base/half.h"

namespace disc::ir::state_codec {
namespace {

constexpr int kStepsPerOctave = 8;

int top_of(Sign s) {
  return s == Sign::kSigned ? 127 : 255;
}

// level(k) = 2^((k - 255) / 8) for k in 1..255, level(0) = 0; a signed code's k is offset by 128
// (its 127 is 2^0), so both forms read the one table.
const std::array<float, 256>& levels() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int k = 1; k < 256; ++k)
      t[k] = static_cast<float>(std::exp2((k - 255.0) / kStepsPerOctave));
    return t;
  }();
  return table;
}

float level(int k, int top) {
  return k == 0 ? 0.0f : levels()[k + 255 - top];
}

// The code of r = |x| / scale in [0, 1], rounded by u between the two levels around it.
int magnitude_code(float r, int top, float u) {
  if (!(r > 0)) return 0;
  if (r >= 1) return top;
  const double y = top + kStepsPerOctave * std::log2(static_cast<double>(r));
  const int lo = y < 1 ? 0 : static_cast<int>(y);
  if (lo >= top) return top;
  const float below = level(lo, top), above = level(lo + 1, top);
  return lo + (u * (above - below) < r - below ? 1 : 0);
}

float encode_nothing(uint8_t* codes, int64_t n) {
  std::fill(codes, codes + n, uint8_t{0});
  return std::numeric_limits<float>::quiet_NaN();
}

}  // namespace

float dither(uint64_t salt, int64_t step, int64_t i) {
  // splitmix64's finaliser over the three mixed in: consecutive elements and steps decorrelate.
  uint64_t z = salt ^ (static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(i) * 0xD1B54A32D192ED03ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1p-24f;
}

uint16_t to_bf16_stochastic(float x, float u) {
  if (x != x) return f32_to_bf16(x);
  // The low 16 bits are the distance above the lower bf16 in units of 2^-16 of the gap: adding u's
  // 16 bits carries into the upper half exactly when u is below that distance.
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  return static_cast<uint16_t>((bits + static_cast<uint32_t>(u * 65536.0f)) >> 16);
}

float encode_block(const float* x, int64_t n, Sign sign, uint8_t* codes, uint64_t salt,
                   int64_t step, int64_t first) {
  // A NaN or infinity anywhere makes the scale NaN, so the whole block reads back NaN: a state
  // that diverged stays visibly diverged (and a checkpoint refuses it).
  float scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return encode_nothing(codes, n);
    scale = std::max(scale, std::fabs(x[i]));
  }
  const int top = top_of(sign);
  for (int64_t i = 0; i < n; ++i) {
    if (scale == 0) {
      codes[i] = 0;
      continue;
    }
    const int k = magnitude_code(std::fabs(x[i]) / scale, top, dither(salt, step, first + i));
    if (sign == Sign::kUnsigned) {
      codes[i] = static_cast<uint8_t>(k == 0 && x[i] > 0 ? 1 : k);
    } else {
      codes[i] = static_cast<uint8_t>(k == 0 ? 0 : k | (x[i] < 0 ? 0x80 : 0));
    }
  }
  return scale;
}

void decode_block(const uint8_t* codes, int64_t n, float scale, Sign sign, float* x) {
  const int top = top_of(sign);
  for (int64_t i = 0; i < n; ++i) {
    const int c = codes[i];
    if (sign == Sign::kUnsigned) {
      x[i] = scale * level(c, top);
    } else {
      const float magnitude = scale * level(c & 0x7f, top);
      x[i] = c & 0x80 ? -magnitude : magnitude;
    }
  }
}

}  // namespace disc::ir::state_codec
