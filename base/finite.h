// NaN and infinities in the bytes of a float tensor, found from their bit patterns (an exponent of
// all ones) without converting: a weight file or an export is checked at the speed of memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/dtype.h"

namespace disc {

struct NonFinite {
  int64_t count = 0;   // elements that are NaN or infinite
  int64_t first = -1;  // the first one's index, or -1
  // "3 NaN or infinite values (the first at element 17)", for messages.
  std::string str() const;
};

// Of `bytes` read as elements of `dtype` (f32, f64, bf16 or f16; other dtypes have none).
NonFinite non_finite(DType dtype, std::span<const std::byte> bytes);

// Why f32 `values` cannot be written as `dtype`: "" when they can, else what is wrong: a NaN or an
// infinity, or a largest magnitude that rounds to infinity in it (an f16 export of weights past
// 65504 wrote infinities silently).
std::string unrepresentable(std::span<const float> values, DType dtype);

}  // namespace disc
