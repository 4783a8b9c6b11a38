// Reference kernels of the optimizer updates (ir/ops/optimizer_ops.cc), following PyTorch 1.13's
// single-tensor SGD and AdamW step by step, in the parameter's dtype, so that f32 results agree
// with PyTorch's to the rounding. The executor may pass an output that aliases its input (an
// in-place update), so each element's inputs are all read before any output is written.
#include <cmath>

#include "ir/ops/kernels.h"

namespace disc::ir {

// g = grad + wd * param; buf' = momentum * buf + g;
// param' = param - lr * (nesterov ? g + momentum * buf' : buf'). PyTorch starts buf as a copy of
// the first g, which is what momentum * 0 + g gives with buf starting at zero.
void sgd_update_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    const T momentum = static_cast<T>(a.a().get_float("momentum"));
    const T wd = static_cast<T>(a.a().get_float("weight_decay"));
    const bool nesterov = a.a().get_bool("nesterov");
    const T lr = a.in[3].as<T>()[0];
    const T* param = a.in[0].as<T>();  // (n)
    const T* grad = a.in[1].as<T>();   // (n)
    const T* buf = a.in[2].as<T>();    // (n)
    T* param_out = a.out[0].as<T>();   // (n), may alias param
    T* buf_out = a.out[1].as<T>();     // (n), may alias buf
    parallel_rows(a.in[0].numel(), [&](int64_t i) {
      T p = param[i], g = grad[i] + wd * p;
      T b = momentum * buf[i] + g;
      T step = nesterov ? g + momentum * b : b;
      param_out[i] = p - lr * step;
      buf_out[i] = b;
    });
  });
}

// param' = param * (1 - lr * wd) - (lr / (1 - b1^t)) * m' / (sqrt(v') / sqrt(1 - b2^t) + eps),
// the order of PyTorch's AdamW; the bias corrections are computed in double.
void adamw_update_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    const double b1 = a.a().get_float("beta1"), b2 = a.a().get_float("beta2");
    const double lr = a.in[4].as<T>()[0];
    const int64_t step = a.in[5].as<int64_t>()[0];
    if (step < 1) {
      throw InvalidArgument("`" + a.op + "`: step is " + std::to_string(step) +
                            "; AdamW counts steps from 1 (pass 1 at the first update)");
    }
    const T decay = static_cast<T>(1 - lr * a.a().get_float("weight_decay"));
    const T step_size = static_cast<T>(lr / (1 - std::pow(b1, static_cast<double>(step))));
    const T bc2_sqrt = static_cast<T>(std::sqrt(1 - std::pow(b2, static_cast<double>(step))));
    const T eps = static_cast<T>(a.a().get_float("eps"));
    const T tb1 = static_cast<T>(b1), tb2 = static_cast<T>(b2);
    const T* param = a.in[0].as<T>();  // (n)
    const T* grad = a.in[1].as<T>();   // (n)
    const T* m = a.in[2].as<T>();      // (n)
    const T* v = a.in[3].as<T>();      // (n)
    T* param_out = a.out[0].as<T>();   // (n), may alias param
    T* m_out = a.out[1].as<T>();       // (n), may alias m
    T* v_out = a.out[2].as<T>();       // (n), may alias v
    parallel_rows(a.in[0].numel(), [&](int64_t i) {
      T p = param[i], g = grad[i];
      T m1 = m[i] * tb1 + g * static_cast<T>(1 - b1);
      T v1 = v[i] * tb2 + static_cast<T>(1 - b2) * g * g;
      T denom = std::sqrt(v1) / bc2_sqrt + eps;
      param_out[i] = p * decay - step_size * (m1 / denom);
      m_out[i] = m1;
      v_out[i] = v1;
    });
  });
}

}  // namespace disc::ir
