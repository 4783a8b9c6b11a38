#include "devices/cpu/rope.h"

#include <tbb/parallel_for.h>

#include <string>

#include "base/error.h"
#include "base/half.h"
#include "base/vector_clones.h"

namespace disc::devices {
namespace {

// One row's pairs, as the reference computes them: x0 c - x1 s and x1 c + x0 s in double (s
// negated for the inverse), each rounded once to the element type. Loads and stores go through
// f32 for the 16-bit types (exact widening; f32 -> bf16 rounds as base/half.h does), which is
// what the reference's f32 copies give.
template <typename E, typename Load, typename Store>
[[gnu::always_inline]] inline void rotate_row(const E* x, E* y, const double* c, const double* s,
                                              int64_t half, double sign, Load load, Store store) {
  // Iteration i reads and writes only elements i and i + half: no dependence between iterations,
  // also where y is x (the compiler could not prove it and would keep that case scalar).
#if defined(__clang__)
#pragma clang loop vectorize(assume_safety)
#elif defined(__GNUC__)
#pragma GCC ivdep
#endif
  for (int64_t i = 0; i < half; ++i) {
    const double x0 = load(x[i]), x1 = load(x[i + half]), si = sign * s[i];
    const double y0 = x0 * c[i] - x1 * si, y1 = x1 * c[i] + x0 * si;
    y[i] = store(y0);
    y[i + half] = store(y1);
  }
}

// The rows per element type, each cloned per vector width (Clang clones no templates).
DISC_VECTOR_CLONES void rotate_f32(const float* x, float* y, const double* c, const double* s,
                                   int64_t half, double sign) {
  rotate_row(
      x, y, c, s, half, sign, [](float v) { return double{v}; },
      [](double v) { return static_cast<float>(v); });
}
DISC_VECTOR_CLONES void rotate_f64(const double* x, double* y, const double* c, const double* s,
                                   int64_t half, double sign) {
  rotate_row(x, y, c, s, half, sign, [](double v) { return v; }, [](double v) { return v; });
}
DISC_VECTOR_CLONES void rotate_bf16(const uint16_t* x, uint16_t* y, const double* c,
                                    const double* s, int64_t half, double sign) {
  rotate_row(
      x, y, c, s, half, sign, [](uint16_t v) { return double{bf16_to_f32(v)}; },
      [](double v) { return f32_to_bf16(static_cast<float>(v)); });
}
void rotate_f16(const uint16_t* x, uint16_t* y, const double* c, const double* s, int64_t half,
                double sign) {
  rotate_row(
      x, y, c, s, half, sign, [](uint16_t v) { return double{f16_to_f32(v)}; },
      [](double v) { return f32_to_f16(static_cast<float>(v)); });
}

template <typename E, typename F>
void rotate_rows(const RopeArgs& a, void* out, F&& rotate) {
  const auto* x = static_cast<const E*>(a.x);
  auto* y = static_cast<E*>(out);
  const int64_t half = a.d / 2;
  const double sign = a.inverse ? -1.0 : 1.0;
  constexpr int64_t kRowsPerTask = 64;
  tbb::parallel_for(int64_t{0}, (a.rows + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t b) {
    for (int64_t r = b * kRowsPerTask; r < std::min(a.rows, (b + 1) * kRowsPerTask); ++r) {
      const int64_t p = a.position[(r * a.d / a.inner) % a.seq];
      rotate(x + r * a.d, y + r * a.d, a.cos + p * half, a.sin + p * half, half, sign);
    }
  });
}

}  // namespace

void rope(Device& dev, const RopeArgs& a, void* y) {
  if (!dev.is_host())
    throw InvalidArgument("rope on " + dev.name() + ": the CPU's rope runs on host memory");
  switch (a.dtype) {
    case DType::kF32:
      return rotate_rows<float>(a, y, rotate_f32);
    case DType::kF64:
      return rotate_rows<double>(a, y, rotate_f64);
    case DType::kBF16:
      return rotate_rows<uint16_t>(a, y, rotate_bf16);
    case DType::kF16:
      return rotate_rows<uint16_t>(a, y, rotate_f16);
    default:
      throw InvalidArgument(std::string("rope on the CPU: f32, f64, bf16 or f16, not ") +
                            std::string(dtype_name(a.dtype)));
  }
}

}  // namespace disc::devices
