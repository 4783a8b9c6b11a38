#include "ir/ops/state_codec.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

namespace disc::ir::state_codec {
namespace {

constexpr int kStepsPerOctave = 8;

// level[k] = 2^((k - top) / 8) for k in 1..top, level[0] = 0: what code k stands for, times the
// scale. Signed codes use the first 128 entries of their own table (top 127), unsigned all 256.
struct Levels {
  int top;
  std::array<float, 257> level{};  // [top + 1] repeats level[top]: the one above the largest
  // mantissa_at[j]: the mantissa bits of 2^(j/8), where the j-th eighth of an octave starts.
  std::array<uint32_t, 8> mantissa_at{};

  explicit Levels(int t) : top(t) {
    for (int k = 1; k <= top; ++k)
      level[k] = static_cast<float>(std::exp2(static_cast<double>(k - top) / kStepsPerOctave));
    level[top + 1] = level[top];
    for (int j = 0; j < 8; ++j)
      mantissa_at[j] = std::bit_cast<uint32_t>(static_cast<float>(std::exp2(j / 8.0))) & 0x7fffffu;
  }

  // The code of r = |x| / scale in [0, 1], rounded by u between the levels below and above r.
  // The level below comes from r's exponent and which eighth of its octave its mantissa is in:
  // exact (no log rounds it), and branch-free.
  int code(float r, float u) const {
    const auto bits = std::bit_cast<uint32_t>(r);
    const int exponent = static_cast<int>(bits >> 23) - 127;  // r = 1.m 2^exponent
    const uint32_t mantissa = bits & 0x7fffffu;
    int eighth = 0;
    for (int j = 1; j < 8; ++j) eighth += mantissa >= mantissa_at[j] ? 1 : 0;
    const int lo = std::clamp(top + kStepsPerOctave * exponent + eighth, 0, top);
    const float below = level[lo], above = level[lo + 1];
    const int up = u * (above - below) < r - below ? 1 : 0;
    return r >= 1 ? top : std::min(lo + up, top);
  }
};

const Levels kSigned(127), kUnsigned(255);

float encode_nothing(uint8_t* codes, int64_t n) {
  std::fill(codes, codes + n, uint8_t{0});
  return std::numeric_limits<float>::quiet_NaN();
}

}  // namespace

float encode_block(const float* x, int64_t n, Sign sign, uint8_t* codes, uint64_t salt,
                   int64_t step, int64_t first) {
  // A NaN or infinity anywhere makes the scale NaN, so the whole block reads back NaN: a state
  // that diverged stays visibly diverged (and a checkpoint refuses it).
  float scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return encode_nothing(codes, n);
    scale = std::max(scale, std::fabs(x[i]));
  }
  if (scale == 0) {
    std::fill(codes, codes + n, uint8_t{0});
    return 0;
  }
  const float inverse = 1 / scale;
  const Levels& levels = sign == Sign::kSigned ? kSigned : kUnsigned;
  for (int64_t i = 0; i < n; ++i) {
    const int k = levels.code(std::fabs(x[i]) * inverse, dither(salt, step, first + i));
    // Unsigned: a nonzero v is never 0 (k is 0 only for x > 0 rounded down). Signed: the sign
    // bit, on a nonzero code only.
    const int negative = static_cast<int>(std::bit_cast<uint32_t>(x[i]) >> 31);
    codes[i] =
        static_cast<uint8_t>(sign == Sign::kUnsigned ? std::max(k, x[i] > 0 ? 1 : 0)
                                                     : k | (negative << 7) * (k != 0 ? 1 : 0));
  }
  return scale;
}

void decode_block(const uint8_t* codes, int64_t n, float scale, Sign sign, float* x) {
  if (sign == Sign::kUnsigned) {
    for (int64_t i = 0; i < n; ++i) x[i] = scale * kUnsigned.level[codes[i]];
    return;
  }
  for (int64_t i = 0; i < n; ++i) {  // the code's sign bit becomes the float's
    const float magnitude = scale * kSigned.level[codes[i] & 0x7f];
    x[i] = std::bit_cast<float>(std::bit_cast<uint32_t>(magnitude) |
                                static_cast<uint32_t>(codes[i] & 0x80) << 24);
  }
}

}  // namespace disc::ir::state_codec
