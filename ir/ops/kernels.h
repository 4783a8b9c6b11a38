// Reference kernels of the composite ops (nn, conv/pool, their gradients, optimizer updates):
// plain loops over dense row-major host tensors, f32 and f64. They are the oracle every fast
// kernel is tested against, so they favour clarity, and they are deterministic: work is split
// across threads only between independent rows, never inside one sum, so results are bit for bit
// the same for any thread count.
#pragma once

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "ir/ops/index_math.h"
#include "ir/tensor_ref.h"

namespace disc::ir {

// nn_kernels.cc
void softmax_kernel(const KernelArgs& a);
void log_softmax_kernel(const KernelArgs& a);
void rms_norm_kernel(const KernelArgs& a);
void layer_norm_kernel(const KernelArgs& a);
void cross_entropy_kernel(const KernelArgs& a);
void rope_kernel(const KernelArgs& a);
void causal_mask_kernel(const KernelArgs& a);
void dropout_kernel(const KernelArgs& a);

// The dropout RNG, exposed so that a fast kernel can reproduce the reference's mask: uniform in
// [0, 1) for element `e` of a dropout keyed by (seed, stream).
double dropout_uniform(int64_t seed, int64_t stream, int64_t e);

// attention_kernels.cc
void attention_kernel(const KernelArgs& a);
void attention_grad_kernel(const KernelArgs& a);

// conv_kernels.cc
void conv2d_kernel(const KernelArgs& a);
void max_pool2d_kernel(const KernelArgs& a);
void avg_pool2d_kernel(const KernelArgs& a);
void conv2d_grad_input_kernel(const KernelArgs& a);
void conv2d_grad_weight_kernel(const KernelArgs& a);
void max_pool2d_grad_kernel(const KernelArgs& a);
void avg_pool2d_grad_kernel(const KernelArgs& a);

// grad_kernels.cc
void gelu_grad_kernel(const KernelArgs& a);
void softmax_grad_kernel(const KernelArgs& a);
void log_softmax_grad_kernel(const KernelArgs& a);
void rms_norm_grad_kernel(const KernelArgs& a);
void layer_norm_grad_kernel(const KernelArgs& a);
void cross_entropy_grad_kernel(const KernelArgs& a);

// optimizer_kernels.cc
void sgd_update_kernel(const KernelArgs& a);
void adamw_update_kernel(const KernelArgs& a);
void sgd_update_compact_kernel(const KernelArgs& a);
void adamw_update_compact_kernel(const KernelArgs& a);

// --- Helpers the kernel files share ---

// Calls f(i) for i in [0, n), rows spread over TBB's threads. Each f(i) must touch only its own
// outputs, which is what keeps results independent of the thread count.
template <typename F>
void parallel_rows(int64_t n, F&& f) {
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n), [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t i = r.begin(); i < r.end(); ++i) f(i);
  });
}

// How many rows of its last dim `t` has (0 when that dim is empty, rather than 0 / 0).
inline int64_t last_dim_rows(const TensorRef& t) {
  int64_t d = t.shape.back();
  return d == 0 ? 0 : t.numel() / d;
}

// The 1-D rows of a tensor along one axis: row r has `extent` elements, the k-th at
// start(r) + k * stride.
struct AxisRows {
  int64_t count = 1, extent = 1, stride = 1;
  int64_t start(int64_t r) const { return r / stride * extent * stride + r % stride; }
};
inline AxisRows axis_rows(const TensorRef& t, int64_t axis) {
  AxisSplit s = split_at(t.shape, static_cast<int>(axis < 0 ? axis + t.rank() : axis));
  return {s.outer * s.inner, s.extent, s.inner};
}

// The max of one row of n elements, x[0], x[stride], ..., and the sum of exp(x[k] - max) in
// double (softmax, cross-entropy and its gradient). Subtracting the max first keeps exp from
// overflowing; x[k] - max is taken in T, as the callers take it again when they normalise, so
// both see the same shifted values.
template <typename T>
struct RowExpSum {
  T max;
  double sum;
};
template <typename T>
RowExpSum<T> row_exp_sum(const T* x, int64_t n, int64_t stride = 1) {
  T max = -std::numeric_limits<T>::infinity();
  for (int64_t k = 0; k < n; ++k) max = std::max(max, x[k * stride]);
  double sum = 0;
  for (int64_t k = 0; k < n; ++k) sum += std::exp(static_cast<double>(x[k * stride] - max));
  return {max, sum};
}

// Runs f(T{}, x, w, d, rows, eps) in x's dtype T with the operands every norm kernel (rms_norm,
// layer_norm and their gradients) reads first: x (R, D) normalised over its last dim, d = D,
// rows = R, w (D) scaling each column, and the eps attribute.
template <typename F>
void with_norm_operands(const KernelArgs& a, F&& f) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    f(t, a.in[0].as<T>(), a.in[1].as<T>(), a.in[0].shape.back(), last_dim_rows(a.in[0]),
      a.a().get_float("eps"));
  });
}

// Mean and 1 / sqrt(biased variance + eps) of one row of d elements (layer_norm), in double.
struct RowMoments {
  double mean = 0, rstd = 0;
};
template <typename T>
RowMoments row_moments(const T* x, int64_t d, double eps) {
  double sum = 0;
  for (int64_t j = 0; j < d; ++j) sum += x[j];
  double mean = sum / d, var = 0;
  for (int64_t j = 0; j < d; ++j) var += (x[j] - mean) * (x[j] - mean);
  return {mean, 1.0 / std::sqrt(var / d + eps)};
}

// 1 / sqrt(mean(x^2) + eps) of one row of d elements (rms_norm), in double.
template <typename T>
double row_rms_inv(const T* x, int64_t d, double eps) {
  double sum_sq = 0;
  for (int64_t j = 0; j < d; ++j) sum_sq += static_cast<double>(x[j]) * x[j];
  return 1.0 / std::sqrt(sum_sq / d + eps);
}

// The error for an index (a token id) at `position` of an op's indices outside [0, rows): the
// reference kernels' and the GPU's, the same words.
[[noreturn]] void throw_bad_index(const std::string& op, int64_t index, int64_t position,
                                  int64_t rows);

// How many labels count toward a cross-entropy mean (those != ignore_index). Throws
// InvalidArgument for a counted label outside [0, classes).
int64_t count_labels(const std::string& op, const TensorRef& labels, int64_t classes,
                     int64_t ignore_index);
// count_labels' error for `label` at `position`.
[[noreturn]] void throw_bad_label(const std::string& op, int64_t label, int64_t position,
                                  int64_t classes, int64_t ignore_index);

}  // namespace disc::ir
