#include "devices/cpu/widened_gemm.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "base/half.h"

namespace disc::devices::cpu {
namespace {

// Elements from an operand's first to its last, over every batch entry.
int64_t span(int64_t batch, int64_t batch_stride, int64_t rows, int64_t cols, int64_t lead) {
  return (batch - 1) * batch_stride + (rows - 1) * lead + cols;
}

// Calls f(i0, i1) over blocks of [0, n), spread over TBB's threads (the GEMM's OpenMP threads
// start only after they are done).
template <typename F>
void for_blocks(int64_t n, F&& f) {
  constexpr int64_t kBlock = 16384;
  tbb::parallel_for(int64_t{0}, (n + kBlock - 1) / kBlock,
                    [&](int64_t b) { f(b * kBlock, std::min(n, (b + 1) * kBlock)); });
}

std::unique_ptr<float[]> widen(const void* bf16, int64_t n) {
  std::unique_ptr<float[]> out(new float[static_cast<size_t>(n)]);
  const auto* bits = static_cast<const uint16_t*>(bf16);
  for_blocks(n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) out[i] = bf16_to_f32(bits[i]);
  });
  return out;
}

}  // namespace

void widened_bf16_gemm(const GemmArgs& g, const std::function<void(const GemmArgs&)>& f32_gemm) {
  const int64_t rows_a = g.transpose_a ? g.k : g.m, cols_a = g.transpose_a ? g.m : g.k;
  const int64_t rows_b = g.transpose_b ? g.n : g.k, cols_b = g.transpose_b ? g.k : g.n;
  const int64_t n_c = span(g.batch, g.batch_stride_c, g.m, g.n, lead_c(g));
  const auto a = widen(g.a, span(g.batch, g.batch_stride_a, rows_a, cols_a, lead_a(g)));
  const auto b = widen(g.b, span(g.batch, g.batch_stride_b, rows_b, cols_b, lead_b(g)));
  // C's sums when accumulating, and what lies between its rows, which goes back as it was.
  const bool dense_c = lead_c(g) == g.n && (g.batch == 1 || g.batch_stride_c == g.m * g.n);
  const auto c =
      g.accumulate || !dense_c ? widen(g.c, n_c) : std::unique_ptr<float[]>(new float[n_c]);
  GemmArgs f = g;
  f.dtype = DType::kF32;
  f.a = a.get(), f.b = b.get(), f.c = c.get();
  f.lda = lead_a(g), f.ldb = lead_b(g), f.ldc = lead_c(g);
  f32_gemm(f);
  auto* out = static_cast<uint16_t*>(g.c);
  for_blocks(n_c, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) out[i] = f32_to_bf16(c[i]);
  });
}

}  // namespace disc::devices::cpu
