// A row-major GemmArgs as the arguments of a column-major BLAS gemm (cuBLAS, hipBLAS): C = A B in
// row-major storage is C^T = B^T A^T in column-major, so the operands swap places and each keeps
// its leading dim. The GPU backends call their library with these; the CPU tests check the
// mapping against the CPU device with a plain column-major loop.
#pragma once

#include <cstdint>

#include "devices/device.h"

namespace disc::devices {

// The arguments of xgemmStridedBatched(transa, transb, m, n, k, alpha, a, lda, stride_a, b, ldb,
// stride_b, beta, c, ldc, stride_c, batch), column-major: c = op(a) op(b), op(a) m x k.
struct BlasGemm {
  bool transa = false, transb = false;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  int64_t batch = 1;
  double beta = 0;  // 1 when the product accumulates
};

inline BlasGemm column_major(const GemmArgs& g) {
  BlasGemm r;
  r.transa = g.transpose_b, r.transb = g.transpose_a;
  r.m = g.n, r.n = g.m, r.k = g.k;
  r.a = g.b, r.lda = lead_b(g), r.stride_a = g.batch_stride_b;
  r.b = g.a, r.ldb = lead_a(g), r.stride_b = g.batch_stride_a;
  r.c = g.c, r.ldc = lead_c(g), r.stride_c = g.batch_stride_c;
  r.batch = g.batch;
  r.beta = g.accumulate ? 1.0 : 0.0;
  return r;
}

}  // namespace disc::devices
