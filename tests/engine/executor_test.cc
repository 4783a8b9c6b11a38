// The executor: symbol binding and its errors, library GEMM against the reference kernel,
// memory freed after last use, updates applied to arguments.
#include "engine/executor.h"

#include <gtest/gtest.h>

#include <random>

#include "devices/device.h"
#include "ir/op_registry.h"
#include "ir/text_format.h"

namespace disc::engine {
namespace {

class ExecutorTest : public ::testing::Test {
 protected:
  std::unique_ptr<devices::Device> dev = devices::make_cpu_device(2);
  memory::DeviceAllocator alloc{*dev};

  Tensor random(ir::DType t, std::vector<int64_t> shape, uint64_t seed = 1) {
    Tensor x = Tensor::empty(t, std::move(shape), alloc);
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> n;
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (t == ir::DType::kF32) x.data<float>()[i] = static_cast<float>(n(rng));
      else x.data<double>()[i] = n(rng);
    }
    return x;
  }
};

const char* kMatmul = R"(graph @g {
  sym B in [1, 64]
  sym S in [1, 128]
  input %x : f32[B, S, 24]
  param %w : f32[24, 13]
  %y = matmul(%x, %w) : f32[B, S, 13]
  %z = matmul(%y, %y) {transpose_b = true} : f32[B, S, S]
  output z = %z
}
)";

TEST_F(ExecutorTest, LibraryGemmMatchesTheReferenceKernel) {
  auto g = ir::parse_graph(kMatmul);
  Executor ex(*g, alloc);
  for (auto [b, s] : {std::pair{1, 1}, {2, 7}, {3, 31}}) {
    std::map<std::string, Tensor> args = {{"x", random(ir::DType::kF32, {b, s, 24})},
                                          {"w", random(ir::DType::kF32, {24, 13}, 2)}};
    auto out = ex.run(args);
    // The same products through the reference kernel, node by node.
    const auto& ref = ir::OpRegistry::instance().get("matmul").reference;
    Tensor y = Tensor::empty(ir::DType::kF32, {b, s, 13}, alloc), z = Tensor::empty(ir::DType::kF32, {b, s, s}, alloc);
    auto nodes = g->nodes();
    ref({"matmul", {args["x"].ref(), args["w"].ref()}, {y.ref()}, &nodes[0]->attrs(), nullptr});
    ref({"matmul", {y.ref(), y.ref()}, {z.ref()}, &nodes[1]->attrs(), nullptr});
    ASSERT_EQ(out["z"].shape(), (std::vector<int64_t>{b, s, s}));
    for (int64_t i = 0; i < z.numel(); ++i) {
      EXPECT_NEAR(out["z"].data<float>()[i], z.data<float>()[i], 1e-4 * (1 + std::abs(z.data<float>()[i])));
    }
  }
}

TEST_F(ExecutorTest, BadInputsAreRefusedNamingInputSymbolAndBound) {
  auto g = ir::parse_graph(kMatmul);
  Executor ex(*g, alloc);
  auto expect_error = [&](std::map<std::string, Tensor> args, const std::string& msg) {
    try {
      ex.run(args);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), msg);
    }
  };
  Tensor w = random(ir::DType::kF32, {24, 13});
  expect_error({{"x", random(ir::DType::kF32, {2, 200, 24})}, {"w", w}},
               "input `x` dim 1 is 200, so S = 200, outside S's range [1, 128]: raise the bound in the graph or cut the batch");
  expect_error({{"x", random(ir::DType::kF32, {2, 5, 23})}, {"w", w}},
               "input `x` has shape [2, 5, 23], but f32[B, S, 24] is [2, 5, 24] for these symbol values");
  expect_error({{"x", random(ir::DType::kF64, {2, 5, 24})}, {"w", w}}, "input `x` is f64, the graph wants f32");
  expect_error({{"w", w}}, "no tensor given for input `x` (f32[B, S, 24])");
  expect_error({{"x", random(ir::DType::kF32, {2, 5})}, {"w", w}},
               "input `x` has shape [2, 5], the graph wants f32[B, S, 24]");
}

