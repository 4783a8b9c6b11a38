// Argument checks shared by every device's GEMM, so that each backend rejects the same calls
// with the same messages.
#include "devices/device.h"

#include <new>
#include <string>

namespace disc::devices {
namespace {

std::string sizes(const GemmArgs& g) {
  return "batch=" + std::to_string(g.batch) + " m=" + std::to_string(g.m) +
         " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k);
}

// A batch stride must be 0 (only where sharing is allowed) or step past a whole matrix, so
// that entries never overlap.
void check_stride(const GemmArgs& g, const char* which, int64_t stride, int64_t matrix,
                  bool may_share) {
  if (g.batch <= 1) return;
  if (stride == 0 && may_share) return;
  if (stride < matrix) {
    throw InvalidArgument(std::string("gemm: batch_stride_") + which + "=" +
                          std::to_string(stride) + " is smaller than one matrix (" +
                          std::to_string(matrix) + " elements) for " + sizes(g) +
                          ": pass a stride of at least the matrix size" +
                          (may_share ? ", or 0 to share one matrix" : ""));
  }
}

// A leading dim shorter than a stored row would make rows overlap.
void check_lead(const GemmArgs& g, const char* which, int64_t lead, int64_t cols) {
  if (lead < cols) {
    throw InvalidArgument(std::string("gemm: ld") + which + "=" + std::to_string(lead) +
                          " is shorter than a stored row of " + which + " (" +
                          std::to_string(cols) + " elements) for " + sizes(g) +
                          ": pass 0 for dense rows, or at least the row length");
  }
}

// Elements from a matrix's first to one past its last, rows `lead` apart.
int64_t extent(int64_t rows, int64_t cols, int64_t lead) {
  return (rows - 1) * lead + cols;
}

}  // namespace

void check_gemm_args(const GemmArgs& g) {
  if (!is_float(g.dtype)) {
    throw InvalidArgument("gemm: dtype " + std::string(dtype_name(g.dtype)) +
                          " is not supported: cast the operands to f32, bf16, f16 or f64");
  }
  if (g.c_f32 && !is_half_float(g.dtype)) {
    throw InvalidArgument("gemm: an f32 C (c_f32) is for bf16 or f16 operands, not " +
                          std::string(dtype_name(g.dtype)) + ": leave c_f32 unset");
  }
  if (g.batch < 0 || g.m < 0 || g.n < 0 || g.k < 0) {
    throw InvalidArgument("gemm: negative size in " + sizes(g) + ": every size must be >= 0");
  }
  if (g.batch == 0 || g.m == 0 || g.n == 0) return;  // C is empty: nothing is touched
  if (g.c == nullptr || (g.k > 0 && (g.a == nullptr || g.b == nullptr))) {
    throw InvalidArgument("gemm: null operand pointer for " + sizes(g) +
                          ": pass allocated a, b and c");
  }
  const int64_t rows_a = g.transpose_a ? g.k : g.m, cols_a = g.transpose_a ? g.m : g.k;
  const int64_t rows_b = g.transpose_b ? g.n : g.k, cols_b = g.transpose_b ? g.k : g.n;
  check_lead(g, "a", lead_a(g), cols_a);
  check_lead(g, "b", lead_b(g), cols_b);
  check_lead(g, "c", lead_c(g), g.n);
  check_stride(g, "a", g.batch_stride_a, extent(rows_a, cols_a, lead_a(g)), /*may_share=*/false);
  check_stride(g, "b", g.batch_stride_b, extent(rows_b, cols_b, lead_b(g)), /*may_share=*/true);
  check_stride(g, "c", g.batch_stride_c, extent(g.m, g.n, lead_c(g)), /*may_share=*/false);
}

void* Device::allocate_host(size_t bytes) {
  return ::operator new(allocation_size(bytes), std::align_val_t{kAllocAlignment});
}

void Device::deallocate_host(void* p, size_t) {
  ::operator delete(p, std::align_val_t{kAllocAlignment});
}

void Device::decommit(void* /*p*/, size_t from, size_t to) {
  throw InvalidArgument(name() + ": cannot give back bytes [" + std::to_string(from) + ", " +
                        std::to_string(to) + ") of a block: check can_decommit first");
}

}  // namespace disc::devices
