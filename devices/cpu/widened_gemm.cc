#include "devices/cpu/widened_gemm.h"

#include <memory>

#include "devices/cpu/half_arrays.h"

namespace disc::devices::cpu {
namespace {

// Elements from an operand's first to its last, over every batch entry.
int64_t span(int64_t batch, int64_t batch_stride, int64_t rows, int64_t cols, int64_t lead) {
  return (batch - 1) * batch_stride + (rows - 1) * lead + cols;
}

std::unique_ptr<float[]> widened(DType type, const void* half, int64_t n) {
  std::unique_ptr<float[]> out(new float[static_cast<size_t>(n)]);
  widen_half(type, half, out.get(), n);
  return out;
}

}  // namespace

void widened_gemm(const GemmArgs& g, const std::function<void(const GemmArgs&)>& f32_gemm) {
  const int64_t rows_a = g.transpose_a ? g.k : g.m, cols_a = g.transpose_a ? g.m : g.k;
  const int64_t rows_b = g.transpose_b ? g.n : g.k, cols_b = g.transpose_b ? g.k : g.n;
  const int64_t n_c = span(g.batch, g.batch_stride_c, g.m, g.n, lead_c(g));
  const auto a = widened(g.dtype, g.a, span(g.batch, g.batch_stride_a, rows_a, cols_a, lead_a(g)));
  const auto b = widened(g.dtype, g.b, span(g.batch, g.batch_stride_b, rows_b, cols_b, lead_b(g)));
  GemmArgs f = g;
  f.dtype = DType::kF32;
  f.c_f32 = false;
  f.a = a.get(), f.b = b.get();
  f.lda = lead_a(g), f.ldb = lead_b(g);
  if (g.c_f32) return f32_gemm(f);  // C is f32 already
  // C's sums when accumulating, and what lies between its rows, which goes back as it was.
  const bool dense_c = lead_c(g) == g.n && (g.batch == 1 || g.batch_stride_c == g.m * g.n);
  const auto c = g.accumulate || !dense_c ? widened(g.dtype, g.c, n_c)
                                          : std::unique_ptr<float[]>(new float[n_c]);
  f.c = c.get(), f.ldc = lead_c(g);
  f32_gemm(f);
  narrow_half(g.dtype, c.get(), g.c, n_c);
}

}  // namespace disc::devices::cpu
