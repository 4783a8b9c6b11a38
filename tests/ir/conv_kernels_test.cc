// Reference kernels of conv2d and the pools and of their gradients: hand-checked examples,
// invariants on random inputs of awkward sizes, and central finite differences in f64 of every
// gradient kernel against its forward kernel.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cmath>

#include "ir/ops/kernels.h"
#include "kernel_test_util.h"

// In the namespace of kernel_test_util.h, whose Tensor, run and expect_gradient every test uses.
namespace disc::ir::testing {
namespace {

Tensor iota(std::vector<int64_t> shape, double scale = 1) {
  Tensor x(std::move(shape));
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, scale * (i + 1));
  return x;
}

void expect_values(const Tensor& t, const std::vector<int64_t>& shape,
                   const std::vector<double>& v) {
  ASSERT_EQ(t.shape, shape);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_DOUBLE_EQ(t.get(i), v[i]) << "element " << i;
}

double dot(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += a.get(i) * b.get(i);
  return s;
}

using Ints = std::vector<int64_t>;

// --- Forward kernels ---

TEST(ConvKernels, Conv2dExamples) {
  Tensor x = iota({1, 1, 3, 3});  // 1..9
  // x[i, j] - x[i + 1, j + 1] = -4 everywhere.
  Tensor diag({1, 1, 2, 2}, {1, 0, 0, -1});
  expect_values(run("conv2d", {}, {&x, &diag})[0], {1, 1, 2, 2}, {-4, -4, -4, -4});
  // A 3x3 box with zero padding sums each element's neighbourhood.
  Tensor box({1, 1, 3, 3}, std::vector<double>(9, 1));
  expect_values(run("conv2d", {{"padding", Ints{1, 1}}}, {&x, &box})[0], {1, 1, 3, 3},
                {12, 21, 16, 27, 45, 33, 24, 39, 28});
  expect_values(run("conv2d", {{"padding", Ints{1, 1}}, {"stride", Ints{2, 2}}}, {&x, &box})[0],
                {1, 1, 2, 2}, {12, 16, 24, 28});
  // Dilation 2 spreads a 2x2 kernel over the corners.
  Tensor ones({1, 1, 2, 2}, {1, 1, 1, 1});
  expect_values(run("conv2d", {{"dilation", Ints{2, 2}}}, {&x, &ones})[0], {1, 1, 1, 1}, {20});
}

TEST(ConvKernels, Conv2dWithACentredDeltaKernelIsTheIdentity) {
  for (const auto& shape : std::vector<Ints>{{1, 1, 1, 1}, {2, 3, 7, 13}, {1, 5, 13, 7}}) {
    int64_t c = shape[1];
    Tensor x = random_tensor(shape, 1), w({c, c, 3, 3});
    for (int64_t o = 0; o < c; ++o) w.set(((o * c + o) * 3 + 1) * 3 + 1, 1);
    Tensor y = run("conv2d", {{"padding", Ints{1, 1}}}, {&x, &w})[0];
    EXPECT_EQ(y.storage, x.storage);
  }
}

TEST(ConvKernels, Conv2dWithA1x1KernelMixesChannels) {
  Tensor x = random_tensor({2, 5, 13, 7}, 2), w = random_tensor({7, 5, 1, 1}, 3);
  Tensor y = run("conv2d", {}, {&x, &w})[0];
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t o = 0; o < 7; ++o) {
      for (int64_t p = 0; p < 13 * 7; ++p) {
        double s = 0;
        for (int64_t c = 0; c < 5; ++c) s += w.get(o * 5 + c) * x.get((n * 5 + c) * 91 + p);
        EXPECT_NEAR(y.get((n * 7 + o) * 91 + p), s, 1e-13);
      }
    }
  }
}

// The gradient kernels are the adjoints of conv2d: <conv(x, w), dy> = <x, dx(dy)> = <w, dw(dy)>.
TEST(ConvKernels, Conv2dGradientsAreItsAdjoints) {
  Attributes attrs{{"stride", Ints{2, 1}}, {"padding", Ints{1, 2}}, {"dilation", Ints{2, 1}}};
  Tensor x = random_tensor({2, 3, 13, 7}, 4), w = random_tensor({5, 3, 3, 2}, 5);
  Tensor y = run("conv2d", attrs, {&x, &w})[0];
  Tensor dy = random_tensor(y.shape, 6);
  double forward = dot(y, dy);
  EXPECT_NEAR(dot(x, run("conv2d_grad_input", attrs, {&x, &w, &dy})[0]), forward,
              1e-12 * std::abs(forward));
  EXPECT_NEAR(dot(w, run("conv2d_grad_weight", attrs, {&x, &w, &dy})[0]), forward,
              1e-12 * std::abs(forward));
}

TEST(ConvKernels, PoolExamples) {
  Tensor x = iota({1, 1, 4, 4});  // 1..16
  Attributes two{{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}};
  expect_values(run("max_pool2d", two, {&x})[0], {1, 1, 2, 2}, {6, 8, 14, 16});
  expect_values(run("avg_pool2d", two, {&x})[0], {1, 1, 2, 2}, {3.5, 5.5, 11.5, 13.5});
  // With padding: the max ignores it even when every element is negative, and the mean divides
  // by the in-bounds count only.
  Attributes padded{{"kernel", Ints{3, 3}}, {"stride", Ints{1, 1}}, {"padding", Ints{1, 1}}};
  Tensor small = iota({1, 1, 3, 3}), negative = iota({1, 1, 3, 3}, -1);
  expect_values(run("max_pool2d", padded, {&negative})[0], {1, 1, 3, 3},
                {-1, -1, -2, -1, -1, -2, -4, -4, -5});
  expect_values(run("avg_pool2d", padded, {&small})[0], {1, 1, 3, 3},
                {3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7});
}

