// The inline f32 exp, log, tanh, sigmoid and silu (jit/cpu/llvm_math.h) against libm in double,
// rounded to f32, over the whole f32 range: every 4099th bit pattern (about a million values, some
// two thousand in every binade, both signs, subnormals, infinities and NaNs included), as kernels
// through the emitter. The errors are in ulp, counted as the distance between the bit patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "jit/cpu/kernel_cache.h"
#include "jit/kernel_ir/kernel_ir.h"

namespace disc::jit {
namespace {

// Floats in the order of their values: adjacent floats differ by 1 (+0 and -0 are both 0).
int64_t ordered(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i >= 0 ? int64_t{i} : -int64_t{i & 0x7fffffff};
}

int64_t ulp_distance(float got, float want) {
  if (std::isnan(want) || std::isnan(got))
    return std::isnan(want) && std::isnan(got) ? 0 : std::numeric_limits<int64_t>::max();
  return std::abs(ordered(got) - ordered(want));
}

std::vector<float> sweep() {
  std::vector<float> x;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4099) {
    const auto b = static_cast<uint32_t>(bits);
    float f;
    std::memcpy(&f, &b, sizeof f);
    x.push_back(f);
  }
  for (float f : {0.f, -0.f, INFINITY, -INFINITY, NAN, 88.72283f, 88.72284f, -87.33654f,
                  -103.97208f, -103.97209f, 0.625f, -0.625f, 1.f, -1.f})
    x.push_back(f);
  return x;
}

// The largest error of `op` over the sweep, and the input where it happens.
struct Worst {
  int64_t ulp = 0;
  float at = 0;
};

DISC_CALLS_JIT_CODE Worst worst_error(KernelCache& cache, KOp op, double (*reference)(double)) {
  const KernelIR k = KernelIR::parse(
      "kernel inputs=1 outputs=1 space=0 types=f32,f32\n"
      "%0 = load 0 full\n%1 = " +
      std::string(kop_name(op)) + " %0\nstore 1 full %1");
  std::vector<float> x = sweep(), y(x.size());
  const auto cols = static_cast<int64_t>(x.size());
  void* buffers[] = {x.data(), y.data()};
  run_kernel(k, cache.get(k, cols, false).fn, 1, cols, buffers);
  Worst w;
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t e = ulp_distance(y[i], static_cast<float>(reference(x[i])));
    if (e > w.ulp) w = {e, x[i]};
  }
  return w;
}

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}
double silu(double x) {
  return x / (1 + std::exp(-x));
}

TEST(LlvmMath, ErrorsInUlpOverTheWholeRange) {
  KernelCache cache("");
  struct Case {
    KOp op;
    double (*reference)(double);
    int64_t max_ulp;
  };
  for (const Case& c : {Case{KOp::kExp, [](double x) { return std::exp(x); }, 2},
                        Case{KOp::kLog, [](double x) { return std::log(x); }, 2},
                        Case{KOp::kTanh, [](double x) { return std::tanh(x); }, 4},
                        Case{KOp::kSigmoid, sigmoid, 4}, Case{KOp::kSilu, silu, 4}}) {
    const Worst w = worst_error(cache, c.op, c.reference);
    std::printf("%-8s max error %lld ulp (at %.9g)\n", std::string(kop_name(c.op)).c_str(),
                static_cast<long long>(w.ulp), w.at);
    EXPECT_LE(w.ulp, c.max_ulp) << kop_name(c.op) << " at " << w.at;
  }
}

}  // namespace
}  // namespace disc::jit
