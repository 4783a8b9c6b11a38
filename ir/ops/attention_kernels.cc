// Reference kernels of attention and attention_grad: one query row at a time, in double, one
// head per thread (each head's outputs are its own, so any thread count gives the same bits).
#include <vector>

#include "ir/ops/attention_dims.h"
#include "ir/ops/kernels.h"

namespace disc::ir {
namespace {

// The keys query row i sees: [first, first + count).
struct Visible {
  int64_t first, count;
};
// Row i's visible keys: those of its sequence [begin, end) (all keys when not packed), up to
// row i when causal.
Visible visible_keys(const AttentionDims& s, int64_t begin, int64_t end, int64_t i) {
  if (s.offsets.empty()) end = s.sk;
  return {begin, (s.causal ? i + 1 : end) - begin};
}

// Row i's probabilities over its visible keys.
template <typename T>
std::vector<double> probabilities(const AttentionDims& s, const T* q, const T* k, int64_t i,
                                  Visible vis) {
  std::vector<double> p(vis.count);
  double top = -std::numeric_limits<double>::infinity(), sum = 0;
  for (int64_t j = 0; j < vis.count; ++j) {
    double dot = 0;
    for (int64_t c = 0; c < s.d; ++c)
      dot += static_cast<double>(q[i * s.d + c]) * k[(vis.first + j) * s.d + c];
    p[j] = s.scale * dot;
    top = std::max(top, p[j]);
  }
  for (double& x : p) sum += x = std::exp(x - top);
  for (double& x : p) x /= sum;
  return p;
}

}  // namespace

AttentionDims attention_dims(const TensorRef& q, const TensorRef& v, const Attributes& attrs,
                             const TensorRef* offsets) {
  int64_t heads = 1;
  for (int i = 0; i + 2 < q.rank(); ++i) heads *= q.shape[i];
  AttentionDims s{.heads = heads,
                  .sq = q.dim(-2),
                  .sk = v.dim(-2),
                  .d = q.dim(-1),
                  .dv = v.dim(-1),
                  .causal = attrs.get_bool("causal"),
                  .scale = attrs.get_float("scale")};
  if (!offsets) return s;
  const int64_t n = offsets->numel();
  for (int64_t i = 0; i < n; ++i) s.offsets.push_back(index_at(*offsets, i));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t want_lo = i == 0 ? 0 : s.offsets[i - 1];
    const bool ok = i == 0 ? s.offsets[0] == 0 : s.offsets[i] >= want_lo && s.offsets[i] <= s.sq;
    if (!ok || (i == n - 1 && s.offsets[i] != s.sq)) {
      throw InvalidArgument("attention: offsets[" + std::to_string(i) + "] is " +
                            std::to_string(s.offsets[i]) +
                            "; sequence offsets start at 0, never decrease and end at the " +
                            std::to_string(s.sq) + " rows of q");
    }
  }
  if (n < 2) throw InvalidArgument("attention: offsets need at least 2 entries (one sequence)");
  return s;
}

namespace {
// The offsets operand of a node with `fixed` operands before it, when it has one.
const TensorRef* offsets_of(const KernelArgs& a, size_t fixed) {
  return a.in.size() > fixed ? &a.in[fixed] : nullptr;
}
}  // namespace

void attention_kernel(const KernelArgs& a) {
  const AttentionDims s = attention_dims(a.in[0], a.in[2], a.a(), offsets_of(a, 3));
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    parallel_rows(s.heads, [&](int64_t h) {
      const T *q = a.in[0].as<T>() + h * s.sq * s.d, *k = a.in[1].as<T>() + h * s.sk * s.d;
      const T* v = a.in[2].as<T>() + h * s.sk * s.dv;
      T* out = a.out[0].as<T>() + h * s.sq * s.dv;
      for_each_sequence(s, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const Visible vis = visible_keys(s, begin, end, i);
          const std::vector<double> p = probabilities(s, q, k, i, vis);
          for (int64_t c = 0; c < s.dv; ++c) {
            double acc = 0;
            for (size_t j = 0; j < p.size(); ++j) acc += p[j] * v[(vis.first + j) * s.dv + c];
            out[i * s.dv + c] = static_cast<T>(acc);
          }
        }
      });
    });
  });
}

// With p the probabilities of row i and dp_j = dy_i . v_j: ds_j = p_j (dp_j - sum_j p_j dp_j);
// dq_i = scale sum_j ds_j k_j, dk_j += scale ds_j q_i, dv_j += p_j dy_i.
void attention_grad_kernel(const KernelArgs& a) {
  const AttentionDims s = attention_dims(a.in[0], a.in[2], a.a(), offsets_of(a, 4));
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    parallel_rows(s.heads, [&](int64_t h) {
      const T *q = a.in[0].as<T>() + h * s.sq * s.d, *k = a.in[1].as<T>() + h * s.sk * s.d;
      const T *v = a.in[2].as<T>() + h * s.sk * s.dv, *dy = a.in[3].as<T>() + h * s.sq * s.dv;
      T* dq = a.out[0].as<T>() + h * s.sq * s.d;
      std::vector<double> dk(s.sk * s.d, 0.0), dv(s.sk * s.dv, 0.0);
      for_each_sequence(s, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const Visible vis = visible_keys(s, begin, end, i);
          const std::vector<double> p = probabilities(s, q, k, i, vis);
          std::vector<double> ds(p.size());
          double sum = 0;
          for (size_t j = 0; j < p.size(); ++j) {
            double dp = 0;
            for (int64_t c = 0; c < s.dv; ++c)
              dp += static_cast<double>(dy[i * s.dv + c]) * v[(vis.first + j) * s.dv + c];
            ds[j] = dp;
            sum += p[j] * dp;
          }
          for (size_t j = 0; j < p.size(); ++j) ds[j] = s.scale * p[j] * (ds[j] - sum);
          for (int64_t c = 0; c < s.d; ++c) {
            double acc = 0;
            for (size_t j = 0; j < p.size(); ++j) acc += ds[j] * k[(vis.first + j) * s.d + c];
            dq[i * s.d + c] = static_cast<T>(acc);
          }
          for (size_t j = 0; j < p.size(); ++j) {
            const int64_t key = vis.first + static_cast<int64_t>(j);
            for (int64_t c = 0; c < s.d; ++c) dk[key * s.d + c] += ds[j] * q[i * s.d + c];
            for (int64_t c = 0; c < s.dv; ++c) dv[key * s.dv + c] += p[j] * dy[i * s.dv + c];
          }
        }
      });
      std::copy(dk.begin(), dk.end(), a.out[1].as<T>() + h * s.sk * s.d);
      std::copy(dv.begin(), dv.end(), a.out[2].as<T>() + h * s.sk * s.dv);
    });
  });
}

}  // namespace disc::ir
