// Shape buckets: a kernel is compiled once per range of its column extent, not once per extent.
// A static extent (known when the graph is built) is its own bucket and becomes a constant in the
// kernel; a dynamic one falls in a range, by default the powers of two (2^(k-1), 2^k], or the
// ranges between the config's `jit.buckets` boundaries. The emitter chooses vector width,
// unrolling and remainder handling for the range; the kernel reads the exact extent at run time.
//
//   jit::bucket_for(1000, /*is_static=*/false, {}).str();          // "513..1024"
//   jit::bucket_for(1000, /*is_static=*/true, {}).str();           // "1000"
//   jit::bucket_for(1000, false, {256, 4096}).str();               // "257..4096"
//   jit::bucket_for(5000, false, {256, 4096}).str();               // "4097..max"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace disc::jit {

struct Bucket {
  int64_t lo = 0, hi = 0;  // inclusive; lo == hi: the extent is a compile-time constant

  bool is_static() const { return lo == hi; }
  bool contains(int64_t cols) const { return lo <= cols && cols <= hi; }
  // "128" (static), "65..128", "4097..max" (open above): part of kernel cache keys.
  std::string str() const;
};

// The bucket of `cols` columns. Dynamic extents of 0, 1 and 2 are alone in their power-of-two
// ranges, so they come back static. `boundaries` need not be sorted; each must be positive.
// Throws InvalidArgument for a negative extent or a boundary below 1.
Bucket bucket_for(int64_t cols, bool is_static, const std::vector<int64_t>& boundaries);

}  // namespace disc::jit
