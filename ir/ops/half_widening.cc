#include "ir/ops/half_widening.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "base/half.h"
#include "ir/ops/kernels.h"

namespace disc::ir {
namespace {

// Calls f(i0, i1) over blocks of [0, n), spread over TBB's threads.
template <typename F>
void for_blocks(int64_t n, F&& f) {
  constexpr int64_t kBlock = 16384;
  parallel_rows((n + kBlock - 1) / kBlock,
                [&](int64_t b) { f(b * kBlock, std::min(n, (b + 1) * kBlock)); });
}

void widen(const TensorRef& from, float* to) {
  const auto* bits = from.as<uint16_t>();
  for_blocks(from.numel(),
             [&](int64_t i0, int64_t i1) { half_to_f32(from.dtype, bits + i0, to + i0, i1 - i0); });
}

void narrow(const float* from, const TensorRef& to) {
  auto* bits = to.as<uint16_t>();
  for_blocks(to.numel(),
             [&](int64_t i0, int64_t i1) { f32_to_half(to.dtype, from + i0, bits + i0, i1 - i0); });
}

bool any_half(const std::vector<TensorRef>& ts) {
  return std::any_of(ts.begin(), ts.end(),
                     [](const TensorRef& t) { return is_half_float(t.dtype); });
}

}  // namespace

ReferenceKernel widen_half_floats(ReferenceKernel k) {
  return [k = std::move(k)](const KernelArgs& a) {
    if (!any_half(a.in) && !any_half(a.out)) return k(a);
    KernelArgs wide = a;
    // One f32 copy per 16-bit tensor (an output's is written whole by the kernel).
    std::vector<std::unique_ptr<float[]>> copies;
    copies.reserve(a.in.size() + a.out.size());
    auto to_f32 = [&](TensorRef& t, bool read) {
      if (!is_half_float(t.dtype)) return;
      float* c = copies.emplace_back(new float[static_cast<size_t>(t.numel())]).get();
      if (read) widen(t, c);
      t.dtype = DType::kF32;
      t.data = c;
    };
    for (TensorRef& t : wide.in) to_f32(t, true);
    for (TensorRef& t : wide.out) to_f32(t, false);
    k(wide);
    for (size_t i = 0; i < a.out.size(); ++i)
      if (is_half_float(a.out[i].dtype)) narrow(wide.out[i].as<float>(), a.out[i]);
  };
}

}  // namespace disc::ir
