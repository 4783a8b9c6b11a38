// Reference kernels of the gradient ops of ir/ops/grad_ops.cc for gelu, softmax, log_softmax,
// the norms and cross-entropy (the conv and pool gradients live in conv_kernels.cc). Row work
// runs one row per thread; weight and bias gradients sum over rows one column per thread, rows in
// order, so every sum has a fixed order.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "ir/ops/kernels.h"

namespace disc::ir {
namespace {

// d/dx gelu(x), in PyTorch's formulation of each form.
double gelu_derivative(double x, bool tanh_form) {
  if (tanh_form) {
    const double beta = std::sqrt(2.0 / std::numbers::pi), kappa = 0.044715;
    double th = std::tanh(beta * (x + kappa * x * x * x));
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * beta * (1 + 3 * kappa * x * x);
  }
  double cdf = 0.5 * (1 + std::erf(x / std::numbers::sqrt2));
  double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
  return cdf + x * pdf;
}

// out[j] = sum over rows r of f(r, j), one column per thread, rows in order.
template <typename T, typename F>
void column_sums(int64_t rows, int64_t d, T* out, F f) {
  parallel_rows(d, [&](int64_t j) {
    double acc = 0;
    for (int64_t r = 0; r < rows; ++r) acc += f(r, j);
    out[j] = static_cast<T>(acc);
  });
}

// softmax and log_softmax gradients from the forward's output y, along the axis:
//   softmax:     dx = y * (dy - sum(dy * y))
//   log_softmax: dx = dy - exp(y) * sum(dy)
template <typename T>
void softmax_grad_rows(const KernelArgs& a, bool log) {
  AxisRows rows = axis_rows(a.in[0], a.a().get_int("axis"));
  const T* y = a.in[0].as<T>();   // (..., extent, ...)
  const T* dy = a.in[1].as<T>();  // like y
  T* dx = a.out[0].as<T>();       // like y
  parallel_rows(rows.count, [&](int64_t r) {
    int64_t s = rows.start(r), st = rows.stride, n = rows.extent;
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) {
      int64_t e = s + k * st;
      sum += log ? static_cast<double>(dy[e]) : static_cast<double>(dy[e]) * y[e];
    }
    for (int64_t k = 0; k < n; ++k) {
      int64_t e = s + k * st;
      dx[e] = static_cast<T>(log ? dy[e] - std::exp(static_cast<double>(y[e])) * sum
                                 : y[e] * (dy[e] - sum));
    }
  });
}

}  // namespace

void gelu_grad_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    bool tanh_form = a.a().get_string("approximate") == "tanh";
    const T* x = a.in[0].as<T>();   // (n)
    const T* dy = a.in[1].as<T>();  // (n)
    T* dx = a.out[0].as<T>();       // (n)
    parallel_rows(a.in[0].numel(), [&](int64_t i) {
      dx[i] = static_cast<T>(dy[i] * gelu_derivative(x[i], tanh_form));
    });
  });
}

void softmax_grad_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) { softmax_grad_rows<decltype(t)>(a, false); });
}

void log_softmax_grad_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) { softmax_grad_rows<decltype(t)>(a, true); });
}

// y = x * inv * w with inv = (mean(x^2) + eps)^(-1/2):
// dx_j = inv * w_j * dy_j - inv^3 / D * x_j * sum_k(dy_k * w_k * x_k); dw_j = sum_rows dy_j x_j
// inv.
void rms_norm_grad_kernel(const KernelArgs& a) {
  with_norm_operands(a, [&](auto t, auto x, auto w, int64_t d, int64_t rows, double eps) {
    using T = decltype(t);
    const T* dy = a.in[2].as<T>();  // (R, D)
    T* dx = a.out[0].as<T>();       // (R, D)
    std::vector<double> inv(rows);  // (R)
    parallel_rows(rows, [&](int64_t r) {
      const T *xr = x + r * d, *dyr = dy + r * d;
      inv[r] = row_rms_inv(xr, d, eps);
      double dot = 0;
      for (int64_t j = 0; j < d; ++j) dot += static_cast<double>(dyr[j]) * w[j] * xr[j];
      double c = inv[r] * inv[r] * inv[r] / d * dot;
      for (int64_t j = 0; j < d; ++j)
        dx[r * d + j] = static_cast<T>(inv[r] * w[j] * dyr[j] - c * xr[j]);
    });
    column_sums(rows, d, a.out[1].as<T>(), [&](int64_t r, int64_t j) {  // dw (D)
      return static_cast<double>(dy[r * d + j]) * x[r * d + j] * inv[r];
    });
  });
}

// With xhat = (x - mean) * rstd and g = dy * w:
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)); dw = sum_rows dy * xhat; db = sum_rows dy.
void layer_norm_grad_kernel(const KernelArgs& a) {
  with_norm_operands(a, [&](auto t, auto x, auto w, int64_t d, int64_t rows, double eps) {
    using T = decltype(t);
    const T* dy = a.in[2].as<T>();    // (R, D)
    T* dx = a.out[0].as<T>();         // (R, D)
    std::vector<RowMoments> m(rows);  // (R)
    parallel_rows(rows, [&](int64_t r) {
      const T *xr = x + r * d, *dyr = dy + r * d;
      m[r] = row_moments(xr, d, eps);
      double mean_g = 0, mean_gx = 0;
      for (int64_t j = 0; j < d; ++j) {
        double g = static_cast<double>(dyr[j]) * w[j];
        mean_g += g;
        mean_gx += g * (xr[j] - m[r].mean) * m[r].rstd;
      }
      mean_g /= d;
      mean_gx /= d;
      for (int64_t j = 0; j < d; ++j) {
        double xhat = (xr[j] - m[r].mean) * m[r].rstd;
        dx[r * d + j] = static_cast<T>(
            m[r].rstd * (static_cast<double>(dyr[j]) * w[j] - mean_g - xhat * mean_gx));
      }
    });
    column_sums(rows, d, a.out[1].as<T>(), [&](int64_t r, int64_t j) {  // dw (D)
      return static_cast<double>(dy[r * d + j]) * (x[r * d + j] - m[r].mean) * m[r].rstd;
    });
    column_sums(rows, d, a.out[2].as<T>(), [&](int64_t r, int64_t j) {  // db (D)
      return static_cast<double>(dy[r * d + j]);
    });
  });
}

// Counted rows get dloss * (softmax(row) - onehot(label)) / count; ignored rows, and every row
// when none is counted (the forward's loss is then the constant 0), get zeros.
void cross_entropy_grad_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    int64_t v = a.in[0].shape.back(), rows = last_dim_rows(a.in[0]);
    int64_t ignore = a.a().get_int("ignore_index");
    int64_t count = count_labels(a.op, a.in[1], v, ignore);
    double scale = count == 0 ? 0.0 : static_cast<double>(a.in[2].as<T>()[0]) / count;
    const T* logits = a.in[0].as<T>();  // (R, V)
    T* dlogits = a.out[0].as<T>();      // (R, V)
    parallel_rows(rows, [&](int64_t r) {
      int64_t label = index_at(a.in[1], r);
      const T* row = logits + r * v;
      T* out = dlogits + r * v;
      if (label == ignore || count == 0) {
        std::fill(out, out + v, T(0));
        return;
      }
      RowExpSum<T> e = row_exp_sum(row, v);
      for (int64_t j = 0; j < v; ++j) {
        double p = std::exp(static_cast<double>(row[j] - e.max)) / e.sum;
        out[j] = static_cast<T>((p - (j == label ? 1.0 : 0.0)) * scale);
      }
    });
  });
}

}  // namespace disc::ir
