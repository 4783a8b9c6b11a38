// GEMM as plain blocked loops over strided operands; see loop_gemm.h for why it exists.
#include "devices/cpu/loop_gemm.h"

#include <tbb/blocked_range2d.h>
#include <tbb/parallel_for.h>

#include <algorithm>

namespace disc::devices::cpu {
namespace {

// Rows of C per task, and the K and N extents of one block: 64x64 doubles of B (32 KiB) stay in
// L1/L2 while a row block sweeps over them.
constexpr int64_t kRowBlock = 16;
constexpr int64_t kBlock = 64;

// Element (r, c) of a row-major matrix, or of the transpose of one.
template <typename T>
struct View {
  const T* data;
  int64_t row_stride, col_stride;
  T at(int64_t r, int64_t c) const { return data[r * row_stride + c * col_stride]; }
};

// C[i0:i1, :] of one batch entry, accumulated block by block over K and N.
template <typename T>
void gemm_rows(const GemmArgs& g, View<T> a, View<T> b, T* c, int64_t i0, int64_t i1) {
  const int64_t ldc = lead_c(g);
  if (!g.accumulate) {
    for (int64_t i = i0; i < i1; ++i) std::fill(c + i * ldc, c + i * ldc + g.n, T(0));
  }
  for (int64_t p0 = 0; p0 < g.k; p0 += kBlock) {
    const int64_t p1 = std::min(g.k, p0 + kBlock);
    for (int64_t j0 = 0; j0 < g.n; j0 += kBlock) {
      const int64_t j1 = std::min(g.n, j0 + kBlock);
      for (int64_t i = i0; i < i1; ++i) {
        T* c_row = c + i * ldc;
        for (int64_t p = p0; p < p1; ++p) {
          const T a_ip = a.at(i, p);
          for (int64_t j = j0; j < j1; ++j) c_row[j] += a_ip * b.at(p, j);
        }
      }
    }
  }
}

template <typename T>
void gemm_typed(const GemmArgs& g) {
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  T* c = static_cast<T*>(g.c);
  const int64_t row_blocks = (g.m + kRowBlock - 1) / kRowBlock;
  const tbb::blocked_range2d<int64_t> all(0, g.batch, 0, row_blocks);
  tbb::parallel_for(all, [&](const tbb::blocked_range2d<int64_t>& r) {
    for (int64_t e = r.rows().begin(); e != r.rows().end(); ++e) {
      View<T> va{a + e * g.batch_stride_a, g.transpose_a ? 1 : lead_a(g),
                 g.transpose_a ? lead_a(g) : 1};
      View<T> vb{b + e * g.batch_stride_b, g.transpose_b ? 1 : lead_b(g),
                 g.transpose_b ? lead_b(g) : 1};
      T* c_entry = c + e * g.batch_stride_c;
      for (int64_t blk = r.cols().begin(); blk != r.cols().end(); ++blk) {
        gemm_rows(g, va, vb, c_entry, blk * kRowBlock, std::min(g.m, (blk + 1) * kRowBlock));
      }
    }
  });
}

}  // namespace

void zero_c(const GemmArgs& g) {
  const int64_t size = g.c_f32 ? 4 : dtype_size(g.dtype), ldc = lead_c(g);
  for (int64_t e = 0; e < g.batch; ++e)
    for (int64_t i = 0; i < g.m; ++i)
      std::fill_n(static_cast<std::byte*>(g.c) + (e * g.batch_stride_c + i * ldc) * size,
                  g.n * size, std::byte{0});
}

void loop_gemm(const GemmArgs& g) {
  if (g.dtype == DType::kF64) {
    gemm_typed<double>(g);
  } else {
    gemm_typed<float>(g);
  }
}

}  // namespace disc::devices::cpu
