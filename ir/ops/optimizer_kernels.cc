// Reference kernels of the optimizer updates (ir/ops/optimizer_ops.cc), following PyTorch 1.13's
// single-tensor SGD and AdamW step by step, in the parameter's dtype, so that f32 results agree
// with PyTorch's to the rounding. The executor may pass an output that aliases its input (an
// in-place update), so each element's inputs are all read before any output is written. The
// compact kernels (the state in bf16 or 8-bit codes, state_codec.h) widen a block of the state to
// f32, run the same arithmetic on it, and round it back, a block at a time.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/half.h"
#include "ir/ops/kernels.h"
#include "ir/ops/state_codec.h"

namespace disc::ir {

namespace {

// SGD's arithmetic for one element: updates p and b.
template <typename T>
struct Sgd {
  T momentum, wd, lr;
  bool nesterov;

  explicit Sgd(const KernelArgs& a, T lr_value)
      : momentum(static_cast<T>(a.a().get_float("momentum"))),
        wd(static_cast<T>(a.a().get_float("weight_decay"))),
        lr(lr_value),
        nesterov(a.a().get_bool("nesterov")) {}
  void operator()(T& p, T grad, T& b) const {
    T g = grad + wd * p;
    b = momentum * b + g;
    p = p - lr * (nesterov ? g + momentum * b : b);
  }
};

// AdamW's arithmetic for one element, its per-call scalars made once: updates p, m and v.
template <typename T>
struct AdamW {
  T decay, step_size, bc2_sqrt, eps, b1, b2, one_minus_b1, one_minus_b2;

  AdamW(const KernelArgs& a, double lr, int64_t step) {
    const double beta1 = a.a().get_float("beta1"), beta2 = a.a().get_float("beta2");
    if (step < 1) {
      throw InvalidArgument("`" + a.op + "`: step is " + std::to_string(step) +
                            "; AdamW counts steps from 1 (pass 1 at the first update)");
    }
    decay = static_cast<T>(1 - lr * a.a().get_float("weight_decay"));
    step_size = static_cast<T>(lr / (1 - std::pow(beta1, static_cast<double>(step))));
    bc2_sqrt = static_cast<T>(std::sqrt(1 - std::pow(beta2, static_cast<double>(step))));
    eps = static_cast<T>(a.a().get_float("eps"));
    b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2);
    one_minus_b1 = static_cast<T>(1 - beta1), one_minus_b2 = static_cast<T>(1 - beta2);
  }
  void operator()(T& p, T g, T& m, T& v) const {
    m = m * b1 + g * one_minus_b1;
    v = v * b2 + one_minus_b2 * g * g;
    T denom = std::sqrt(v) / bc2_sqrt + eps;
    p = p * decay - step_size * (m / denom);
  }
};

// One moment of a compact state (state_codec.h): its held tensors as operands and as results.
struct HeldMoment {
  TensorRef in, in_scale, out, out_scale;  // the scales: int8 only
  state_codec::Sign sign;
  uint64_t salt;

  bool int8() const { return in.dtype == DType::kU8; }
  // Elements [first, first + n) (block `block`) as f32.
  void load(int64_t block, int64_t first, int64_t n, float* x) const {
    if (int8()) {
      state_codec::decode_block(in.as<uint8_t>() + first, n, in_scale.as<float>()[block], sign, x);
    } else {
      for (int64_t i = 0; i < n; ++i) x[i] = bf16_to_f32(in.as<uint16_t>()[first + i]);
    }
  }
  void store(int64_t block, int64_t first, int64_t n, const float* x, int64_t step) const {
    if (int8()) {
      out_scale.as<float>()[block] =
          state_codec::encode_block(x, n, sign, out.as<uint8_t>() + first, salt, step, first);
    } else {
      for (int64_t i = 0; i < n; ++i)
        out.as<uint16_t>()[first + i] =
            state_codec::to_bf16_stochastic(x[i], state_codec::dither(salt, step, first + i));
    }
  }
};

// The held moments of a compact update's operands (after param and grad) and results (after
// param'), in order; signs[i] says whether moment i can be negative.
std::vector<HeldMoment> held_moments(const KernelArgs& a,
                                     const std::vector<state_codec::Sign>& signs) {
  const int per = a.a().get_string("state") == "int8" ? 2 : 1;
  const auto salt = static_cast<uint64_t>(a.a().get_int("salt"));
  std::vector<HeldMoment> held;
  for (int i = 0; i < static_cast<int>(signs.size()); ++i) {
    HeldMoment h{.in = a.in[2 + per * i],
                 .out = a.out[1 + per * i],
                 .sign = signs[i],
                 .salt = salt ^ (0x5851F42D4C957F2Dull * static_cast<uint64_t>(i + 1))};
    if (per == 2) h.in_scale = a.in[3 + per * i], h.out_scale = a.out[2 + per * i];
    held.push_back(h);
  }
  return held;
}

// A compact update's scalars after its held tensors: lr, step, and whether a guard operand says
// to keep every value (any value but 0, NaN included).
struct CompactScalars {
  float lr;
  int64_t step;
  bool keep;
};

CompactScalars compact_scalars(const KernelArgs& a, const std::vector<HeldMoment>& held) {
  const size_t at = 2 + held.size() * (held.front().int8() ? 2 : 1);
  return {.lr = a.in[at].as<float>()[0],
          .step = a.in[at + 1].as<int64_t>()[0],
          .keep = a.in.size() > at + 2 && a.in[at + 2].as<float>()[0] != 0.0f};
}

// Each result as its operand was, where the executor gave it a buffer of its own.
void keep_all(const KernelArgs& a, const std::vector<HeldMoment>& held) {
  auto copy = [](const TensorRef& from, const TensorRef& to) {
    if (to.data != from.data) std::memcpy(to.data, from.data, static_cast<size_t>(from.bytes()));
  };
  copy(a.in[0], a.out[0]);
  for (const HeldMoment& h : held) {
    copy(h.in, h.out);
    if (h.int8()) copy(h.in_scale, h.out_scale);
  }
}

// Calls f(block, first, n) for the blocks of state_codec::kBlock elements of [0, total), spread
// over TBB's threads: a block's moments are widened, updated and rounded back by one call.
template <typename F>
void for_state_blocks(int64_t total, F&& f) {
  parallel_rows(state_codec::blocks_of(total), [&](int64_t b) {
    const int64_t first = b * state_codec::kBlock;
    f(b, first, std::min(state_codec::kBlock, total - first));
  });
}

}  // namespace

