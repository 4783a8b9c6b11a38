// A linear layer's cross-entropy by chunks of rows through the device's GEMM; see
// linear_cross_entropy.h.
#include "devices/cpu/linear_cross_entropy.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "devices/cpu/half_arrays.h"
#include "devices/cpu/panel_types.h"
#include "devices/cpu/row_math.h"

namespace disc::devices {
namespace {

using namespace row_math;
using cpu::bf16_on_dot, cpu::kHalf, cpu::kOperands, cpu::kWideC, cpu::read_panel, cpu::row_done,
    cpu::sums_t;

// One panel row: returns its loss term -log_softmax(x)[label] and leaves in x the term's gradient
// scaled by `scale`: (softmax(x) - onehot(label)) * scale. An ignored row gives 0 and zeros.
template <typename T>
[[gnu::always_inline]] inline double loss_row_of(T* x, int64_t classes, int64_t label, bool counted,
                                                 T scale) {
  if (!counted) {
    std::fill(x, x + classes, T(0));
    return 0;
  }
  const T at_label = x[label];
  const T top = exp_minus_max(x, classes);
  const double sum = lane_sum<double>(x, classes);
  const T factor = static_cast<T>(scale / sum);
  for (int64_t j = 0; j < classes; ++j) x[j] *= factor;
  x[label] -= scale;
  return std::log(sum) + static_cast<double>(top) - static_cast<double>(at_label);
}

// The row function per dtype, each cloned per vector width (Clang clones no templates).
DISC_VECTOR_CLONES double loss_row(float* x, int64_t classes, int64_t label, bool counted,
                                   float scale) {
  return loss_row_of(x, classes, label, counted, scale);
}
DISC_VECTOR_CLONES double loss_row(double* x, int64_t classes, int64_t label, bool counted,
                                   double scale) {
  return loss_row_of(x, classes, label, counted, scale);
}

// C = op(A) op(B) of E operands (panel_types.h).
template <typename E, typename C>
void gemm(Device& dev, int64_t m, int64_t n, int64_t k, const void* a, bool ta, const void* b,
          bool tb, C* c, bool accumulate = false) {
  dev.gemm({.dtype = kOperands<E>,
            .m = m,
            .n = n,
            .k = k,
            .transpose_a = ta,
            .transpose_b = tb,
            .accumulate = accumulate,
            .a = a,
            .b = b,
            .c = c,
            .c_f32 = kWideC<E, C>});
}

// Per chunk of rows [r0, r0 + n): logits = h w in the panel, the rows' loss terms and gradients
// G in place, dh = G w^T, dw += h^T G (w [d, classes]) or G^T h (w [classes, d]). With 16-bit
// operands G is rounded to bf16 for its GEMMs (as autocast's logits' gradient is) and dw summed
// in f32, rounded once at the end.
template <typename E>
void run(Device& dev, const LinearCrossEntropyArgs& a, sums_t<E>* loss, E* dh, E* dw) {
  using T = sums_t<E>;
  const int64_t chunk = cross_entropy_chunk(a), v = a.classes;
  T* g = thread_panel<T>(chunk * v);
  E* ge = read_panel<E>(g, chunk * v);
  const E* h = static_cast<const E*>(a.h);
  const T scale = a.count == 0 ? T(0) : static_cast<T>(1.0 / static_cast<double>(a.count));
  // dw's sums (16-bit: in f32 scratch) start as the first chunk's product: no pass zeroes them.
  std::unique_ptr<float[]> wide_dw;
  T* dw_sums = nullptr;
  if constexpr (kHalf<E>) {
    wide_dw = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(a.d * v));
    dw_sums = wide_dw.get();
  } else {
    dw_sums = dw;
  }
  if (a.rows == 0) std::fill(dw_sums, dw_sums + a.d * v, T(0));
  std::vector<double> terms(static_cast<size_t>(a.rows), 0.0);
  for (int64_t r0 = 0; r0 < a.rows; r0 += chunk) {
    const int64_t n = std::min(chunk, a.rows - r0);
    const E* hc = h + r0 * a.d;
    gemm<E>(dev, n, v, a.d, hc, false, a.w, a.transpose_w, g);
    tbb::parallel_for(int64_t{0}, n, [&](int64_t i) {
      const int64_t label = a.labels[r0 + i];
      terms[r0 + i] = loss_row(g + i * v, v, label, label != a.ignore_index && a.count > 0, scale);
      row_done(g, ge, i, v);
    });
    gemm<E>(dev, n, a.d, v, ge, false, a.w, !a.transpose_w, dh + r0 * a.d);
    if (a.transpose_w)
      gemm<E>(dev, v, a.d, n, ge, true, hc, false, dw_sums, r0 > 0);
    else
      gemm<E>(dev, a.d, v, n, hc, true, ge, false, dw_sums, r0 > 0);
  }
  if constexpr (kHalf<E>) cpu::narrow_half(DType::kBF16, dw_sums, dw, a.d * v);
  double total = 0;  // in row order: the same bits for any threads
  for (double t : terms) total += t;
  *loss = static_cast<T>(a.count == 0 ? 0.0 : total / static_cast<double>(a.count));
}

void check(const Device& dev, const LinearCrossEntropyArgs& a) {
  if (!dev.is_host()) {
    throw InvalidArgument("linear_cross_entropy on " + dev.name() +
                          ": the chunked kernel runs on host memory");
  }
  if (!is_float(a.dtype)) {
    throw InvalidArgument("linear_cross_entropy: dtype " + std::string(dtype_name(a.dtype)) +
                          " is not supported (f32, f64, bf16 or f16)");
  }
  if (a.rows < 0 || a.d < 0 || a.classes < 1) {
    throw InvalidArgument("linear_cross_entropy: bad sizes (rows=" + std::to_string(a.rows) +
                          " d=" + std::to_string(a.d) + " classes=" + std::to_string(a.classes) +
                          "; classes must be >= 1)");
  }
}

// 16-bit h and w through the f32 kernel: both widened, dh and dw summed in f32 scratch and
// rounded once.
void run_widened(Device& dev, const LinearCrossEntropyArgs& a, float* loss, void* dh, void* dw) {
  const int64_t nh = a.rows * a.d, nw = a.d * a.classes;
  const auto h = std::make_unique_for_overwrite<float[]>(nh),
             w = std::make_unique_for_overwrite<float[]>(nw),
             gh = std::make_unique_for_overwrite<float[]>(nh),
             gw = std::make_unique_for_overwrite<float[]>(nw);
  cpu::widen_half(a.dtype, a.h, h.get(), nh);
  cpu::widen_half(a.dtype, a.w, w.get(), nw);
  LinearCrossEntropyArgs f = a;
  f.dtype = DType::kF32, f.h = h.get(), f.w = w.get();
  run(dev, f, loss, gh.get(), gw.get());
  cpu::narrow_half(a.dtype, gh.get(), dh, nh);
  cpu::narrow_half(a.dtype, gw.get(), dw, nw);
}

}  // namespace

int64_t cross_entropy_chunk(const LinearCrossEntropyArgs& a) {
  const int64_t row_bytes = std::max<int64_t>(1, a.classes * cpu::panel_element_bytes(a.dtype));
  return std::clamp<int64_t>(kCrossEntropyPanel / row_bytes, 1, std::max<int64_t>(1, a.rows));
}

void linear_cross_entropy(Device& dev, const LinearCrossEntropyArgs& a, void* loss, void* dh,
                          void* dw) {
  check(dev, a);
  if (bf16_on_dot(dev, a.dtype)) {
    run(dev, a, static_cast<float*>(loss), static_cast<uint16_t*>(dh), static_cast<uint16_t*>(dw));
  } else if (is_half_float(a.dtype)) {
    run_widened(dev, a, static_cast<float*>(loss), dh, dw);
  } else if (a.dtype == DType::kF64) {
    run(dev, a, static_cast<double*>(loss), static_cast<double*>(dh), static_cast<double*>(dw));
  } else {
    run(dev, a, static_cast<float*>(loss), static_cast<float*>(dh), static_cast<float*>(dw));
  }
}

}  // namespace disc::devices
