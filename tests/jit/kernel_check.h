// The emitter's conformance harness: runs a kernel IR compiled through the KernelCache and the
// double-precision interpreter on the same random inputs, and compares every output element.
//
//   KernelCache cache("");
//   check_kernel(cache, k, {.rows = 3, .cols = 17, .is_static = false}, {.rtol = 1e-5});
//   check_everywhere(cache, k, {.rtol = 1e-5});  // all of kCols x kRows, static and dynamic
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iomanip>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/half.h"
#include "ir/tensor_ref.h"
#include "jit/cpu/kernel_cache.h"
#include "jit/kernel_ir/kernel_interpreter.h"
#include "jit/kernel_ir/kernel_ir.h"

namespace disc::jit {

// Column extents: 1, small primes and neighbours of the vector widths (4, 8, 16 lanes and the
// unrolled 32, 64), an odd mid size, a vocabulary.
inline constexpr int64_t kCols[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 127, 1000, 32000};
inline constexpr int64_t kRows[] = {1, 3, 64};

struct Tolerance {
  double rtol = 1e-5;  // relative to the interpreter's value
  double atol = 0;     // absolute, for values that cancel towards 0
};

struct Case {
  int64_t rows = 1, cols = 1;
  bool is_static = false;
};

// How a buffer's random values are drawn: uniform in [lo, hi], integers too unless `labels`
// (integers in [0, cols): column labels). With `specials`, every fifth float element becomes one
// of 0, -0, +-inf, NaN, tiny, huge or subnormal numbers, or numbers where exp over- or underflows.
struct Fill {
  double lo = -3, hi = 3;
  bool specials = false;
  bool labels = true;
};

namespace detail {

inline Access access_of(const KernelIR& k, int buffer) {
  for (const Instr& in : k.code)
    if (names_buffer(in.op) && in.buffer == buffer) return in.access;
  return Access::kScalar;
}

inline std::vector<int64_t> shape_of(Access a, const Case& c) {
  switch (a) {
    case Access::kFull:
      return {c.rows, c.cols};
    case Access::kRow:
      return {c.rows};
    case Access::kCol:
      return {c.cols};
    default:
      return {};
  }
}

inline double special(int64_t i) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  constexpr double values[] = {
      0.0,   -0.0,   inf,    -inf,  std::numeric_limits<double>::quiet_NaN(),
      1e-30, -1e-30, 1e30,   -1e30, 88.5,
      -88.5, 100.0,  -100.0, 1e-40};
  return values[i % std::size(values)];
}

// One buffer's memory; 8-byte aligned for every element type.
struct HostBuffer {
  DType type = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<int64_t> storage;

  ir::TensorRef ref() { return {type, shape, storage.data()}; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  void set(int64_t i, double v) {
    void* p = storage.data();
    switch (type) {
      case DType::kF32:
        static_cast<float*>(p)[i] = static_cast<float>(v);
        break;
      case DType::kF64:
        static_cast<double*>(p)[i] = v;
        break;
      case DType::kI32:
        static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
        break;
      case DType::kI64:
        static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v);
        break;
      case DType::kBool:
        static_cast<bool*>(p)[i] = v != 0;
        break;
      case DType::kBF16:
        static_cast<uint16_t*>(p)[i] = f32_to_bf16(static_cast<float>(v));
        break;
      case DType::kF16:
        static_cast<uint16_t*>(p)[i] = f32_to_f16(static_cast<float>(v));
        break;
      default:
        break;
    }
  }
  // An output element (f32, bf16 or f16) as f32.
  float f32(int64_t i) const {
    const void* p = storage.data();
    if (type == DType::kBF16) return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    if (type == DType::kF16) return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    return static_cast<const float*>(p)[i];
  }
};

inline HostBuffer make_buffer(DType t, std::vector<int64_t> shape, const Fill& fill, int64_t cols,
                              std::mt19937& rng) {
  HostBuffer b{t, std::move(shape), {}};
  b.storage.assign(static_cast<size_t>(b.numel() + 1), 0);  // 8 bytes per element at most
  const bool integer = t == DType::kI32 || t == DType::kI64;
  std::uniform_real_distribution<double> u(fill.lo, fill.hi);
  std::uniform_int_distribution<int64_t> ints(
      fill.labels ? 0 : static_cast<int64_t>(fill.lo),
      fill.labels ? std::max<int64_t>(cols - 1, 0) : static_cast<int64_t>(fill.hi));
  for (int64_t i = 0; i < b.numel(); ++i) {
    double v = integer ? static_cast<double>(ints(rng)) : t == DType::kBool ? rng() % 2 : u(rng);
    if (fill.specials && !integer && i % 5 == 2) v = special(i / 5);
    b.set(i, v);
  }
  return b;
}

inline bool close(float got, float want, const Tolerance& t) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::fabs(double{got} - want) <= t.atol + t.rtol * std::fabs(double{want});
}

}  // namespace detail

