// The chunked linear cross-entropy against the op's reference kernel, which loops one row at a
// time in double: f32 and f64, w as [D, V] and as [V, D], sizes 1, primes, no rows, D = 0, ignored
// labels and none counted, and enough classes that the rows span several panels; bf16 on the CPU's
// bf16 dot products and widened. Results start as NaN, so a value left unwritten shows; a second
// run must give the same bits.
#include "devices/cpu/linear_cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "devices/cpu/cpu_device.h"
#include "ir/attribute.h"
#include "ir/op_registry.h"
#include "ir/tensor_ref.h"
#include "tests/devices/host_tensors.h"

namespace disc::devices {
namespace {

using testing::expect_close;
using testing::ref;

struct Case {
  int64_t rows, d, classes;
  bool transpose_w;
  int ignored_every = 0;  // every n-th label is ignore_index (1: all; 0: none)
};

std::string lce_case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::to_string(c.rows) + "x" + std::to_string(c.d) + "_v" + std::to_string(c.classes) +
         (c.transpose_w ? "_wt" : "_w") + "_ignore" + std::to_string(c.ignored_every);
}

// A case's inputs and the reference kernel's answers. bf16: inputs bf16 holds exactly.
template <typename T>
struct LceProblem {
  std::vector<T> h, w, loss, dh, dw;
  std::vector<int64_t> labels;
  int64_t count = 0;

  explicit LceProblem(const Case& c, bool bf16 = false)
      : h(c.rows * c.d), w(c.d * c.classes), labels(c.rows) {
    std::mt19937 rng(static_cast<uint32_t>(c.rows * 131 + c.d * 17 + c.classes));
    std::uniform_real_distribution<double> dist(-2, 2);
    for (auto* x : {&h, &w}) {
      for (T& e : *x) {
        e = static_cast<T>(dist(rng));
        if (bf16) e = static_cast<T>(bf16_to_f32(f32_to_bf16(static_cast<float>(e))));
      }
    }
    for (int64_t r = 0; r < c.rows; ++r) {
      const bool ignored = c.ignored_every > 0 && r % c.ignored_every == 0;
      labels[r] = ignored ? -100 : static_cast<int64_t>(rng() % c.classes);
      count += !ignored;
    }
    const std::vector<int64_t> w_shape =
        c.transpose_w ? std::vector{c.classes, c.d} : std::vector{c.d, c.classes};
    loss.resize(1), dh.resize(h.size()), dw.resize(w.size());
    ir::Attributes attrs;
    attrs.set("ignore_index", int64_t{-100});
    attrs.set("transpose_w", c.transpose_w);
    ir::KernelArgs k{.op = "linear_cross_entropy", .attrs = &attrs};
    k.in = {ref(h, {c.rows, c.d}),
            ref(w, w_shape),
            {.dtype = DType::kI64, .shape = {c.rows}, .data = labels.data()}};
    k.out = {ref(loss, {}), ref(dh, {c.rows, c.d}), ref(dw, w_shape)};
    ir::OpRegistry::instance().get("linear_cross_entropy").reference(k);
  }