TEST(ConvKernels, PoolsOnAwkwardSizes) {
  for (const auto& shape : std::vector<Ints>{{1, 1, 1, 1}, {2, 3, 7, 13}, {1, 2, 13, 7}}) {
    Tensor x = random_tensor(shape, 7);
    // A 1x1 window is the identity for both.
    Attributes unit{{"kernel", Ints{1, 1}}, {"stride", Ints{1, 1}}};
    EXPECT_EQ(run("max_pool2d", unit, {&x})[0].storage, x.storage);
    EXPECT_EQ(run("avg_pool2d", unit, {&x})[0].storage, x.storage);
    if (shape[2] < 3) continue;
    // The max of a window is at least its mean.
    Attributes win{{"kernel", Ints{3, 2}}, {"stride", Ints{2, 1}}, {"padding", Ints{1, 1}}};
    Tensor mx = run("max_pool2d", win, {&x})[0], avg = run("avg_pool2d", win, {&x})[0];
    for (int64_t i = 0; i < mx.numel(); ++i) EXPECT_GE(mx.get(i), avg.get(i));
  }
}

// --- Gradient kernels against finite differences of their forward kernels ---

TEST(ConvGradients, Conv2dStridedPaddedDilated) {
  struct Case {
    Ints x, w;
    Attributes attrs;
  };
  for (const auto& c :
       {Case{{1, 2, 5, 5}, {3, 2, 3, 3}, {{"padding", Ints{1, 1}}}},
        Case{{2, 3, 7, 6},
             {4, 3, 3, 2},
             {{"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}, {"dilation", Ints{2, 2}}}}}) {
    Tensor x = random_tensor(c.x, 8), w = random_tensor(c.w, 9);
    Tensor dy = random_tensor(run("conv2d", c.attrs, {&x, &w})[0].shape, 10);
    expect_gradient("conv2d", c.attrs, {x, w}, 0, dy,
                    run("conv2d_grad_input", c.attrs, {&x, &w, &dy})[0]);
    expect_gradient("conv2d", c.attrs, {x, w}, 1, dy,
                    run("conv2d_grad_weight", c.attrs, {&x, &w, &dy})[0]);
  }
}

TEST(ConvGradients, PoolsWithPadding) {
  for (const char* op : {"max_pool2d", "avg_pool2d"}) {
    for (const Attributes& attrs :
         {Attributes{{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}},
          Attributes{{"kernel", Ints{2, 3}}, {"stride", Ints{1, 2}}, {"padding", Ints{1, 0}}}}) {
      Tensor x = random_tensor({2, 3, 7, 9}, 11);
      Tensor dy = random_tensor(run(op, attrs, {&x})[0].shape, 12);
      expect_gradient(op, attrs, {x}, 0, dy, run(std::string(op) + "_grad", attrs, {&x, &dy})[0]);
    }
  }
}

TEST(ConvGradients, MaxPoolSendsATiedWindowsGradientToItsFirstMaximum) {
  Tensor x({1, 1, 2, 2}), dy({1, 1, 1, 1}, {2.5});
  Attributes two{{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}};
  expect_values(run("max_pool2d_grad", two, {&x, &dy})[0], {1, 1, 2, 2}, {2.5, 0, 0, 0});
  // Overlapping padded windows over a constant 3x3: each window's first in-bounds element.
  Tensor flat({1, 1, 3, 3}), ones({1, 1, 3, 3}, std::vector<double>(9, 1));
  Attributes padded{{"kernel", Ints{3, 3}}, {"stride", Ints{1, 1}}, {"padding", Ints{1, 1}}};
  expect_values(run("max_pool2d_grad", padded, {&flat, &ones})[0], {1, 1, 3, 3},
                {4, 2, 0, 2, 1, 0, 0, 0, 0});
}

TEST(ConvGradients, AvgPoolSpreadsEachWindowOverItsInBoundsElements) {
  Tensor x({1, 1, 2, 2}), dy({1, 1, 1, 1}, {4});
  Attributes two{{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}};
  expect_values(run("avg_pool2d_grad", two, {&x, &dy})[0], {1, 1, 2, 2}, {1, 1, 1, 1});
}

TEST(ConvGradients, ResultsDoNotDependOnTheThreadCount) {
  Attributes attrs{{"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}};
  Tensor x = random_tensor({4, 8, 33, 31}, 13, DType::kF32),
         w = random_tensor({6, 8, 3, 3}, 14, DType::kF32);
  Tensor dy = random_tensor(run("conv2d", attrs, {&x, &w})[0].shape, 15, DType::kF32);
  auto all = [&] {
    return std::vector<Tensor>{run("conv2d", attrs, {&x, &w})[0],
                               run("conv2d_grad_input", attrs, {&x, &w, &dy})[0],
                               run("conv2d_grad_weight", attrs, {&x, &w, &dy})[0]};
  };
  auto many = all();
  tbb::global_control serial(tbb::global_control::max_allowed_parallelism, 1);
  auto one = all();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(one[i].storage, many[i].storage) << "result " << i;
}

}  // namespace
}  // namespace disc::ir::testing
