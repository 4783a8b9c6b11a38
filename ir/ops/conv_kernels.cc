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

// The part of pool window (oh, ow) inside the input: rows [h0, h1), columns [w0, w1).
struct Span {
  int64_t h0, h1, w0, w1;
  int64_t count() const { return (h1 - h0) * (w1 - w0); }
};
Span pool_span(const Window& k, int64_t h, int64_t w, int64_t oh, int64_t ow) {
  int64_t h0 = oh * k.sh - k.ph, w0 = ow * k.sw - k.pw;
  return {std::max<int64_t>(h0, 0), std::min(h0 + k.kh, h), std::max<int64_t>(w0, 0),
          std::min(w0 + k.kw, w)};
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

// Output index o of a window whose tap k (stride s, padding p, dilation d) reads input i, or -1.
int64_t source_of(int64_t i, int64_t k, int64_t s, int64_t p, int64_t d, int64_t out_extent) {
  int64_t t = i + p - k * d;
  if (t < 0 || t % s != 0 || t / s >= out_extent) return -1;
  return t / s;
}

}  // namespace

void conv2d_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    const TensorRef &xr = a.in[0], &wr = a.in[1], &yr = a.out[0];
    Window k = conv_window(a, wr);
    int64_t c_in = xr.dim(1), h = xr.dim(2), w = xr.dim(3);
    int64_t o_ch = wr.dim(0), oh_n = yr.dim(2), ow_n = yr.dim(3);
    const T* x = xr.as<T>();   // (N, C, H, W)
    const T* wt = wr.as<T>();  // (O, C, KH, KW)
    T* y = yr.as<T>();         // (N, O, OH, OW)
    parallel_rows(xr.dim(0) * o_ch, [&](int64_t no) {
      int64_t n = no / o_ch, o = no % o_ch;
      for (int64_t oh = 0; oh < oh_n; ++oh) {
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          double acc = 0;
          for (int64_t c = 0; c < c_in; ++c) {
            for (int64_t i = 0; i < k.kh; ++i) {
              int64_t ih = oh * k.sh - k.ph + i * k.dh;
              if (ih < 0 || ih >= h) continue;
              for (int64_t j = 0; j < k.kw; ++j) {
                int64_t iw = ow * k.sw - k.pw + j * k.dw;
                if (iw < 0 || iw >= w) continue;
                acc += static_cast<double>(x[((n * c_in + c) * h + ih) * w + iw]) *
                       wt[((o * c_in + c) * k.kh + i) * k.kw + j];
              }
            }
          }
          y[(no * oh_n + oh) * ow_n + ow] = static_cast<T>(acc);
        }
      }
    });
  });
}

// dx[n, c, ih, iw] gathers every (o, tap) whose window reads (ih, iw).
void conv2d_grad_input_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    const TensorRef &xr = a.in[0], &wr = a.in[1], &dyr = a.in[2];
    Window k = conv_window(a, wr);
    int64_t c_in = xr.dim(1), h = xr.dim(2), w = xr.dim(3);
    int64_t o_ch = wr.dim(0), oh_n = dyr.dim(2), ow_n = dyr.dim(3);
    const T* wt = wr.as<T>();   // (O, C, KH, KW)
    const T* dy = dyr.as<T>();  // (N, O, OH, OW)
    T* dx = a.out[0].as<T>();   // (N, C, H, W)
    parallel_rows(xr.dim(0) * c_in, [&](int64_t nc) {
      int64_t n = nc / c_in, c = nc % c_in;
      for (int64_t ih = 0; ih < h; ++ih) {
        for (int64_t iw = 0; iw < w; ++iw) {
          double acc = 0;
          for (int64_t o = 0; o < o_ch; ++o) {
            for (int64_t i = 0; i < k.kh; ++i) {
              int64_t oh = source_of(ih, i, k.sh, k.ph, k.dh, oh_n);
              if (oh < 0) continue;
              for (int64_t j = 0; j < k.kw; ++j) {
                int64_t ow = source_of(iw, j, k.sw, k.pw, k.dw, ow_n);
                if (ow < 0) continue;
                acc += static_cast<double>(dy[((n * o_ch + o) * oh_n + oh) * ow_n + ow]) *
                       wt[((o * c_in + c) * k.kh + i) * k.kw + j];
              }
            }
          }
          dx[(nc * h + ih) * w + iw] = static_cast<T>(acc);
        }
      }
    });
  });
}

