// Attention by blocks of query rows through the device's GEMM; see block_attention.h.
#include "devices/cpu/block_attention.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <type_traits>

#include "devices/cpu/half_arrays.h"
#include "devices/cpu/panel_types.h"
#include "devices/cpu/row_math.h"
#include "devices/cpu/widened_attention.h"

namespace disc::devices {
namespace {

using namespace row_math;
using cpu::bf16_on_dot, cpu::kHalf, cpu::kOperands, cpu::kWideC, cpu::read_panel, cpu::row_done,
    cpu::sums_t;

// row[0, visible) = softmax(scale * row[0, visible)); row[visible, width) = 0.
template <typename T>
[[gnu::always_inline]] inline void softmax_row_of(T* row, int64_t visible, int64_t width, T scale) {
  for (int64_t j = 0; j < visible; ++j) row[j] *= scale;
  exp_minus_max(row, visible);
  const T inv = T(1) / lane_sum<T>(row, visible);
  for (int64_t j = 0; j < visible; ++j) row[j] *= inv;
  std::fill(row + visible, row + width, T(0));
}

// g = scale * p * (g - sum(p * g)) over the row: dS from dP for probabilities p.
template <typename T>
[[gnu::always_inline]] inline void softmax_grad_row_of(const T* p, T* g, int64_t width, T scale) {
  T lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= width; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane[l] += p[j + l] * g[j + l];
  }
  for (int l = 0; j < width; ++j, ++l) lane[l] += p[j] * g[j];
  T dot = 0;
  for (T x : lane) dot += x;
  for (j = 0; j < width; ++j) g[j] = scale * p[j] * (g[j] - dot);
}

// The row functions per dtype, each cloned per vector width (Clang clones no templates).
DISC_VECTOR_CLONES void softmax_row(float* row, int64_t visible, int64_t width, float scale) {
  softmax_row_of(row, visible, width, scale);
}
DISC_VECTOR_CLONES void softmax_row(double* row, int64_t visible, int64_t width, double scale) {
  softmax_row_of(row, visible, width, scale);
}
DISC_VECTOR_CLONES void softmax_grad_row(const float* p, float* g, int64_t width, float scale) {
  softmax_grad_row_of(p, g, width, scale);
}
DISC_VECTOR_CLONES void softmax_grad_row(const double* p, double* g, int64_t width, double scale) {
  softmax_grad_row_of(p, g, width, scale);
}

// One block of query rows [r0, r0 + rows) for the heads [h0, h0 + hc), whose panels span the keys
// [k0, k0 + keys): where its operands start and how wide its panels are. Row i of the block sees
// the panel's keys [lo(i), hi(i)): packed, the `begins` and `ends` of its row's own sequence
// (absolute key rows; null when not packed).
struct Block {
  int64_t h0, hc, r0, rows, k0, keys;
  const int64_t *begins = nullptr, *ends = nullptr;
};

// Row i's visible keys, as panel columns [lo, hi): every key or, causal, those up to the row's;
// packed, only its own sequence's.
struct Window {
  int64_t lo, hi;
};
Window window_of(const AttentionArgs& a, const Block& bl, int64_t i) {
  const int64_t row = bl.r0 + i;
  if (!bl.begins) return {0, a.causal ? row + 1 - bl.k0 : bl.keys};
  return {bl.begins[i] - bl.k0, (a.causal ? row + 1 : bl.ends[i]) - bl.k0};
}

// A batch of hc products C = op(A) op(B) of E operands (panel_types.h), each operand given by its
// first element, its leading dim and its batch stride (all in elements).
struct Operand {
  const void* data;
  int64_t lead, stride;
};
template <typename E, typename C>
void gemm(Device& dev, int64_t hc, int64_t m, int64_t n, int64_t k, Operand a, bool ta, Operand b,
          bool tb, C* c, int64_t ldc, int64_t stride_c, bool accumulate = false) {
  GemmArgs g{.dtype = kOperands<E>,
             .batch = hc,
             .m = m,
             .n = n,
             .k = k,
             .transpose_a = ta,
             .transpose_b = tb,
             .accumulate = accumulate,
             .a = a.data,
             .b = b.data,
             .c = c,
             .batch_stride_a = a.stride,
             .batch_stride_b = b.stride,
             .batch_stride_c = stride_c,
             .lda = a.lead,
             .ldb = b.lead,
             .ldc = ldc,
             .c_f32 = kWideC<E, C>};
  dev.gemm(g);
}

// The block's heads of a [heads, rows, width] tensor as GEMM operands: the keys' rows the block
// sees (keys, values), or only the block's query rows (q, dO).
template <typename T>
Operand key_rows(const void* base, const Block& bl, int64_t rows, int64_t width) {
  return {static_cast<const T*>(base) + (bl.h0 * rows + bl.k0) * width, width, rows * width};
}
template <typename T>
Operand block_rows(const void* base, const Block& bl, int64_t rows, int64_t width) {
  return {static_cast<const T*>(base) + (bl.h0 * rows + bl.r0) * width, width, rows * width};
}

// Elements of a block's panel rows below which its row loops run on the calling thread: handing
// fewer to TBB's workers (asleep, on the cores oneDNN's OpenMP threads have just left) took
// longer than the loops. A packed step of short examples has such blocks: 4 heads x 64 rows of
// about 150 keys, forward and backward, took 3.5 ms in parallel and 3.2 ms on one thread
// (8.0 and 5.0 ms with the shorter OpenMP spin of before; 2-core Xeon, 16 sequences of about 90
// tokens, head size 32).
inline constexpr int64_t kSerialRowElements = 65536;

// f(i) for i in [0, n), rows `width` elements wide: in parallel, or here when they are few.
template <typename F>
void for_rows(int64_t n, int64_t width, F&& f) {
  if (n * width < kSerialRowElements) {
    for (int64_t i = 0; i < n; ++i) f(i);
  } else {
    tbb::parallel_for(int64_t{0}, n, f);
  }
}

// The block's probabilities into `p` ([hc, rows, keys]), and into `pe` as the GEMMs read them:
// scores by one GEMM, then softmax over each row's visible keys.
template <typename E>
void probabilities(Device& dev, const AttentionArgs& a, const Block& bl, sums_t<E>* p, E* pe) {
  using T = sums_t<E>;
  const int64_t panel = bl.rows * bl.keys;
  gemm<E>(dev, bl.hc, bl.rows, bl.keys, a.d, block_rows<E>(a.q, bl, a.sq, a.d), false,
          key_rows<E>(a.k, bl, a.sk, a.d), true, p, bl.keys, panel);
  for_rows(bl.hc * bl.rows, bl.keys, [&](int64_t i) {
    const Window w = window_of(a, bl, i % bl.rows);
    T* row = p + i * bl.keys;
    softmax_row(row + w.lo, w.hi - w.lo, bl.keys - w.lo, static_cast<T>(a.scale));
    std::fill(row, row + w.lo, T(0));
    row_done(p, pe, i, bl.keys);
  });
}

// Calls f(block) for every block of query rows of every chunk of heads, in order, and
// chunk_done(h0, heads) after each chunk's blocks. Packed, the blocks are the padded layout's, 64
// rows from row 0, each across whatever sequences its rows fall in. Its panel's keys end with its
// rows (causal) or its last row's sequence, and start a multiple of 64 keys before that, at or
// before its first row's sequence: the GEMMs then take a few shapes, whose primitives the device
// keeps, rather than one per sequence and step, and a row's keys outside its own sequence get
// probability 0.
template <typename F, typename G>
void for_each_block(const AttentionArgs& a, F&& f, G&& chunk_done) {
  const int64_t chunk = attention_chunk(a);
  std::array<int64_t, kAttentionRows> begins{}, ends{};
  for (int64_t h0 = 0; h0 < a.heads; h0 += chunk) {
    int64_t s = 0;  // the sequence of the row below
    for (int64_t r0 = 0; r0 < a.sq; r0 += kAttentionRows) {
      const int64_t r1 = std::min(a.sq, r0 + kAttentionRows);
      Block bl{.h0 = h0, .hc = std::min(chunk, a.heads - h0), .r0 = r0, .rows = r1 - r0};
      if (!a.offsets) {
        bl.k0 = 0, bl.keys = a.causal ? r1 : a.sk;
      } else {
        for (int64_t r = r0; r < r1; ++r) {
          while (a.offsets[s + 1] <= r) ++s;  // offsets[s] <= r < offsets[s + 1]
          begins[r - r0] = a.offsets[s], ends[r - r0] = a.offsets[s + 1];
        }
        const int64_t last = a.causal ? r1 : ends[r1 - r0 - 1];
        const int64_t span = (last - begins[0] + kAttentionRows - 1) / kAttentionRows;
        bl.k0 = std::max<int64_t>(0, last - span * kAttentionRows);
        bl.keys = last - bl.k0, bl.begins = begins.data(), bl.ends = ends.data();
      }
      f(bl);
    }
    chunk_done(h0, std::min(chunk, a.heads - h0));
  }
}

template <typename E>
void forward(Device& dev, const AttentionArgs& a, E* out) {
  const int64_t panel = attention_chunk(a) * kAttentionRows * widest_keys(a);  // one panel: P
  sums_t<E>* p = thread_panel<sums_t<E>>(panel);
  E* pe = read_panel<E>(p, panel);
  for_each_block(
      a,
      [&](const Block& bl) {
        probabilities(dev, a, bl, p, pe);
        gemm<E>(dev, bl.hc, bl.rows, a.dv, bl.keys, {pe, bl.keys, bl.rows * bl.keys}, false,
                key_rows<E>(a.v, bl, a.sk, a.dv), false, out + (bl.h0 * a.sq + bl.r0) * a.dv, a.dv,
                a.sq * a.dv);
      },
      [](int64_t, int64_t) {});
}

// Where the blocks sum dK (or dV, `width` wide): in the gradient itself, or for 16-bit operands in
// f32 rows for one chunk of heads (`wide`, attention_chunk(a) * sk * width floats), rounded into
// the gradient when the chunk is done.
template <typename E>
class KeySums {
 public:
  KeySums(const AttentionArgs& a, E* grad, int64_t width, float* wide)
      : grad_(grad), width_(width), sk_(a.sk), wide_(wide) {
    if constexpr (kHalf<E>)
      std::fill(wide_, wide_ + attention_chunk(a) * sk_ * width_, 0.0f);
    else
      std::fill(grad, grad + a.heads * sk_ * width_, E(0));
  }
  // The block's first key row, a head's rows sk * width apart.
  sums_t<E>* at(const Block& bl) {
    if constexpr (kHalf<E>)
      return wide_ + bl.k0 * width_;
    else
      return grad_ + (bl.h0 * sk_ + bl.k0) * width_;
  }
  void chunk_done(int64_t h0, int64_t heads) {
    if constexpr (kHalf<E>) {
      const int64_t n = heads * sk_ * width_;
      cpu::narrow_half(DType::kBF16, wide_, grad_ + h0 * sk_ * width_, n);
      std::fill(wide_, wide_ + n, 0.0f);
    }
  }