TEST_F(ExecutorTest, EqualitiesAndMultiplesAreChecked) {
  auto g = ir::parse_graph(R"(graph @g {
  sym B in [1, 64]
  sym S in [1, 128] multiple_of 4
  sym T in [1, 128]
  input %a : f32[B, S]
  input %b : f32[B, T]
  %c = add(%a, %b) : f32[B, S]
  output c = %c
}
)");
  Executor ex(*g, alloc);
  std::map<std::string, Tensor> ok = {{"a", random(ir::DType::kF32, {2, 8})}, {"b", random(ir::DType::kF32, {2, 8})}};
  EXPECT_NO_THROW(ex.run(ok));
  std::map<std::string, Tensor> unequal = {{"a", random(ir::DType::kF32, {2, 8})}, {"b", random(ir::DType::kF32, {2, 12})}};
  EXPECT_THROW(ex.run(unequal), ShapeError);
  std::map<std::string, Tensor> odd = {{"a", random(ir::DType::kF32, {2, 6})}, {"b", random(ir::DType::kF32, {2, 6})}};
  try {
    ex.run(odd);
    ADD_FAILURE();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of 4"), std::string::npos) << e.what();
  }
}

TEST_F(ExecutorTest, ValuesAreFreedAfterTheirLastUse) {
  // A chain of 8 elementwise ops over [N] f32: at most the argument, one live value and the one
  // being written are held at once (3 * 4N bytes), not all 9.
  std::string text = "graph @g {\n  sym N in [1, 100000]\n  input %x0 : f32[N]\n";
  for (int i = 1; i <= 8; ++i) {
    text += "  %x" + std::to_string(i) + " = exp(%x" + std::to_string(i - 1) + ") : f32[N]\n";
  }
  text += "  output y = %x8\n}\n";
  auto g = ir::parse_graph(text);
  Executor ex(*g, alloc);
  std::map<std::string, Tensor> args = {{"x0", random(ir::DType::kF32, {1024})}};
  for (int64_t i = 0; i < 1024; ++i) args["x0"].data<float>()[i] *= 0.01f;
  StepStats stats;
  ex.run(args, &stats);
  EXPECT_EQ(stats.live_peak_bytes, 3 * 4096);
  EXPECT_EQ(stats.allocations, 8);
  EXPECT_EQ(stats.bindings.at("N"), 1024);
}

TEST_F(ExecutorTest, UpdatesAreWrittenIntoTheArguments) {
  auto g = ir::parse_graph(R"(graph @g {
  param %w : f32[3]
  %w.new = neg(%w) : f32[3]
  update %w = %w.new
}
)");
  Executor ex(*g, alloc);
  std::map<std::string, Tensor> args = {{"w", Tensor::from<float>({3}, {1, 2, 3}, alloc)}};
  Tensor same = args["w"];
  ex.run(args);
  EXPECT_EQ(same.to_vector<float>(), (std::vector<float>{-1, -2, -3}));
}

TEST_F(ExecutorTest, KernelErrorsNameTheNode) {
  auto g = ir::parse_graph(R"(graph @g {
  sym N in [1, 10]
  param %table : f32[4, 2]
  input %ids : i32[N]
  %e = gather(%table, %ids) : f32[N, 2]
  output e = %e
}
)");
  Executor ex(*g, alloc);
  std::map<std::string, Tensor> args = {{"table", random(ir::DType::kF32, {4, 2})},
                                        {"ids", Tensor::from<int32_t>({2}, {1, 7}, alloc)}};
  try {
    ex.run(args);
    ADD_FAILURE();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "<input>:5:3: node %e = gather: gather: index 7 at position 1 is outside "
                           "[0, 4); check the token ids against the vocabulary size");
  }
}

}  // namespace
}  // namespace disc::engine
