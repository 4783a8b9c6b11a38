// Reference kernels of 2-D convolution and pooling over NCHW tensors and of their gradients
// (ir/ops/conv_ops.cc, ir/ops/grad_ops.cc). Every output element is a gather with its own double
// accumulator, or (pool gradients) one thread scatters into one (n, c) plane, so the order of
// every sum is fixed.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ir/ops/kernels.h"

namespace disc::ir {
namespace {

// Window geometry along H and W: input row of output oh, tap kh is oh * sh - ph + kh * dh.
struct Window {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};

Window conv_window(const KernelArgs& a, const TensorRef& w) {
  const auto &s = a.a().get_ints("stride"), &p = a.a().get_ints("padding");
  const auto& d = a.a().get_ints("dilation");
  return {w.dim(2), w.dim(3), s[0], s[1], p[0], p[1], d[0], d[1]};
}

Window pool_window(const KernelArgs& a) {
  const auto &k = a.a().get_ints("kernel"), &s = a.a().get_ints("stride");
  const auto& p = a.a().get_ints("padding");
  return {k[0], k[1], s[0], s[1], p[0], p[1], 1, 1};
}

// i where it lies in [0, n), else -1 (a tap that reads padding).
int64_t inside(int64_t i, int64_t n) {
  return i < 0 || i >= n ? -1 : i;
}

// Output index o of a window whose tap k (stride s, padding p, dilation d) reads input i, or -1.
int64_t source_of(int64_t i, int64_t k, int64_t s, int64_t p, int64_t d, int64_t out_extent) {
  int64_t t = i + p - k * d;
  if (t < 0 || t % s != 0 || t / s >= out_extent) return -1;
  return t / s;
}

// The sizes of one conv2d, from x (N, C, H, W), w (O, C, KH, KW) and its output grid (N, O, OH,
// OW) (y, or dy for the gradients), with the flat offsets into each and the maps between input
// and output rows and columns that the forward and both gradients walk.
struct ConvDims : Window {
  int64_t batch, c_in, h, w, o_ch, oh_n, ow_n;

  int64_t x_at(int64_t n, int64_t c, int64_t ih, int64_t iw) const {
    return ((n * c_in + c) * h + ih) * w + iw;
  }
  int64_t w_at(int64_t o, int64_t c, int64_t i, int64_t j) const {
    return ((o * c_in + c) * kh + i) * kw + j;
  }
  int64_t y_at(int64_t n, int64_t o, int64_t oh, int64_t ow) const {
    return ((n * o_ch + o) * oh_n + oh) * ow_n + ow;
  }
  // The input row (column) that tap i (j) of output row oh (column ow) reads, or -1 in padding.
  int64_t in_row(int64_t oh, int64_t i) const { return inside(oh * sh - ph + i * dh, h); }
  int64_t in_col(int64_t ow, int64_t j) const { return inside(ow * sw - pw + j * dw, w); }
  // The output row (column) whose tap i (j) reads input row ih (column iw), or -1 if none does.
  int64_t out_row(int64_t ih, int64_t i) const { return source_of(ih, i, sh, ph, dh, oh_n); }
  int64_t out_col(int64_t iw, int64_t j) const { return source_of(iw, j, sw, pw, dw, ow_n); }
};

ConvDims conv_dims(const KernelArgs& a, const TensorRef& grid) {
  const TensorRef &x = a.in[0], &wt = a.in[1];
  ConvDims d{conv_window(a, wt)};
  d.batch = x.dim(0), d.c_in = x.dim(1), d.h = x.dim(2), d.w = x.dim(3);
  d.o_ch = wt.dim(0), d.oh_n = grid.dim(2), d.ow_n = grid.dim(3);
  return d;
}

// The part of pool window (oh, ow) inside the input: rows [h0, h1), columns [w0, w1).
struct Span {
  int64_t h0, h1, w0, w1;
  int64_t count() const { return (h1 - h0) * (w1 - w0); }
};

// A pool over planes x (N*C, H, W) whose windows lie on a grid (N*C, OH, OW) (y, or dy for the
// gradients).
struct PoolDims : Window {
  int64_t planes, h, w, oh_n, ow_n;

