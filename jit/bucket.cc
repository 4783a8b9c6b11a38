#include "jit/bucket.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "base/error.h"

namespace disc::jit {
namespace {

constexpr int64_t kOpen = std::numeric_limits<int64_t>::max();

// (2^(k-1), 2^k] holding cols >= 1; above 2^62 the range is open.
Bucket power_of_two_bucket(int64_t cols) {
  if (cols > (int64_t{1} << 62)) return {(int64_t{1} << 62) + 1, kOpen};
  const auto hi = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(cols)));
  return {hi / 2 + 1, hi};
}

// The range between consecutive boundaries that holds cols >= 1: [1, b0], [b0+1, b1], ...,
// [b_last+1, max].
Bucket boundary_bucket(int64_t cols, std::vector<int64_t> boundaries) {
  std::sort(boundaries.begin(), boundaries.end());
  boundaries.erase(std::unique(boundaries.begin(), boundaries.end()), boundaries.end());
  int64_t lo = 1;
  for (int64_t b : boundaries) {
    if (cols <= b) return {lo, b};
    lo = b + 1;
  }
  return {lo, kOpen};
}

}  // namespace

std::string Bucket::str() const {
  if (lo == hi) return std::to_string(lo);
  return std::to_string(lo) + ".." + (hi == kOpen ? "max" : std::to_string(hi));
}

Bucket bucket_for(int64_t cols, bool is_static, const std::vector<int64_t>& boundaries) {
  if (cols < 0) throw InvalidArgument("jit bucket: negative column extent " + std::to_string(cols));
  for (int64_t b : boundaries)
    if (b < 1)
      throw InvalidArgument("jit.buckets: boundary " + std::to_string(b) +
                            " is below 1; boundaries are positive column extents");
  if (is_static || cols == 0) return {cols, cols};
  return boundaries.empty() ? power_of_two_bucket(cols) : boundary_bucket(cols, boundaries);
}

}  // namespace disc::jit