 private:
  E* grad_;
  int64_t width_, sk_;
  float* wide_;
};

// Per block: P again, dP = dO V^T, dS (scaled) in dP's panel, dQ = dS K, then dK += dS^T Q and
// dV += P^T dO over the block's keys.
template <typename E>
void backward(Device& dev, const AttentionArgs& a, const E* dout, E* dq, E* dk, E* dv) {
  using T = sums_t<E>;
  const int64_t panels = attention_chunk(a) * kAttentionRows * widest_keys(a);
  // Two panels (P, then dP and dS) and, for 16-bit operands, dK's and dV's f32 sums.
  const int64_t rows = kHalf<E> ? attention_chunk(a) * a.sk : 0;  // of the sums
  T* p = thread_panel<T>(2 * panels + rows * (a.d + a.dv));
  T* g = p + panels;
  E* pe = read_panel<E>(p, 2 * panels);
  E* ge = pe + panels;
  float* wide = reinterpret_cast<float*>(p + 2 * panels);  // read only where T is float
  KeySums<E> sum_k(a, dk, a.d, wide), sum_v(a, dv, a.dv, wide + rows * a.d);
  auto block = [&](const Block& bl) {
    const int64_t panel = bl.rows * bl.keys, q_at = bl.h0 * a.sq + bl.r0;
    const Operand dout_rows = block_rows<E>(dout, bl, a.sq, a.dv);
    probabilities(dev, a, bl, p, pe);
    gemm<E>(dev, bl.hc, bl.rows, bl.keys, a.dv, dout_rows, false, key_rows<E>(a.v, bl, a.sk, a.dv),
            true, g, bl.keys, panel);
    for_rows(bl.hc * bl.rows, bl.keys, [&](int64_t i) {
      softmax_grad_row(p + i * bl.keys, g + i * bl.keys, bl.keys, static_cast<T>(a.scale));
      row_done(g, ge, i, bl.keys);
    });
    const Operand ds{ge, bl.keys, panel}, probs{pe, bl.keys, panel};
    gemm<E>(dev, bl.hc, bl.rows, a.d, bl.keys, ds, false, key_rows<E>(a.k, bl, a.sk, a.d), false,
            dq + q_at * a.d, a.d, a.sq * a.d);
    gemm<E>(dev, bl.hc, bl.keys, a.d, bl.rows, ds, true, block_rows<E>(a.q, bl, a.sq, a.d), false,
            sum_k.at(bl), a.d, a.sk * a.d, true);
    gemm<E>(dev, bl.hc, bl.keys, a.dv, bl.rows, probs, true, dout_rows, false, sum_v.at(bl), a.dv,
            a.sk * a.dv, true);
  };
  for_each_block(a, block, [&](int64_t h0, int64_t heads) {
    sum_k.chunk_done(h0, heads), sum_v.chunk_done(h0, heads);
  });
}

void check(const Device& dev, const AttentionArgs& a) {
  if (!dev.is_host()) {
    throw InvalidArgument("attention on " + dev.name() + ": block attention runs on host memory");
  }
  if (!is_float(a.dtype)) {
    throw InvalidArgument("attention: dtype " + std::string(dtype_name(a.dtype)) +
                          " is not supported: cast q, k and v to f32, bf16, f16 or f64");
  }
  if (a.heads < 0 || a.sq < 0 || a.sk < 0 || a.d < 0 || a.dv < 0) {
    throw InvalidArgument("attention: negative size (heads=" + std::to_string(a.heads) +
                          " sq=" + std::to_string(a.sq) + " sk=" + std::to_string(a.sk) +
                          " d=" + std::to_string(a.d) + " dv=" + std::to_string(a.dv) + ")");
  }
  if ((a.causal || a.offsets) && a.sq != a.sk) {
    throw InvalidArgument(std::string(a.offsets ? "packed" : "causal") +
                          " attention needs as many queries as keys, got sq=" +
                          std::to_string(a.sq) + " sk=" + std::to_string(a.sk));
  }
  if (a.offsets && (a.sequences < 1 || a.offsets[0] != 0 || a.offsets[a.sequences] != a.sq ||
                    !std::is_sorted(a.offsets, a.offsets + a.sequences + 1))) {
    throw InvalidArgument("attention: packed sequence offsets must run from 0 to sq=" +
                          std::to_string(a.sq) + " without decreasing");
  }
}

}  // namespace