  Span span(int64_t oh, int64_t ow) const {
    int64_t h0 = oh * sh - ph, w0 = ow * sw - pw;
    return {std::max<int64_t>(h0, 0), std::min(h0 + kh, h), std::max<int64_t>(w0, 0),
            std::min(w0 + kw, w)};
  }
  // Calls f(o, span) for each window of one plane in row-major order, o = oh * OW + ow; the
  // pool gradients rely on that order for a fixed order of their sums.
  template <typename F>
  void each_window(F f) const {
    for (int64_t oh = 0; oh < oh_n; ++oh) {
      for (int64_t ow = 0; ow < ow_n; ++ow) f(oh * ow_n + ow, span(oh, ow));
    }
  }
};

PoolDims pool_dims(const KernelArgs& a, const TensorRef& grid) {
  const TensorRef& x = a.in[0];
  return {pool_window(a), x.dim(0) * x.dim(1), x.dim(2), x.dim(3), grid.dim(2), grid.dim(3)};
}

// Offset in its (H, W) plane of the window's maximum: the first in row-major order when tied, and
// a nan wins (the last one), as in PyTorch. Padding is never chosen (it counts as -inf).
template <typename T>
int64_t window_argmax(const T* plane, int64_t w, const Span& s) {
  int64_t best = -1;
  for (int64_t ih = s.h0; ih < s.h1; ++ih) {
    for (int64_t iw = s.w0; iw < s.w1; ++iw) {
      T v = plane[ih * w + iw];
      if (best < 0 || v > plane[best] || std::isnan(v)) best = ih * w + iw;
    }
  }
  return best;
}

// Pools: one thread per (n, c) plane; each output is reduce(plane, W, span) of its window.
template <typename T, typename Reduce>
void pool_planes(const KernelArgs& a, Reduce reduce) {
  PoolDims g = pool_dims(a, a.out[0]);
  const T* x = a.in[0].as<T>();  // (N*C, H, W)
  T* y = a.out[0].as<T>();       // (N*C, OH, OW)
  parallel_rows(g.planes, [&](int64_t p) {
    const T* plane = x + p * g.h * g.w;
    T* out = y + p * g.oh_n * g.ow_n;
    g.each_window([&](int64_t o, const Span& s) { out[o] = reduce(plane, g.w, s); });
  });
}

// Pool gradients: one thread per (n, c) plane scatters dy into a double plane, windows in
// row-major order, then rounds once.
template <typename T, typename Scatter>
void pool_grad_planes(const KernelArgs& a, Scatter scatter) {
  PoolDims g = pool_dims(a, a.in[1]);
  const T* x = a.in[0].as<T>();   // (N*C, H, W)
  const T* dy = a.in[1].as<T>();  // (N*C, OH, OW)
  T* dx = a.out[0].as<T>();       // (N*C, H, W)
  int64_t hw = g.h * g.w;
  parallel_rows(g.planes, [&](int64_t p) {
    std::vector<double> acc(hw, 0.0);  // (H, W)
    const T* dy_plane = dy + p * g.oh_n * g.ow_n;
    g.each_window([&](int64_t o, const Span& s) { scatter(x + p * hw, g.w, s, dy_plane[o], acc); });
    for (int64_t i = 0; i < hw; ++i) dx[p * hw + i] = static_cast<T>(acc[i]);
  });
}

}  // namespace

void conv2d_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    ConvDims g = conv_dims(a, a.out[0]);
    const T* x = a.in[0].as<T>();   // (N, C, H, W)
    const T* wt = a.in[1].as<T>();  // (O, C, KH, KW)
    T* y = a.out[0].as<T>();        // (N, O, OH, OW)
    parallel_rows(g.batch * g.o_ch, [&](int64_t no) {
      int64_t n = no / g.o_ch, o = no % g.o_ch;
      for (int64_t oh = 0; oh < g.oh_n; ++oh) {
        for (int64_t ow = 0; ow < g.ow_n; ++ow) {
          double acc = 0;
          for (int64_t c = 0; c < g.c_in; ++c) {
            for (int64_t i = 0; i < g.kh; ++i) {
              int64_t ih = g.in_row(oh, i);
              if (ih < 0) continue;
              for (int64_t j = 0; j < g.kw; ++j) {
                int64_t iw = g.in_col(ow, j);
                if (iw < 0) continue;
                acc += static_cast<double>(x[g.x_at(n, c, ih, iw)]) * wt[g.w_at(o, c, i, j)];
              }
            }
          }
          y[g.y_at(n, o, oh, ow)] = static_cast<T>(acc);
        }
      }
    });
  });
}