  LinearCrossEntropyArgs args(const Case& c) const {
    return {.dtype = std::is_same_v<T, double> ? DType::kF64 : DType::kF32,
            .rows = c.rows,
            .d = c.d,
            .classes = c.classes,
            .transpose_w = c.transpose_w,
            .h = h.data(),
            .w = w.data(),
            .labels = labels.data(),
            .count = count};
  }
};

template <typename T>
void check_case(const Case& c, double tol) {
  const LceProblem<T> p(c);
  auto dev = make_cpu_device(2);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> got_loss(1, nan), got_dh(p.dh.size(), nan), got_dw(p.dw.size(), nan);
  linear_cross_entropy(*dev, p.args(c), got_loss.data(), got_dh.data(), got_dw.data());
  expect_close(got_loss, p.loss, tol, "loss");
  expect_close(got_dh, p.dh, tol, "dh");
  expect_close(got_dw, p.dw, tol, "dw");

  std::vector<T> loss2(1), dh2(p.dh.size()), dw2(p.dw.size());
  linear_cross_entropy(*dev, p.args(c), loss2.data(), dh2.data(), dw2.data());
  EXPECT_EQ(loss2, got_loss);
  EXPECT_EQ(dh2, got_dh);
  EXPECT_EQ(dw2, got_dw);
}

// bf16 h and w on `dev` against the f32 reference on the same values (the loss f32, dh and dw
// rounded to bf16), and the same bits run to run.
void check_bf16_head(Device& dev, const Case& c, double tol) {
  const LceProblem<float> p(c, /*bf16=*/true);
  const auto h = testing::to_bf16(p.h), w = testing::to_bf16(p.w);
  LinearCrossEntropyArgs a = p.args(c);
  a.dtype = DType::kBF16, a.h = h.data(), a.w = w.data();
  auto run = [&] {
    std::vector<float> loss(1, std::numeric_limits<float>::quiet_NaN());
    std::vector<uint16_t> dh(h.size(), 0x7fc0), dw(w.size(), 0x7fc0);  // NaN
    linear_cross_entropy(dev, a, loss.data(), dh.data(), dw.data());
    return std::tuple(loss, dh, dw);
  };
  const auto [loss, dh, dw] = run();
  expect_close(loss, p.loss, 1e-5, "loss");  // f32 logits from exact products
  expect_close(testing::from_bf16(dh), p.dh, tol, "dh");
  expect_close(testing::from_bf16(dw), p.dw, tol, "dw");
  EXPECT_EQ(run(), std::tuple(loss, dh, dw));
}

class LinearCrossEntropy : public ::testing::TestWithParam<Case> {};

TEST_P(LinearCrossEntropy, F32MatchesReference) {
  check_case<float>(GetParam(), 2e-5);
}
TEST_P(LinearCrossEntropy, F64MatchesReference) {
  check_case<double>(GetParam(), 1e-12);
}
// G rounded to bf16 before its GEMMs, dh and dw once more: within two units of bf16.
TEST_P(LinearCrossEntropy, Bf16OnBf16DotProductsMatchesReference) {
  cpu::CpuDevice dev(2);
  if (!dev.has_16bit_dot(DType::kBF16)) GTEST_SKIP() << "this CPU has no bf16 dot products";
  check_bf16_head(dev, GetParam(), 0x1p-6);
}
TEST_P(LinearCrossEntropy, Bf16WidenedMatchesReference) {
  cpu::CpuDevice dev(2, /*bf16_dot=*/false);
  check_bf16_head(dev, GetParam(), 0x1p-7);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, LinearCrossEntropy,
    ::testing::Values(Case{1, 1, 1, false}, Case{1, 5, 7, true}, Case{7, 3, 31, false, 3},
                      Case{65, 17, 1000, true, 5}, Case{300, 8, 5, false, 7},
                      Case{13, 64, 97, true},
                      Case{5, 4, 3, false, 1},  // every label ignored: loss 0, zero gradients
                      Case{0, 4, 3, false}, Case{6, 0, 11, true},
                      // 131072 f64 classes fill a panel in 32 rows: 3 panels
                      Case{70, 2, 131072, false, 9}, Case{40, 2, 131072, true}),
    lce_case_name);

TEST(LinearCrossEntropy, PanelsHoldAtMostTheirBytes) {
  LinearCrossEntropyArgs a{.rows = 10000, .d = 512, .classes = 32000};
  EXPECT_EQ(cross_entropy_chunk(a), kCrossEntropyPanel / (32000 * 4));
  a.classes = int64_t{1} << 24;
  EXPECT_EQ(cross_entropy_chunk(a), 1);  // one row, even when it alone needs more
  a.classes = 10, a.rows = 3;
  EXPECT_EQ(cross_entropy_chunk(a), 3);
}

TEST(LinearCrossEntropy, RejectsWhatItCannotRun) {
  auto dev = make_cpu_device(1);
  float x[8] = {};
  int64_t label = 0;
  LinearCrossEntropyArgs a{.dtype = DType::kI32,
                           .rows = 1,
                           .d = 1,
                           .classes = 1,
                           .h = x,
                           .w = x,
                           .labels = &label,
                           .count = 1};
  EXPECT_THROW(linear_cross_entropy(*dev, a, x, x, x), InvalidArgument);
  a.dtype = DType::kF32, a.classes = 0;
  EXPECT_THROW(linear_cross_entropy(*dev, a, x, x, x), InvalidArgument);
}

}  // namespace
}  // namespace disc::devices
