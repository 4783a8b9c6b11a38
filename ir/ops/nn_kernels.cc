// Reference kernels of the composite nn ops (ir/ops/nn_ops.cc): softmax, log_softmax, rms_norm,
// layer_norm, cross_entropy, rope, causal_mask, dropout. Sums run in double, one row per thread.
#include <cmath>
#include <vector>

#include "ir/ops/kernels.h"
#include "ir/ops/rope_dims.h"

namespace disc::ir {
namespace {

// softmax and log_softmax: the row's max is subtracted first so exp never overflows.
template <typename T>
void softmax_rows(const KernelArgs& a, bool log) {
  AxisRows rows = axis_rows(a.in[0], a.a().get_int("axis"));
  const T* x = a.in[0].as<T>();  // (..., extent, ...)
  T* y = a.out[0].as<T>();       // like x
  parallel_rows(rows.count, [&](int64_t r) {
    int64_t s = rows.start(r), st = rows.stride, n = rows.extent;
    RowExpSum<T> e = row_exp_sum(x + s, n, st);
    double log_sum = std::log(e.sum);
    for (int64_t k = 0; k < n; ++k) {
      double shifted = static_cast<double>(x[s + k * st] - e.max);
      y[s + k * st] = static_cast<T>(log ? shifted - log_sum : std::exp(shifted) / e.sum);
    }
  });
}

// Inverse frequencies theta^(-2i/D) of rope, i in [0, D/2), in double.
std::vector<double> rope_inv_freq(int64_t d, double theta) {
  std::vector<double> f(d / 2);
  for (int64_t i = 0; i < d / 2; ++i) f[i] = std::pow(theta, -2.0 * static_cast<double>(i) / d);
  return f;
}

// SplitMix64's output function (Steele, Lea & Flood, "Fast splittable pseudorandom number
// generators", 2014; the finaliser of java.util.SplittableRandom).
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

}  // namespace

// Dropout's mask must come back identical when a tensor is recomputed, so it is a pure function
// of (seed, stream, e), all arithmetic mod 2^64:
//   key  = mix64(mix64(seed) + stream * kGoldenGamma)
//   bits = mix64(key + (e + 1) * kGoldenGamma)
//   u    = (bits >> 11) * 2^-53
// that is, element e gets output e of a SplitMix64 generator seeded with `key`.
double dropout_uniform(int64_t seed, int64_t stream, int64_t e) {
  uint64_t key =
      mix64(mix64(static_cast<uint64_t>(seed)) + static_cast<uint64_t>(stream) * kGoldenGamma);
  uint64_t bits = mix64(key + (static_cast<uint64_t>(e) + 1) * kGoldenGamma);
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

int64_t count_labels(const std::string& op, const TensorRef& labels, int64_t classes,
                     int64_t ignore_index) {
  int64_t count = 0;
  for (int64_t i = 0, n = labels.numel(); i < n; ++i) {
    int64_t label = index_at(labels, i);
    if (label == ignore_index) continue;
    if (label < 0 || label >= classes) throw_bad_label(op, label, i, classes, ignore_index);
    ++count;
  }
  return count;
}

void throw_bad_label(const std::string& op, int64_t label, int64_t position, int64_t classes,
                     int64_t ignore_index) {
  throw InvalidArgument("`" + op + "`: label " + std::to_string(label) + " at position " +
                        std::to_string(position) + " is outside [0, " + std::to_string(classes) +
                        ") and is not ignore_index (" + std::to_string(ignore_index) + ")");
}

void softmax_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) { softmax_rows<decltype(t)>(a, false); });
}

void log_softmax_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) { softmax_rows<decltype(t)>(a, true); });
}

void rms_norm_kernel(const KernelArgs& a) {
  with_norm_operands(a, [&](auto t, auto x, auto w, int64_t d, int64_t rows, double eps) {
    using T = decltype(t);
    T* y = a.out[0].as<T>();  // (R, D)
    parallel_rows(rows, [&](int64_t r) {
      const T* xr = x + r * d;
      double inv = row_rms_inv(xr, d, eps);
      for (int64_t j = 0; j < d; ++j) y[r * d + j] = static_cast<T>(xr[j] * inv * w[j]);
    });
  });
}

void layer_norm_kernel(const KernelArgs& a) {
  with_norm_operands(a, [&](auto t, auto x, auto w, int64_t d, int64_t rows, double eps) {
    using T = decltype(t);
    const T* b = a.in[2].as<T>();  // (D)
    T* y = a.out[0].as<T>();       // (R, D)
    parallel_rows(rows, [&](int64_t r) {
      const T* xr = x + r * d;
      RowMoments m = row_moments(xr, d, eps);
      for (int64_t j = 0; j < d; ++j) {
        y[r * d + j] = static_cast<T>((xr[j] - m.mean) * m.rstd * w[j] + b[j]);
      }
    });
  });
}