int64_t widest_keys(const AttentionArgs& a) {
  if (!a.offsets) return a.sk;
  int64_t longest = 0;
  for (int64_t n = 0; n < a.sequences; ++n)
    longest = std::max(longest, a.offsets[n + 1] - a.offsets[n]);
  // A block's keys (for_each_block) run from its first row's sequence's start to its last row
  // (causal: under longest + 63 of them) or to the end of its last row's sequence (under
  // 2 * longest + 63), rounded up to a multiple of the block's rows.
  const int64_t span = a.causal ? longest + kAttentionRows - 1 : 2 * longest + kAttentionRows - 1;
  return std::min(a.sq, (span + kAttentionRows - 1) / kAttentionRows * kAttentionRows);
}

int64_t attention_chunk(const AttentionArgs& a) {
  const int64_t per_head =
      std::max<int64_t>(1, 2 * kAttentionRows * widest_keys(a) * cpu::panel_element_bytes(a.dtype));
  return std::clamp<int64_t>(kAttentionWorkspace / per_head, 1, std::max<int64_t>(1, a.heads));
}

void attention_forward(Device& dev, const AttentionArgs& a, void* out) {
  check(dev, a);
  if (a.sk == 0) {  // no key to attend to: the output is 0
    std::memset(out, 0, static_cast<size_t>(a.heads * a.sq * a.dv * dtype_size(a.dtype)));
    return;
  }
  if (a.dtype == DType::kF64) return forward(dev, a, static_cast<double*>(out));
  if (bf16_on_dot(dev, a.dtype)) return forward(dev, a, static_cast<uint16_t*>(out));
  if (is_half_float(a.dtype)) return cpu::widened_attention_forward(dev, a, out);
  forward(dev, a, static_cast<float*>(out));
}

void attention_backward(Device& dev, const AttentionArgs& a, const void* dout, void* dq, void* dk,
                        void* dv) {
  check(dev, a);
  if (a.sk == 0) {  // the output is 0 whatever q is
    std::memset(dq, 0, static_cast<size_t>(a.heads * a.sq * a.d * dtype_size(a.dtype)));
    return;
  }
  if (a.dtype == DType::kF64) {
    return backward(dev, a, static_cast<const double*>(dout), static_cast<double*>(dq),
                    static_cast<double*>(dk), static_cast<double*>(dv));
  }
  if (bf16_on_dot(dev, a.dtype)) {
    return backward(dev, a, static_cast<const uint16_t*>(dout), static_cast<uint16_t*>(dq),
                    static_cast<uint16_t*>(dk), static_cast<uint16_t*>(dv));
  }
  if (is_half_float(a.dtype)) return cpu::widened_attention_backward(dev, a, dout, dq, dk, dv);
  backward(dev, a, static_cast<const float*>(dout), static_cast<float*>(dq),
           static_cast<float*>(dk), static_cast<float*>(dv));
}

}  // namespace disc::devices