// g = grad + wd * param; buf' = momentum * buf + g;
// param' = param - lr * (nesterov ? g + momentum * buf' : buf'). PyTorch starts buf as a copy of
// the first g, which is what momentum * 0 + g gives with buf starting at zero.
void sgd_update_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    const Sgd<T> sgd(a, a.in[3].as<T>()[0]);
    const T* param = a.in[0].as<T>();  // (n)
    const T* grad = a.in[1].as<T>();   // (n)
    const T* buf = a.in[2].as<T>();    // (n)
    T* param_out = a.out[0].as<T>();   // (n), may alias param
    T* buf_out = a.out[1].as<T>();     // (n), may alias buf
    parallel_rows(a.in[0].numel(), [&](int64_t i) {
      T p = param[i], b = buf[i];
      sgd(p, grad[i], b);
      param_out[i] = p;
      buf_out[i] = b;
    });
  });
}

// param' = param * (1 - lr * wd) - (lr / (1 - b1^t)) * m' / (sqrt(v') / sqrt(1 - b2^t) + eps),
// the order of PyTorch's AdamW; the bias corrections are computed in double.
void adamw_update_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    const AdamW<T> adamw(a, a.in[4].as<T>()[0], a.in[5].as<int64_t>()[0]);
    const T* param = a.in[0].as<T>();  // (n)
    const T* grad = a.in[1].as<T>();   // (n)
    const T* m = a.in[2].as<T>();      // (n)
    const T* v = a.in[3].as<T>();      // (n)
    T* param_out = a.out[0].as<T>();   // (n), may alias param
    T* m_out = a.out[1].as<T>();       // (n), may alias m
    T* v_out = a.out[2].as<T>();       // (n), may alias v
    parallel_rows(a.in[0].numel(), [&](int64_t i) {
      T p = param[i], m1 = m[i], v1 = v[i];
      adamw(p, grad[i], m1, v1);
      param_out[i] = p;
      m_out[i] = m1;
      v_out[i] = v1;
    });
  });
}

// The compact kernels: each block's moments widened to f32, updated as above, rounded back.
void sgd_update_compact_kernel(const KernelArgs& a) {
  const auto held = held_moments(a, {state_codec::Sign::kSigned});
  const auto [lr, step, keep] = compact_scalars(a, held);
  if (keep) return keep_all(a, held);
  const Sgd<float> sgd(a, lr);
  const float* param = a.in[0].as<float>();
  const float* grad = a.in[1].as<float>();
  float* param_out = a.out[0].as<float>();  // may alias param
  for_state_blocks(a.in[0].numel(), [&](int64_t block, int64_t first, int64_t n) {
    float buf[state_codec::kBlock];
    held[0].load(block, first, n, buf);
    for (int64_t i = 0; i < n; ++i) {
      float p = param[first + i];
      sgd(p, grad[first + i], buf[i]);
      param_out[first + i] = p;
    }
    held[0].store(block, first, n, buf, step);
  });
}

void adamw_update_compact_kernel(const KernelArgs& a) {
  const auto held = held_moments(a, {state_codec::Sign::kSigned, state_codec::Sign::kUnsigned});
  const auto [lr, step, keep] = compact_scalars(a, held);
  if (keep) return keep_all(a, held);
  const AdamW<float> adamw(a, lr, step);
  const float* param = a.in[0].as<float>();
  const float* grad = a.in[1].as<float>();
  float* param_out = a.out[0].as<float>();  // may alias param
  for_state_blocks(a.in[0].numel(), [&](int64_t block, int64_t first, int64_t n) {
    float m[state_codec::kBlock], v[state_codec::kBlock];
    held[0].load(block, first, n, m);
    held[1].load(block, first, n, v);
    for (int64_t i = 0; i < n; ++i) {
      float p = param[first + i];
      adamw(p, grad[first + i], m[i], v[i]);
      param_out[first + i] = p;
    }
    held[0].store(block, first, n, m, step);
    held[1].store(block, first, n, v, step);
  });
}

}  // namespace disc::ir
