// The LLVM emitter against the interpreter: hand-built kernels for each fusion pattern and every
// op, on random inputs, over column extents around every vector width (kCols), 1, 3 and 64 rows,
// static and dynamic buckets. The JIT computes in f32 where the interpreter uses double, so
// outputs agree within a stated tolerance: relative 1e-5 for arithmetic and reductions (a sum of
// 32000 positive f32 terms in 64 partial sums errs by ~1e-6 typically), 4 ulp (4.8e-7) for single
// transcendental ops. Scalar-level code runs in double, as the interpreter's.
#include "jit/cpu/llvm_emitter.h"

#include <gtest/gtest.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <tbb/global_control.h>

#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "jit/cpu/kernel_cache.h"
#include "jit/cpu/target.h"
#include "tests/base/on_stack.h"
#include "tests/jit/kernel_check.h"
#include "tests/jit/pattern_kernels.h"

namespace disc::jit {
namespace {

constexpr Tolerance kArithmetic{.rtol = 1e-5, .atol = 1e-5};
constexpr Tolerance kFourUlp{.rtol = 4.8e-7, .atol = 1e-42};

KernelIR parse(const std::string& text) {
  return KernelIR::parse(text);
}

TEST(LlvmEmitter, ElementwiseWithBroadcastsOfEveryAccess) {
  KernelCache cache("");
  check_everywhere(cache, parse(kBroadcasts), kArithmetic);
}

TEST(LlvmEmitter, SoftmaxOverRows) {
  KernelCache cache("");
  check_everywhere(cache, parse(kSoftmax), kArithmetic, {Fill{.lo = -10, .hi = 10}});
}

TEST(LlvmEmitter, RmsNormWithAColumnWeightAndARowStore) {
  KernelCache cache("");
  check_everywhere(cache, parse(kRmsNorm), kArithmetic,
                   {Fill{}, Fill{}, Fill{}, Fill{.lo = 0.001, .hi = 1}});
}

// The weight gradient is a column sum over every row: its error grows with the rows summed.
// Softmax's exp is read by the sum pass and the final one: the sum pass keeps it in the scratch
// row and the final pass reads it back (the same values: SoftmaxOverRows checks them). A value
// one pass reads, or a cheap one, is not kept.
TEST(LlvmEmitter, ExpensiveValuesSeveralPassesReadAreKeptInScratch) {
  const KernelIR softmax = parse(kSoftmax);
  const std::vector<int> kept = cached_values(softmax);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(softmax.code[kept[0]].op, KOp::kExp);
  EXPECT_TRUE(cached_values(parse(kRmsNorm)).empty());
}

TEST(LlvmEmitter, RmsNormGradWithAColumnSum) {
  KernelCache cache("");
  const std::vector<Fill> fills = {Fill{}, Fill{}, Fill{}, Fill{.lo = 0.001, .hi = 1}};
  check_everywhere(cache, parse(kRmsNormGrad), {.rtol = 1e-5, .atol = 1e-4}, fills);
  // Many row blocks, the last one partial.
  for (bool is_static : {true, false})
    check_kernel(cache, parse(kRmsNormGrad), {.rows = 1000, .cols = 33, .is_static = is_static},
                 {.rtol = 1e-5, .atol = 1e-3}, fills);
}

TEST(LlvmEmitter, CrossEntropyWithAOneHotOnTheColumnIndex) {
  KernelCache cache("");
  check_everywhere(cache, parse(kCrossEntropy), kArithmetic, {Fill{.lo = -10, .hi = 10}});
}

// Row totals taken before the rows (sum_rows), a check on them, and a row value summed over
// every row into a scalar store (in blocks, so 1000 rows make several).
TEST(LlvmEmitter, CrossEntropyMeanWithRowTotalsAndASummedScalarStore) {
  KernelCache cache("");
  const KernelIR k = parse(kCrossEntropyMean);
  check_everywhere(cache, k, {.rtol = 1e-5, .atol = 1e-5}, {Fill{.lo = -10, .hi = 10}});
  for (bool is_static : {true, false})
    check_kernel(cache, k, {.rows = 1000, .cols = 33, .is_static = is_static},
                 {.rtol = 1e-5, .atol = 1e-5}, {Fill{.lo = -10, .hi = 10}});
}

// The one-pass logsumexp (a running max per lane, the sum rescaled when it grows) against the
// interpreter's max-then-sum, with values far apart, masked tails and the lanes' merge tree; a
// row of -inf (a fully masked row) gives -inf.
TEST(LlvmEmitter, ReduceLogSumExpInOnePass) {
  KernelCache cache("");
  const KernelIR k = parse(R"(kernel inputs=1 outputs=1 space=0 types=f32,f32
%0 = load 0 full
%1 = reduce_logsumexp %0
store 1 row %1)");
  check_everywhere(cache, k, kArithmetic, {Fill{.lo = -30, .hi = 30}});
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(2 * 37, -inf), lse(2, 0.0f);
  x[37 + 36] = 2.0f;  // row 1: one finite value, last, in the masked tail
  void* buffers[] = {x.data(), lse.data()};
  run_kernel(k, cache.get(k, 37, false).fn, 2, 37, buffers);
  EXPECT_EQ(lse[0], -inf);
  EXPECT_EQ(lse[1], 2.0f);
}

// load_at reads each row at a column given per row, clamped into the row (an ignored label's
// -100 reads column 0): labels inside the row, then integers from -5 to 40 over every extent.
TEST(LlvmEmitter, LoadAtReadsTheRowAtAColumnPerRow) {
  KernelCache cache("");
  const KernelIR k = parse(R"(kernel inputs=2 outputs=1 space=0 types=f32,i64,f32
%0 = load 0 full
%1 = load 1 row
%2 = load_at 0 full %1
%3 = mul %0 %2
store 2 full %3)");
  check_everywhere(cache, k, kArithmetic);
  check_everywhere(cache, k, kArithmetic, {Fill{}, Fill{.lo = -5, .hi = 40, .labels = false}});
}

// A label outside the classes fails run_kernel before any row runs, with the count.
TEST(LlvmEmitter, CheckLabelsFailsTheRunWithTheCount) {
  std::string text = kCrossEntropyMean;
  text.replace(text.find("1000000000"), 10, "5");  // 5 classes; labels are drawn in [0, 17)
  const KernelIR k = parse(text);
  KernelCache cache("");
  std::vector<float> x(3 * 17, 0.0f), loss(1, -1.0f);
  std::vector<int64_t> labels = {2, 9, 16};
  void* buffers[] = {x.data(), labels.data(), loss.data()};
  try {
    run_kernel(k, cache.get(k, 17, false).fn, 3, 17, buffers);
    ADD_FAILURE() << "labels 9 and 16 of 5 classes passed";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("2 labels are outside the classes"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(loss[0], -1.0f);  // nothing written
}

TEST(LlvmEmitter, AdamWWithScalarMathInDouble) {
  KernelCache cache("");
  const std::vector<Fill> fills = {Fill{},
                                   Fill{},
                                   Fill{},
                                   Fill{.lo = 0, .hi = 2},
                                   Fill{.lo = 1e-4, .hi = 1e-2},
                                   Fill{.lo = 1, .hi = 1000, .labels = false}};
  check_everywhere(cache, parse(kAdamW), kArithmetic, fills);
}

TEST(LlvmEmitter, ComparesAndSelects) {
  KernelCache cache("");
  check_everywhere(cache, parse(kCompares), {.rtol = 0, .atol = 0});
}

// A kernel applying `op` per element, per row (to a row's max) and to a scalar.
KernelIR unary_kernel(KOp op) {
  const std::string name(kop_name(op));
  return parse(
      "kernel inputs=2 outputs=3 space=0 types=f32,f32,f32,f32,f32\n"
      "%0 = load 0 full\n%1 = load 1 scalar\n%2 = " +
      name +
      " %0\n"
      "%3 = reduce_max %0\n%4 = " +
      name + " %3\n%5 = " + name +
      " %1\n"
      "store 2 full %2\nstore 3 row %4\nstore 4 scalar %5");
}

TEST(LlvmEmitter, EveryUnaryOpAtEveryLevelWithSpecialValues) {
  KernelCache cache("");
  for (KOp op : {KOp::kNeg, KOp::kAbs, KOp::kExp, KOp::kLog, KOp::kSqrt, KOp::kRsqrt, KOp::kTanh,
                 KOp::kSigmoid, KOp::kSilu, KOp::kRelu}) {
    SCOPED_TRACE(kop_name(op));
    // Uniform in [-90, 90] reaches exp's overflow and underflow; the specials add the rest.
    check_everywhere(cache, unary_kernel(op), kFourUlp,
                     {Fill{.lo = -90, .hi = 90, .specials = true}, Fill{.lo = 0.5, .hi = 3}});
    if (::testing::Test::HasFailure()) return;
  }
}

// A kernel applying a binary op to a full and a column operand, per element.
KernelIR binary_kernel(KOp op) {
  return parse(
      "kernel inputs=2 outputs=1 space=0 types=f32,f32,f32\n"
      "%0 = load 0 full\n%1 = load 1 col\n%2 = " +
      std::string(kop_name(op)) + " %0 %1\nstore 2 full %2");
}

TEST(LlvmEmitter, EveryBinaryOpWithSpecialValues) {
  KernelCache cache("");
  for (KOp op : {KOp::kAdd, KOp::kSub, KOp::kMul, KOp::kDiv, KOp::kMax, KOp::kMin, KOp::kPow}) {
    SCOPED_TRACE(kop_name(op));
    check_everywhere(cache, binary_kernel(op), kFourUlp,
                     {Fill{.lo = -3, .hi = 3, .specials = true}, Fill{.lo = -3, .hi = 3}});
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(LlvmEmitter, PowAtRowLevelAndSquaresExactly) {
  KernelCache cache("");
  // y = pow(max(x), e) per row with e per row; z = pow(x, 2) per element (emitted as x * x).
  const KernelIR k = parse(R"(kernel inputs=2 outputs=2 space=0 types=f32,f32,f32,f32
%0 = load 0 full
%1 = load 1 row
%2 = reduce_max %0
%3 = pow %2 %1
%4 = const 2
%5 = pow %0 %4
store 2 row %3
store 3 full %5)");
  check_everywhere(cache, k, kFourUlp, {Fill{.lo = 0, .hi = 4, .specials = true}, Fill{}});
}

// A store broadcasts a value of a lower level: a row's max over the row, a constant over the
// tensor, a scalar into every row.
TEST(LlvmEmitter, StoresBroadcastLowerLevels) {
  KernelCache cache("");
  check_everywhere(cache, parse(R"(kernel inputs=2 outputs=3 space=0 types=f32,f32,f32,f32,f32
%0 = load 0 full
%1 = reduce_max %0
%2 = const 0.25
%3 = load 1 scalar
store 2 full %1
store 3 full %2
store 4 row %3)"),
                   kArithmetic);
}

// Rows of nothing: reductions give their identity (0 and -inf), full stores write nothing.
TEST(LlvmEmitter, EmptyRows) {
  KernelCache cache("");
  for (bool is_static : {true, false}) {
    check_kernel(cache, parse(kRmsNorm), {.rows = 3, .cols = 0, .is_static = is_static},
                 kArithmetic);
    check_kernel(cache, parse(R"(kernel inputs=1 outputs=1 space=0 types=f32,f32
%0 = load 0 full
%1 = reduce_max %0
store 1 row %1)"),
                 {.rows = 3, .cols = 0, .is_static = is_static}, kArithmetic);
  }
}

// jit.buckets boundaries: 32000 columns land in the open bucket above the last boundary, where
// the column index is computed in 64 bits.
TEST(LlvmEmitter, CustomBucketsAndTheOpenBucket) {
  KernelCache cache("", {256, 4096});
  for (int64_t cols : {1, 255, 256, 257, 4097, 32000}) {
    check_kernel(cache, parse(kCrossEntropy), {.rows = 3, .cols = cols}, kArithmetic,
                 {Fill{.lo = -10, .hi = 10}});
  }
}

// The executor runs kernels in place: an output may be the same memory as an input read with the
// same full access. y = x + r written over x, with a reduction of x in the same kernel.
DISC_CALLS_JIT_CODE void run_in_place(const KernelIR& k, KernelFn fn, int64_t rows, int64_t cols) {
  std::vector<float> x(rows * cols), r(rows * cols), s(rows);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (size_t i = 0; i < x.size(); ++i) x[i] = u(rng), r[i] = u(rng);
  std::vector<float> want(x.size()), want_s(rows, 0);
  for (int64_t i = 0; i < rows; ++i) {
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += x[i * cols + c];
    want_s[i] = static_cast<float>(sum);
    for (int64_t c = 0; c < cols; ++c) want[i * cols + c] = x[i * cols + c] * 2 + r[i * cols + c];
  }
  void* buffers[] = {x.data(), r.data(), x.data(), s.data()};
  run_kernel(k, fn, rows, cols, buffers);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], want[i]) << i;
  for (int64_t i = 0; i < rows; ++i) EXPECT_NEAR(s[i], want_s[i], 1e-5 * cols) << i;
}

TEST(LlvmEmitter, RunsInPlaceOverAnInput) {
  const KernelIR k = parse(R"(kernel inputs=2 outputs=2 space=0 types=f32,f32,f32,f32
%0 = load 0 full
%1 = load 1 full
%2 = reduce_sum %0
%3 = add %0 %0
%4 = add %3 %1
store 2 full %4
store 3 row %2)");
  KernelCache cache("");
  for (int64_t cols : {7, 16, 1000})
    for (bool is_static : {true, false}) run_in_place(k, cache.get(k, cols, is_static).fn, 5, cols);
}

// Same inputs, same bits: on a second call, and with one thread instead of several.
TEST(LlvmEmitter, SameBitsOnEveryCallAndThreadCount) {
  KernelCache cache("");
  const KernelIR k = parse(kCrossEntropy);
  const Case c{.rows = 64, .cols = 1000};
  const auto first = check_kernel(cache, k, c, kArithmetic);
  EXPECT_EQ(check_kernel(cache, k, c, kArithmetic), first);
  tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
  EXPECT_EQ(check_kernel(cache, k, c, kArithmetic), first);
}

TEST(LlvmEmitter, LoopShapeFollowsTheBucket) {
  Target t;
  t.vector_bits = 512;
  auto shape = [&](int64_t lo, int64_t hi) {
    LoopShape s = loop_shape({lo, hi}, t);
    return std::to_string(s.lanes) + "x" + std::to_string(s.unroll);
  };
  EXPECT_EQ(shape(1, 1), "1x1");
  EXPECT_EQ(shape(3, 4), "4x1");
  EXPECT_EQ(shape(7, 7), "4x1");
  EXPECT_EQ(shape(9, 16), "16x1");
  EXPECT_EQ(shape(33, 64), "16x2");
  EXPECT_EQ(shape(65, 128), "16x2");
  t.vector_bits = 256;
  EXPECT_EQ(shape(65, 128), "8x2");
}

// bf16 and f16 buffers: loads widen them exactly, the kernel computes in f32, stores round to
// nearest even. Every pattern with its f32 buffers made 16-bit (but the sums over rows, which stay
// f32) matches the interpreter within one unit in the last place of the 16-bit type: the two
// round the same f32 or double value, which may differ in f32's last bits. Special values (NaN,
// infinities, subnormals, values that overflow 16 bits) go through loads and stores too.
TEST(LlvmEmitter, SixteenBitBuffersLoadWidenedAndStoreRounded) {
  KernelCache cache("");
  for (const auto& [low, ulp] : {std::pair{DType::kBF16, 0x1p-7}, std::pair{DType::kF16, 0x1p-10}})
    for (const char* text : {kBroadcasts, kSoftmax, kRmsNorm, kRmsNormGrad, kCrossEntropy}) {
      KernelIR k = parse(text);
      const std::vector<int> sums = k.summed_stores();
      for (int b = 0; b < k.buffers(); ++b)
        if (k.types[b] == DType::kF32 && std::find(sums.begin(), sums.end(), b) == sums.end())
          k.types[b] = low;
      SCOPED_TRACE(k.str());
      const bool specials = text == kBroadcasts;
      std::vector<Fill> fills(k.inputs, Fill{.specials = specials});
      for (int64_t cols : {1, 7, 17, 64, 131})
        for (int64_t rows : {1, 3, 64})
          check_kernel(cache, k, {rows, cols, false}, {.rtol = ulp, .atol = 1e-3}, fills);
    }
}

// A conversion alone is exact: f32 to bf16 or f16 rounds as base/half.h does (the interpreter's
// rounding), special values included, and back is exact.
TEST(LlvmEmitter, ConversionsRoundAsTheInterpreterBitForBit) {
  KernelCache cache("");
  for (const char* types : {"f32,bf16", "f32,f16", "bf16,f32", "f16,f32"}) {
    const KernelIR k = parse(std::string("kernel inputs=1 outputs=1 space=0 types=") + types +
                             "\n%0 = load 0 full\nstore 1 full %0");
    for (int64_t cols : {1, 17, 64, 1000})
      check_kernel(cache, k, {3, cols, false}, {.rtol = 0, .atol = 0},
                   {Fill{.lo = -70000, .hi = 70000, .specials = true}});
  }
}

// Rounding an f32 value to bf16 or f16 in registers (a 16-bit node inside a fused kernel) is
// base/half.h's rounding, bit for bit, per element, per row and on a scalar (computed in double).
TEST(LlvmEmitter, RoundingsInRegistersAreTheInterpretersBitForBit) {
  KernelCache cache("");
  for (const char* op : {"round_bf16", "round_f16"}) {
    const std::string r = op;
    const KernelIR k = parse(
        "kernel inputs=2 outputs=3 space=0 types=f32,f32,f32,f32,f32\n%0 = load 0 full\n"
        "%1 = load 1 scalar\n%2 = " +
        r + " %0\n%3 = reduce_max %0\n%4 = " + r + " %3\n%5 = " + r +
        " %1\nstore 2 full %2\nstore 3 row %4\nstore 4 scalar %5");
    for (int64_t cols : {1, 17, 64, 1000})
      check_kernel(cache, k, {3, cols, false}, {.rtol = 0, .atol = 0},
                   {Fill{.lo = -70000, .hi = 70000, .specials = true}, Fill{.lo = -3, .hi = 3}});
  }
}

TEST(LlvmEmitter, RefusesMalformedKernels) {
  KernelIR k = parse(kSoftmax);
  llvm::LLVMContext ctx;
  k.code[2].args = {5, 0};  // not an earlier instruction
  EXPECT_THROW(emit_kernel(k, {16, 16}, host_target(), ctx, "k"), InvalidArgument);
}

// A chain of 20,000 element instructions (a fused chain of relus) is emitted on a 256 KiB stack:
// the emitter walks a store's operands with a stack of its own (it recursed once per instruction,
// several MiB here).
TEST(LlvmEmitter, EmitsAChainOfTwentyThousandInstructionsOnASmallStack) {
  std::string text = "kernel inputs=1 outputs=1 space=0 types=f32,f32\n%0 = load 0 full";
  const int n = 20000;
  for (int i = 1; i <= n; ++i)
    text += "\n%" + std::to_string(i) + " = relu %" + std::to_string(i - 1);
  const KernelIR k = parse(text + "\nstore 1 full %" + std::to_string(n));
  size_t instructions = 0;
  disc::testing::on_stack(256 << 10, [&] {
    llvm::LLVMContext ctx;
    std::unique_ptr<llvm::Module> m = emit_kernel(k, {16, 16}, host_target(), ctx, "k");
    for (const llvm::Function& f : *m)
      for (const llvm::BasicBlock& b : f) instructions += b.size();
  });
  EXPECT_GE(instructions, static_cast<size_t>(n));  // every relu is in the code
}

}  // namespace
}  // namespace disc::jit
