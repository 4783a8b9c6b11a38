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
  if (type == DType::kBF16)
    for_blocks(n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) to[i] = bf16_to_f32(bits[i]);
    });
  else
    for_blocks(n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) to[i] = f16_to_f32(bits[i]);
    });
}

void narrow_half(DType type, const float* from, void* to, int64_t n) {
  auto* bits = static_cast<uint16_t*>(to);
  if (type == DType::kBF16)
    for_blocks(n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) bits[i] = f32_to_bf16(from[i]);
    });
  else
    for_blocks(n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) bits[i] = f32_to_f16(from[i]);
    });
}

}  // namespace disc::devices::cpu