// dw[o, c, i, j] = sum over n, oh, ow of dy[n, o, oh, ow] * x[n, c, tap (i, j) of (oh, ow)].
void conv2d_grad_weight_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    const TensorRef &xr = a.in[0], &wr = a.in[1], &dyr = a.in[2];
    Window k = conv_window(a, wr);
    int64_t batch = xr.dim(0), c_in = xr.dim(1), h = xr.dim(2), w = xr.dim(3);
    int64_t o_ch = wr.dim(0), oh_n = dyr.dim(2), ow_n = dyr.dim(3);
    const T* x = xr.as<T>();    // (N, C, H, W)
    const T* dy = dyr.as<T>();  // (N, O, OH, OW)
    T* dw = a.out[0].as<T>();   // (O, C, KH, KW)
    parallel_rows(o_ch * c_in * k.kh * k.kw, [&](int64_t e) {
      int64_t j = e % k.kw, i = e / k.kw % k.kh, c = e / (k.kw * k.kh) % c_in;
      int64_t o = e / (k.kw * k.kh * c_in);
      double acc = 0;
      for (int64_t n = 0; n < batch; ++n) {
        for (int64_t oh = 0; oh < oh_n; ++oh) {
          int64_t ih = oh * k.sh - k.ph + i * k.dh;
          if (ih < 0 || ih >= h) continue;
          for (int64_t ow = 0; ow < ow_n; ++ow) {
            int64_t iw = ow * k.sw - k.pw + j * k.dw;
            if (iw < 0 || iw >= w) continue;
            acc += static_cast<double>(dy[((n * o_ch + o) * oh_n + oh) * ow_n + ow]) *
                   x[((n * c_in + c) * h + ih) * w + iw];
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
    Window k = pool_window(a);
    int64_t h = a.in[0].dim(2), w = a.in[0].dim(3), oh_n = a.out[0].dim(2), ow_n = a.out[0].dim(3);
    const T* x = a.in[0].as<T>();  // (N*C, H, W)
    T* y = a.out[0].as<T>();       // (N*C, OH, OW)
    parallel_rows(a.in[0].dim(0) * a.in[0].dim(1), [&](int64_t p) {
      const T* plane = x + p * h * w;
      for (int64_t oh = 0; oh < oh_n; ++oh) {
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          y[(p * oh_n + oh) * ow_n + ow] =
              plane[window_argmax(plane, w, pool_span(k, h, w, oh, ow))];
        }
      }
    });
  });
}

// The mean over the window's in-bounds elements (PyTorch's count_include_pad=False).
void avg_pool2d_kernel(const KernelArgs& a) {
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    Window k = pool_window(a);
    int64_t h = a.in[0].dim(2), w = a.in[0].dim(3), oh_n = a.out[0].dim(2), ow_n = a.out[0].dim(3);
    const T* x = a.in[0].as<T>();  // (N*C, H, W)
    T* y = a.out[0].as<T>();       // (N*C, OH, OW)
    parallel_rows(a.in[0].dim(0) * a.in[0].dim(1), [&](int64_t p) {
      const T* plane = x + p * h * w;
      for (int64_t oh = 0; oh < oh_n; ++oh) {
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          Span s = pool_span(k, h, w, oh, ow);
          double sum = 0;
          for (int64_t ih = s.h0; ih < s.h1; ++ih) {
            for (int64_t iw = s.w0; iw < s.w1; ++iw) sum += plane[ih * w + iw];
          }
          y[(p * oh_n + oh) * ow_n + ow] = static_cast<T>(sum / s.count());
        }
      }
    });
  });
}

// Pool gradients: one thread per (n, c) plane scatters dy into a double plane, windows in
// row-major order, then rounds once.
template <typename T, typename Scatter>
void pool_grad_planes(const KernelArgs& a, Scatter scatter) {
  Window k = pool_window(a);
  int64_t h = a.in[0].dim(2), w = a.in[0].dim(3), oh_n = a.in[1].dim(2), ow_n = a.in[1].dim(3);
  const T* x = a.in[0].as<T>();   // (N*C, H, W)
  const T* dy = a.in[1].as<T>();  // (N*C, OH, OW)
  T* dx = a.out[0].as<T>();       // (N*C, H, W)
  parallel_rows(a.in[0].dim(0) * a.in[0].dim(1), [&](int64_t p) {
    std::vector<double> acc(h * w, 0.0);  // (H, W)
    for (int64_t oh = 0; oh < oh_n; ++oh) {
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        scatter(x + p * h * w, w, pool_span(k, h, w, oh, ow), dy[(p * oh_n + oh) * ow_n + ow], acc);
      }
    }
    for (int64_t i = 0; i < h * w; ++i) dx[p * h * w + i] = static_cast<T>(acc[i]);
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