// The mean is over counted positions only; with none counted the loss is 0 rather than
// PyTorch's nan (0/0), so a batch that is all padding leaves the parameters untouched.
void cross_entropy_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    int64_t v = a.in[0].shape.back(), rows = last_dim_rows(a.in[0]);
    int64_t ignore = a.a().get_int("ignore_index");
    int64_t count = count_labels(a.op, a.in[1], v, ignore);
    const T* logits = a.in[0].as<T>();    // (R, V)
    std::vector<double> loss(rows, 0.0);  // (R), 0 for ignored rows
    parallel_rows(rows, [&](int64_t r) {
      int64_t label = index_at(a.in[1], r);
      if (label == ignore) return;
      const T* row = logits + r * v;
      RowExpSum<T> e = row_exp_sum(row, v);
      loss[r] = std::log(e.sum) + e.max - row[label];
    });
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) total += loss[r];
    a.out[0].as<T>()[0] = static_cast<T>(count == 0 ? 0.0 : total / count);
  });
}

// Rotates pairs (x[i], x[i + D/2]) of the last dim ("rotate_half" layout of Llama / GPT-NeoX);
// rotating by -angle is the inverse, which is also rope's gradient. The position of index p along
// seq_axis is p, or positions[p] when the op has them (packed sequences, each from 0).
void rope_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    const RopeDims r = rope_dims(a);
    const RopeTable table = rope_table(r.d, r.theta, r.positions);
    const int64_t d = r.d, half = d / 2;
    const double sign = r.inverse ? -1.0 : 1.0;
    const T* x = a.in[0].as<T>();  // (R, D)
    T* y = a.out[0].as<T>();       // (R, D)
    parallel_rows(r.rows, [&](int64_t row) {
      const int64_t p = r.position[(row * d / r.inner) % r.seq];
      const T* xr = x + row * d;
      T* yr = y + row * d;
      for (int64_t i = 0; i < half; ++i) {
        double c = table.cos[p * half + i], s = sign * table.sin[p * half + i];
        double x0 = xr[i], x1 = xr[i + half];
        yr[i] = static_cast<T>(x0 * c - x1 * s);
        yr[i + half] = static_cast<T>(x1 * c + x0 * s);
      }
    });
  });
}

void causal_mask_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    int64_t s = a.in[0].dim(-2), k = a.in[0].dim(-1);
    T value = static_cast<T>(a.a().get_float("value"));
    const T* x = a.in[0].as<T>();  // (M, S, T): row r is query r % S
    T* y = a.out[0].as<T>();       // (M, S, T)
    parallel_rows(last_dim_rows(a.in[0]), [&](int64_t r) {
      int64_t last_visible = r % s + (k - s);  // the query's own position among the keys
      for (int64_t j = 0; j < k; ++j) y[r * k + j] = j > last_visible ? value : x[r * k + j];
    });
  });
}

// rate == 0 keeps every element (u >= 0) and scales by exactly 1: the identity. The scale is
// rounded to T before multiplying, as PyTorch's x * (mask / (1 - p)) does.
void dropout_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    double rate = a.a().get_float("rate");
    int64_t stream = a.a().get_int("stream");
    int64_t seed = a.in[1].as<int64_t>()[0];
    T scale = static_cast<T>(1.0 / (1.0 - rate));
    const T* x = a.in[0].as<T>();  // (n)
    T* y = a.out[0].as<T>();       // (n)
    parallel_rows(a.in[0].numel(), [&](int64_t e) {
      y[e] = dropout_uniform(seed, stream, e) >= rate ? x[e] * scale : T(0);
    });
  });
}

RopeDims rope_dims(const KernelArgs& a) {
  const TensorRef& in = a.in[0];
  const int64_t axis = a.a().get_int("seq_axis");
  const AxisSplit split = split_at(in.shape, static_cast<int>(axis < 0 ? axis + in.rank() : axis));
  RopeDims r{.rows = last_dim_rows(in),
             .d = in.shape.back(),
             .seq = split.extent,
             .inner = split.inner,
             .theta = a.a().get_float("theta"),
             .inverse = a.a().get_bool("inverse")};
  const bool given = a.in.size() == 2;
  r.position.resize(r.seq);
  for (int64_t p = 0; p < r.seq; ++p) {
    r.position[p] = given ? index_at(a.in[1], p) : p;
    if (r.position[p] < 0 || r.position[p] >= r.seq) {
      throw InvalidArgument(
          "rope: positions[" + std::to_string(p) + "] is " + std::to_string(r.position[p]) +
          "; a token's position in its sequence is in [0, " + std::to_string(r.seq) + ")");
    }
    r.positions = std::max(r.positions, r.position[p] + 1);
  }
  return r;
}

RopeTable rope_table(int64_t d, double theta, int64_t positions) {
  const int64_t half = d / 2;
  const std::vector<double> inv_freq = rope_inv_freq(d, theta);
  RopeTable t{positions, std::vector<double>(positions * half),
              std::vector<double>(positions * half)};
  parallel_rows(positions, [&](int64_t p) {
    for (int64_t i = 0; i < half; ++i) {
      double angle = static_cast<double>(p) * inv_freq[i];
      t.cos[p * half + i] = std::cos(angle);
      t.sin[p * half + i] = std::sin(angle);
    }
  });
  return t;
}

}  // namespace disc::ir
