// What the device kernel tests share: host vectors seen as tensors, and the comparison of a
// kernel's results with the reference's.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "base/half.h"
#include "ir/tensor_ref.h"

namespace disc::devices::testing {

// `v` (f32, f64 or i32) as a tensor of `shape`.
template <typename T>
ir::TensorRef ref(std::vector<T>& v, std::vector<int64_t> shape) {
  return {.dtype = std::is_same_v<T, double>    ? DType::kF64
                   : std::is_same_v<T, int32_t> ? DType::kI32
                                                : DType::kF32,
          .shape = std::move(shape),
          .data = v.data()};
}

// Every element within `tol`, relative to 1 + |want|; the first that is not names `what` and its
// index.
template <typename T>
void expect_close(const std::vector<T>& got, const std::vector<T>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(double(want[i])))) << what << "[" << i << "]";
  }
}

// n values drawn uniformly from (-range, range), the same for the same seed.
template <typename T>
std::vector<T> random_values(int64_t n, uint32_t seed, double range = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-range, range);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(rng));
  return v;
}

// f32 values rounded to bf16, and bf16 values widened to f32.
inline std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = f32_to_bf16(x[i]);
  return r;
}
inline std::vector<float> from_bf16(const std::vector<uint16_t>& x) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = bf16_to_f32(x[i]);
  return r;
}

}  // namespace disc::devices::testing
