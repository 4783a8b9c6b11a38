#include "devices/cpu/half_arrays.h"

#include <tbb/parallel_for.h>

#include <algorithm>

#include "base/half.h"

namespace disc::devices::cpu {
namespace {

// Calls f(i0, i1) over blocks of [0, n), spread over TBB's threads (the GEMM's OpenMP threads
// start only after they are done).
template <typename F>
void for_blocks(int64_t n, F&& f) {
  constexpr int64_t kBlock = 16384;
  tbb::parallel_for(int64_t{0}, (n + kBlock - 1) / kBlock,
                    [&](int64_t b) { f(b * kBlock, std::min(n, (b + 1) * kBlock)); });
}

}  // namespace

void widen_half(DType type, const void* from, float* to, int64_t n) {
  const auto* bits = static_cast<const uint16_t*>(from);
  for_blocks(n, [&](int64_t i0, int64_t i1) { half_to_f32(type, bits + i0, to + i0, i1 - i0); });
}

void narrow_half(DType type, const float* from, void* to, int64_t n) {
  auto* bits = static_cast<uint16_t*>(to);
  for_blocks(n, [&](int64_t i0, int64_t i1) { f32_to_half(type, from + i0, bits + i0, i1 - i0); });
}

}  // namespace disc::devices::cpu
