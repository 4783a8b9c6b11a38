#include "base/finite.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "base/half.h"

namespace disc {
namespace {

template <typename Bits>
NonFinite scan(std::span<const std::byte> bytes, Bits exponent) {
  NonFinite r;
  const size_t n = bytes.size() / sizeof(Bits);
  for (size_t i = 0; i < n; ++i) {
    Bits b;
    std::memcpy(&b, bytes.data() + i * sizeof(Bits), sizeof(Bits));
    if ((b & exponent) != exponent) continue;
    if (r.count++ == 0) r.first = static_cast<int64_t>(i);
  }
  return r;
}

}  // namespace

std::string NonFinite::str() const {
  return std::to_string(count) + " NaN or infinite values (the first at element " +
         std::to_string(first) + ")";
}

NonFinite non_finite(DType dtype, std::span<const std::byte> bytes) {
  switch (dtype) {
    case DType::kF32:
      return scan<uint32_t>(bytes, 0x7F800000u);
    case DType::kF64:
      return scan<uint64_t>(bytes, 0x7FF0000000000000ull);
    case DType::kBF16:
      return scan<uint16_t>(bytes, uint16_t{0x7F80});
    case DType::kF16:
      return scan<uint16_t>(bytes, uint16_t{0x7C00});
    default:
      return {};
  }
}

std::string unrepresentable(std::span<const float> values, DType dtype) {
  const NonFinite bad = non_finite(DType::kF32, std::as_bytes(values));
  if (bad.count > 0) return "it holds " + bad.str();
  if (dtype != DType::kF16 && dtype != DType::kBF16) return "";
  float largest = 0;
  for (float v : values) largest = std::max(largest, std::abs(v));
  uint16_t bits = 0;
  float back = 0;
  f32_to_half(dtype, &largest, &bits, 1);
  half_to_f32(dtype, &bits, &back, 1);
  if (!std::isinf(back)) return "";
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(largest));
  return "its largest magnitude, " + std::string(text) + ", is beyond " +
         std::string(dtype_name(dtype)) + "'s range (+-" +
         (dtype == DType::kF16 ? "65504" : "3.39e38") + ")";
}

}  // namespace disc
