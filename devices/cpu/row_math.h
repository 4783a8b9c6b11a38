// Row arithmetic for the devices' softmax-like loops (block attention, the fused linear
// cross-entropy): a vectorizable f32 exp, folds over independent lanes, the shifted exp and the
// sum of a row built on them, and the per-thread panel both keep between calls. Include it only in
// files compiled with -fno-trapping-math, which lets the compiler vectorize the comparisons (no
// FP traps are used), and call it from functions marked DISC_VECTOR_CLONES.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "base/vector_clones.h"

namespace disc::devices::row_math {

// Lanes of the partial maxima and sums: independent accumulators, so that the loops vectorize
// without reassociating one running sum (and give the same bits on every host).
constexpr int kLanes = 16;

// exp(x) for f32 as Cephes' expf computes it (x = n ln2 + r, a degree-7 polynomial in r, 2^n
// from the exponent bits), in plain arithmetic the compiler vectorizes. Relative error about
// 2e-7; x below -87 gives exp(-87), not a denormal (a softmax term that small is 0 in the sum).
inline float exp_f32(float x) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to the nearest integer
  x = x < -87.0f ? -87.0f : x;
  const float t = x * 1.44269504f + kRound;
  const float n = t - kRound;
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t e = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kRound);  // n
  return p * std::bit_cast<float>((e + 127) << 23);
}
inline double exp_any(double x) {
  return std::exp(x);
}
inline float exp_any(float x) {
  return exp_f32(x);
}

// Folds f(lane[l], x[j]) over x[0, n) into kLanes lanes, lane l taking every j with j % kLanes
// == l. Blocks of kLanes elements make the inner loop one vector operation.
template <typename T, typename F>
[[gnu::always_inline]] inline void fold_lanes(T* lane, const T* x, int64_t n, F&& f) {
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane[l] = f(lane[l], x[j + l]);
  }
  for (int l = 0; j < n; ++j, ++l) lane[l] = f(lane[l], x[j]);
}

// max(x[0, n)): kLanes lanes in one vector (GCC left fold_lanes' per-lane compare scalar: a
// quarter of the softmax row's time), then across them. A max is exact, so the order of the
// comparisons changes no bit of it; a NaN in x is skipped, as std::max(lane, NaN) skips it.
template <typename T>
[[gnu::always_inline]] inline T row_max(const T* x, int64_t n) {
  typedef T Lanes __attribute__((vector_size(kLanes * sizeof(T))));
  constexpr T kLowest = -std::numeric_limits<T>::infinity();
  Lanes m;
  for (int l = 0; l < kLanes; ++l) m[l] = kLowest;
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    Lanes v;
    std::memcpy(&v, x + j, sizeof v);
    m = v > m ? v : m;
  }
  T top = kLowest;
  for (int l = 0; l < kLanes; ++l) top = std::max(top, m[l]);
  for (; j < n; ++j) top = std::max(top, x[j]);
  return top;
}

// x[j] = exp(x[j] - max(x)) over x[0, n); returns that max.
template <typename T>
[[gnu::always_inline]] inline T exp_minus_max(T* x, int64_t n) {
  const T top = row_max(x, n);
  for (int64_t j = 0; j < n; ++j) x[j] = exp_any(x[j] - top);
  return top;
}

// The sum of x[0, n): kLanes partial sums in T, then added in Acc.
template <typename Acc, typename T>
[[gnu::always_inline]] inline Acc lane_sum(const T* x, int64_t n) {
  T lane[kLanes] = {};
  fold_lanes(lane, x, n, [](T s, T v) { return s + v; });
  Acc sum = 0;
  for (T v : lane) sum += v;
  return sum;
}

// A buffer of at least `elements` kept by the calling thread between calls (the kernels' panels).
template <typename T>
T* thread_panel(int64_t elements) {
  thread_local std::vector<T> buffer;
  if (static_cast<int64_t>(buffer.size()) < elements) buffer.resize(static_cast<size_t>(elements));
  return buffer.data();
}

}  // namespace disc::devices::row_math