// dx[n, c, ih, iw] gathers every (o, tap) whose window reads (ih, iw).
void conv2d_grad_input_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    ConvDims g = conv_dims(a, a.in[2]);
    const T* wt = a.in[1].as<T>();  // (O, C, KH, KW)
    const T* dy = a.in[2].as<T>();  // (N, O, OH, OW)
    T* dx = a.out[0].as<T>();       // (N, C, H, W)
    parallel_rows(g.batch * g.c_in, [&](int64_t nc) {
      int64_t n = nc / g.c_in, c = nc % g.c_in;
      for (int64_t ih = 0; ih < g.h; ++ih) {
        for (int64_t iw = 0; iw < g.w; ++iw) {
          double acc = 0;
          for (int64_t o = 0; o < g.o_ch; ++o) {
            for (int64_t i = 0; i < g.kh; ++i) {
              int64_t oh = g.out_row(ih, i);
              if (oh < 0) continue;
              for (int64_t j = 0; j < g.kw; ++j) {
                int64_t ow = g.out_col(iw, j);
                if (ow < 0) continue;
                acc += static_cast<double>(dy[g.y_at(n, o, oh, ow)]) * wt[g.w_at(o, c, i, j)];
              }
            }
          }
          dx[g.x_at(n, c, ih, iw)] = static_cast<T>(acc);
        }
      }
    });
  });
}

// dw[o, c, i, j] = sum over n, oh, ow of dy[n, o, oh, ow] * x[n, c, tap (i, j) of (oh, ow)].
void conv2d_grad_weight_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    ConvDims g = conv_dims(a, a.in[2]);
    const T* x = a.in[0].as<T>();   // (N, C, H, W)
    const T* dy = a.in[2].as<T>();  // (N, O, OH, OW)
    T* dw = a.out[0].as<T>();       // (O, C, KH, KW)
    parallel_rows(g.o_ch * g.c_in * g.kh * g.kw, [&](int64_t e) {
      int64_t j = e % g.kw, i = e / g.kw % g.kh, c = e / (g.kw * g.kh) % g.c_in;
      int64_t o = e / (g.kw * g.kh * g.c_in);
      double acc = 0;
      for (int64_t n = 0; n < g.batch; ++n) {
        for (int64_t oh = 0; oh < g.oh_n; ++oh) {
          int64_t ih = g.in_row(oh, i);
          if (ih < 0) continue;
          for (int64_t ow = 0; ow < g.ow_n; ++ow) {
            int64_t iw = g.in_col(ow, j);
            if (iw < 0) continue;
            acc += static_cast<double>(dy[g.y_at(n, o, oh, ow)]) * x[g.x_at(n, c, ih, iw)];
          }
        }
      }
      dw[e] = static_cast<T>(acc);
    });
  });
}

void max_pool2d_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    pool_planes<T>(a, [](const T* plane, int64_t w, const Span& s) {
      return plane[window_argmax(plane, w, s)];
    });
  });
}

// The mean over the window's in-bounds elements (PyTorch's count_include_pad=False).
void avg_pool2d_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    pool_planes<T>(a, [](const T* plane, int64_t w, const Span& s) {
      double sum = 0;
      for (int64_t ih = s.h0; ih < s.h1; ++ih) {
        for (int64_t iw = s.w0; iw < s.w1; ++iw) sum += plane[ih * w + iw];
      }
      return static_cast<T>(sum / s.count());
    });
  });
}

void max_pool2d_grad_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    pool_grad_planes<T>(a, [](const T* plane, int64_t w, const Span& s, T g,
                              std::vector<double>& acc) { acc[window_argmax(plane, w, s)] += g; });
  });
}

void avg_pool2d_grad_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    pool_grad_planes<T>(a, [](const T*, int64_t w, const Span& s, T g, std::vector<double>& acc) {
      double share = static_cast<double>(g) / s.count();
      for (int64_t ih = s.h0; ih < s.h1; ++ih) {
        for (int64_t iw = s.w0; iw < s.w1; ++iw) acc[ih * w + iw] += share;
      }
    });
  });
}

}  // namespace disc::ir
