#include "jit/kernel_ir/kernel_ir.h"

#include <gtest/gtest.h>

#include <random>

#include "base/error.h"
#include "ir/op_registry.h"
#include "jit/kernel_ir/kernel_interpreter.h"
#include "tests/jit/pattern_kernels.h"

namespace disc::jit {
namespace {

TEST(KernelIR, PrintsWhatItParses) {
  KernelIR k = KernelIR::parse(kSoftmax);
  EXPECT_EQ(k.str(), kSoftmax);
  EXPECT_EQ(KernelIR::parse(k.str()).fingerprint(), k.fingerprint());
  std::vector<Level> l = k.levels();
  EXPECT_EQ(l[0], Level::kElement);
  EXPECT_EQ(l[1], Level::kRow);
  EXPECT_EQ(l[2], Level::kElement);
  EXPECT_EQ(l[4], Level::kRow);
}

TEST(KernelIR, SemicolonsSeparateInstructionsToo) {
  EXPECT_EQ(
      KernelIR::parse(
          "kernel inputs=1 outputs=1 space=0 types=f32,f32; %0 = load 0 full; store 1 full %0")
          .code.size(),
      2u);
}

// An output may take an input's buffer only when every read of that input is at the index being
// written: not through load_at (another column of the row), not by row, not of another type.
TEST(KernelIR, InPlaceInputsAreReadOnlyAtTheirOwnIndex) {
  EXPECT_EQ(KernelIR::parse(kSoftmax).in_place_inputs(), std::vector<int>{0});
  const std::string h = "kernel inputs=4 outputs=1 space=0 types=f32,f32,f32,i64,f32\n";
  const KernelIR k = KernelIR::parse(
      h +
      "%0 = load 0 full\n%1 = load 1 row\n%2 = load 3 full\n%3 = load_at 2 full %1\n"
      "%4 = load 2 full\n%5 = add %0 %1\n%6 = add %5 %3\n%7 = add %6 %4\n%8 = add %7 %2\n"
      "store 4 full %8");
  EXPECT_EQ(k.in_place_inputs(), std::vector<int>{0});  // 1: by row, 2: load_at, 3: i64
  // With several outputs, an input read after an output's store cannot take that output: the
  // interpreter runs each instruction over the whole row. Here input 1 is read after output 0's
  // store (the AdamW kernel reads the parameter and both moments before its first store).
  const KernelIR two = KernelIR::parse(
      "kernel inputs=2 outputs=2 space=0 types=f32,f32,f32,f32\n"
      "%0 = load 0 full\nstore 2 full %0\n%2 = load 1 full\n"
      "%3 = add %0 %2\nstore 3 full %3");
  EXPECT_EQ(two.in_place_inputs(0), std::vector<int>{0});
  EXPECT_EQ(two.in_place_inputs(1), (std::vector<int>{0, 1}));
  EXPECT_TRUE(two.in_place_inputs(2).empty());  // no such output
  EXPECT_TRUE(KernelIR::parse("kernel inputs=1 outputs=1 space=0 types=f32,f32\n"
                              "%0 = load 0 full\nstore 1 col %0")
                  .in_place_inputs()
                  .empty());  // a column sum, not an element per index
}

void expect_rejected(const std::string& text, const std::string& says) {
  try {
    KernelIR::parse(text);
    ADD_FAILURE() << "accepted:\n" << text;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(KernelIR, RejectsMalformedKernelsNamingTheInstruction) {
  const std::string h = "kernel inputs=1 outputs=1 space=0 types=f32,f32\n";
  expect_rejected(h + "%0 = load 0 full\n%1 = add %0 %2\nstore 1 full %1",
                  "instruction 1: argument %2 is not an earlier");
  expect_rejected(h + "%0 = load 1 full\nstore 1 full %0", "loads from output buffer 1");
  expect_rejected(h + "%0 = load 0 full\nstore 0 full %0", "stores to input buffer 0");
  expect_rejected(h + "%0 = load 0 full\nstore 1 row %0", "higher level with row access");
  expect_rejected(h + "%0 = load 0 full\nstore 1 scalar %0", "higher level with scalar access");
  expect_rejected(h + "%0 = load 0 full\n%1 = reduce_sum %0\n%2 = sum_rows %1\nstore 1 full %2",
                  "sum_rows sums a value made by a reduce_sum");
  expect_rejected(h + "%0 = load 0 full\n%1 = sum_rows %0\nstore 1 full %1",
                  "sum_rows sums a value that is not per row");
  expect_rejected(h + "%0 = load 0 full\n%1 = check_labels %0\nstore 1 full %0",
                  "checks a value that is not scalar");
  expect_rejected(
      h + "%0 = load 0 full\n%1 = const 0\n%2 = check_labels %1\n%3 = add %2 %0\nstore 1 full %3",
      "is a check_labels, which has no value");
  expect_rejected(h + "%0 = load 0 full", "never stored");
  expect_rejected(h + "%0 = load 0 full\nstore 1 full %0\nstore 1 full %0", "stored twice");
  expect_rejected(h + "%0 = load 0 full\n%1 = lt %0 %0\nstore 1 full %1", "is a bool");
  expect_rejected(h + "%0 = load 0 full\n%1 = frob %0\nstore 1 full %1", "unknown op `frob`");
  expect_rejected(h + "%0 = load 0 sideways\nstore 1 full %0", "unknown access `sideways`");
  expect_rejected(
      "kernel inputs=1 outputs=1 space=0 types=f32,q8\n%0 = load 0 full\nstore 1 full %0",
      "unknown dtype `q8`");
}

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, 2);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(KernelInterpreter, SoftmaxMatchesTheReferenceKernel) {
  const KernelIR k = KernelIR::parse(kSoftmax);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {5, 31}, {2, 1000}}) {
    std::vector<float> x = random_floats(rows * cols, 7), y(x.size()), want(x.size());
    ir::TensorRef xr{DType::kF32, {rows, cols}, x.data()}, yr{DType::kF32, {rows, cols}, y.data()};
    interpret(k, {xr, yr});
    ir::Attributes attrs;
    attrs.set("axis", int64_t{-1});
    ir::KernelArgs a{.op = "softmax", .attrs = &attrs};
    a.in = {xr};
    a.out = {ir::TensorRef{DType::kF32, {rows, cols}, want.data()}};
    ir::OpRegistry::instance().get("softmax").reference(a);
    for (size_t i = 0; i < y.size(); ++i)
      EXPECT_NEAR(y[i], want[i], 1e-6f) << rows << "x" << cols << " at " << i;
  }
}

TEST(KernelInterpreter, IndexesEveryAccessAndSelectsWithCompares) {
  // y[r, c] = (c == label[r]) ? x[r, c] * w[c] : s  ; one-hot through col_index
  const KernelIR k = KernelIR::parse(R"(kernel inputs=4 outputs=1 space=0 types=f32,i32,f32,f32,f32
%0 = load 0 full
%1 = load 1 row
%2 = load 2 col
%3 = load 3 scalar
%4 = col_index
%5 = eq %4 %1
%6 = mul %0 %2
%7 = select %5 %6 %3
store 4 full %7)");
  const int64_t rows = 3, cols = 5;
  std::vector<float> x = random_floats(rows * cols, 1), w = random_floats(cols, 2), y(rows * cols);
  std::vector<int32_t> label = {0, 4, 2};
  float s = -9;
  interpret(k, {{DType::kF32, {rows, cols}, x.data()},
                {DType::kI32, {rows}, label.data()},
                {DType::kF32, {cols}, w.data()},
                {DType::kF32, {}, &s},
                {DType::kF32, {rows, cols}, y.data()}});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      EXPECT_EQ(y[r * cols + c], c == label[r] ? x[r * cols + c] * w[c] : s);
}

TEST(KernelInterpreter, RefusesBuffersThatDoNotFitTheirAccess) {
  const KernelIR k = KernelIR::parse(kSoftmax);
  std::vector<float> x(6), y(5);
  try {
    interpret(k, {{DType::kF32, {2, 3}, x.data()}, {DType::kF32, {5}, y.data()}});
    ADD_FAILURE() << "accepted a 5-element output over a 2 x 3 space";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "buffer 1 is f32 with 5 elements; its full access over 2 x 3 needs f32 with 6"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace disc::jit
