// Products with a lower-triangular left operand as block GEMMs; see tril_gemm.h.
#include "devices/cpu/tril_gemm.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <string>
#include <vector>

namespace disc::devices {
namespace {

template <typename T>
const void* offset(const void* p, int64_t elems) {
  return static_cast<const T*>(p) + elems;
}

// Calls f(entry, row) for every row of every batch entry, in parallel.
template <typename F>
void for_each_row(const GemmArgs& g, F&& f) {
  tbb::parallel_for(int64_t{0}, g.batch * g.m, [&](int64_t i) { f(i / g.m, i % g.m); });
}

// Row block [r0, r1) of C. Untransposed, it reads A's rows r0..r1 up to column r1 and op(B)'s
// first r1 rows; transposed, A's columns r0..r1 from row r0 down and op(B)'s rows from r0.
template <typename T>
void blocks(Device& dev, const GemmArgs& g) {
  for (int64_t r0 = 0; r0 < g.m; r0 += kTrilBlock) {
    const int64_t r1 = std::min(g.m, r0 + kTrilBlock);
    GemmArgs b = g;
    b.lda = lead_a(g), b.ldb = lead_b(g), b.ldc = lead_c(g);
    b.m = r1 - r0;
    b.c = static_cast<T*>(g.c) + r0 * b.ldc;
    if (g.transpose_a) {
      b.k = g.k - r0;
      b.a = offset<T>(g.a, r0 * b.lda + r0);
      b.b = offset<T>(g.b, g.transpose_b ? r0 : r0 * b.ldb);
    } else {
      b.k = r1;
      b.a = offset<T>(g.a, r0 * b.lda);
    }
    dev.gemm(b);
  }
}

// Whether every stored entry above A's diagonal inside the diagonal blocks is zero (either
// sign): the only such entries `blocks` reads. The bits are or-ed rather than compared, so that
// the loop vectorizes.
template <typename T, typename Bits>
bool diagonal_blocks_lower(const GemmArgs& g) {
  const T* a = static_cast<const T*>(g.a);
  const int64_t lda = lead_a(g);
  std::atomic<bool> lower{true};
  for_each_row(g, [&](int64_t e, int64_t r) {
    const int64_t end = std::min(g.m, (r / kTrilBlock + 1) * kTrilBlock);
    const T* row = a + e * g.batch_stride_a + r * lda;
    Bits bits = 0;
    for (int64_t c = r + 1; c < end; ++c) bits |= std::bit_cast<Bits>(row[c]) << 1;
    if (bits != 0) lower.store(false, std::memory_order_relaxed);
  });
  return lower.load();
}

// A's lower triangle (diagonal included) as a dense batch of [m, m] matrices.
template <typename T>
std::vector<T> lower_copy(const GemmArgs& g) {
  const T* a = static_cast<const T*>(g.a);
  const int64_t lda = lead_a(g), m = g.m;
  std::vector<T> out(g.batch * m * m, T(0));
  for_each_row(g, [&](int64_t e, int64_t r) {
    const T* row = a + e * g.batch_stride_a + r * lda;
    std::copy(row, row + r + 1, out.data() + (e * m + r) * m);
  });
  return out;
}

template <typename T, typename Bits>
void gemm_tril_typed(Device& dev, const GemmArgs& g) {
  if (diagonal_blocks_lower<T, Bits>(g)) return blocks<T>(dev, g);
  const std::vector<T> lower = lower_copy<T>(g);
  GemmArgs dense = g;
  dense.a = lower.data();
  dense.lda = g.m;
  dense.batch_stride_a = g.m * g.m;
  dev.gemm(dense);
}

}  // namespace

void gemm_tril_a(Device& dev, const GemmArgs& g) {
  if (!dev.is_host()) {
    throw InvalidArgument("gemm with a triangular A on " + dev.name() +
                          ": its operands must be host memory");
  }
  check_gemm_args(g);
  if (g.m != g.k) {
    throw InvalidArgument("gemm with a triangular A: A must be square, got m=" +
                          std::to_string(g.m) + " k=" + std::to_string(g.k));
  }
  if (g.batch == 0 || g.m == 0 || g.n == 0) return;
  if (g.dtype == DType::kF64) return gemm_tril_typed<double, uint64_t>(dev, g);
  if (is_half_float(g.dtype))  // 16 bits, the sign on top: bits only
    return gemm_tril_typed<uint16_t, uint16_t>(dev, g);
  gemm_tril_typed<float, uint32_t>(dev, g);
}

}  // namespace disc::devices
