// Row-major index arithmetic shared by the reference kernels of layout and reduce ops.
#pragma once

#include <cstdint>
#include <vector>

namespace disc::ir {

inline std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

// Advances a multi-index over `shape` in row-major order; returns false after the last one.
inline bool next_index(std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    if (++idx[i] < shape[i]) return true;
    idx[i] = 0;
  }
  return false;
}

inline int64_t product_of(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t d : v) n *= d;
  return n;
}

// Splits `shape` around `axis` into (outer, axis extent, inner) for kernels that work along one
// axis.
struct AxisSplit {
  int64_t outer = 1, extent = 1, inner = 1;
};
inline AxisSplit split_at(const std::vector<int64_t>& shape, int axis) {
  AxisSplit s;
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    if (i < axis)
      s.outer *= shape[i];
    else if (i == axis)
      s.extent = shape[i];
    else
      s.inner *= shape[i];
  }
  return s;
}

}  // namespace disc::ir