// Runs `k` on one case's buffers (inputs, then outputs) with an emitter's code.
using KernelRunner = std::function<void(const KernelIR& k, const Case& c, void** buffers)>;

// Runs `k` on one case with `run` and compares with interpret(); `fills[i]` for input i (missing:
// the default). Returns the emitted code's outputs (for bitwise comparisons between runs).
inline std::vector<std::vector<float>> check_kernel_with(const KernelRunner& run, const KernelIR& k,
                                                         const Case& c, const Tolerance& tol,
                                                         const std::vector<Fill>& fills = {},
                                                         uint32_t seed = 1) {
  std::mt19937 rng(seed + static_cast<uint32_t>(c.rows * 7919 + c.cols));
  std::vector<detail::HostBuffer> jit, ref;
  for (int b = 0; b < k.buffers(); ++b) {
    const Fill fill = b < static_cast<int>(fills.size()) ? fills[b] : Fill{};
    jit.push_back(detail::make_buffer(k.types[b], detail::shape_of(detail::access_of(k, b), c),
                                      fill, c.cols, rng));
    if (b >= k.inputs)  // outputs start as a sentinel, so an element left unwritten shows
      for (int64_t i = 0; i < jit.back().numel(); ++i) jit.back().set(i, -12345.0);
    ref.push_back(jit.back());
  }
  std::vector<ir::TensorRef> refs;
  std::vector<void*> pointers;
  for (auto& b : ref) refs.push_back(b.ref());
  for (auto& b : jit) pointers.push_back(b.storage.data());
  interpret(k, refs);
  run(k, c, pointers.data());

  std::vector<std::vector<float>> outputs;
  for (int b = k.inputs; b < k.buffers(); ++b) {
    int64_t bad = 0;
    std::ostringstream first;
    first << std::setprecision(9);
    outputs.emplace_back();
    for (int64_t i = 0; i < jit[b].numel(); ++i) {
      const float got = jit[b].f32(i), want = ref[b].f32(i);
      outputs.back().push_back(got);
      if (detail::close(got, want, tol)) continue;
      if (bad++ < 3) first << " [" << i << "] " << got << " vs " << want << ";";
    }
    EXPECT_EQ(bad, 0) << "buffer " << b << ", " << c.rows << " x " << c.cols
                      << (c.is_static ? " static" : " dynamic") << ":" << first.str() << "\n"
                      << k.str();
  }
  return outputs;
}

// check_kernel_with the LLVM emitter's code, compiled through `cache` and run over TBB.
inline std::vector<std::vector<float>> check_kernel(KernelCache& cache, const KernelIR& k,
                                                    const Case& c, const Tolerance& tol,
                                                    const std::vector<Fill>& fills = {},
                                                    uint32_t seed = 1) {
  auto run = [&](const KernelIR& kernel, const Case& cs, void** buffers) {
    const KernelCache::Lookup l = cache.get(kernel, cs.cols, cs.is_static);
    run_kernel(kernel, l.fn, cs.rows, cs.cols, buffers);
  };
  return check_kernel_with(run, k, c, tol, fills, seed);
}

// check_kernel on every extent in kCols and kRows, static and dynamic.
inline void check_everywhere(KernelCache& cache, const KernelIR& k, const Tolerance& tol,
                             const std::vector<Fill>& fills = {}) {
  for (int64_t cols : kCols)
    for (int64_t rows : kRows)
      for (bool is_static : {true, false}) {
        check_kernel(cache, k, {rows, cols, is_static}, tol, fills);
        if (::testing::Test::HasFailure()) return;  // one failing case says enough
      }
}

}  // namespace disc::jit
