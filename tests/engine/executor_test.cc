// The executor: symbol binding and its errors, library GEMM against the reference kernel,
// memory freed after last use, updates applied to arguments.
#include "engine/executor.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "devices/device.h"
#include "ir/binding.h"
#include "ir/op_registry.h"
#include "ir/text_format.h"

namespace disc::engine {
namespace {

class ExecutorTest : public ::testing::Test {
 protected:
  std::unique_ptr<devices::Device> dev = devices::make_cpu_device(2);
  memory::DeviceAllocator alloc{*dev};

  Tensor random(DType t, std::vector<int64_t> shape, uint64_t seed = 1) {
    Tensor x = Tensor::empty(t, std::move(shape), alloc);
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> n;
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (t == DType::kF32)
        x.data<float>()[i] = static_cast<float>(n(rng));
      else
        x.data<double>()[i] = n(rng);
    }
    return x;
  }
};

// Shared weights (plain and transposed), a batched product, and a weight gradient that sums
// over the batch (sum_batch): each goes down a different path to the library GEMM.
const char* kMatmul = R"(graph @g {
  sym B in [1, 64]
  sym S in [1, 128]
  input %x : f32[B, S, 24]
  param %w : f32[24, 13]
  %y = matmul(%x, %w) : f32[B, S, 13]
  %z = matmul(%y, %y) {transpose_b = true} : f32[B, S, S]
  %u = matmul(%x, %y) {sum_batch = true, transpose_a = true} : f32[24, 13]
  %v = matmul(%y, %w) {transpose_b = true} : f32[B, S, 24]
  output z = %z
  output u = %u
  output v = %v
}
)";

// Runs `g` on `args` through the executor and node by node through the reference kernels, and
// compares every output.
void expect_reference_results(const ir::Graph& g, std::map<std::string, Tensor> args,
                              const ir::Bindings& bind, memory::Allocator& alloc) {
  Executor ex(g, alloc);
  auto out = ex.run(args);
  std::map<const ir::Value*, Tensor> env;
  for (const auto& [name, t] : args) env.emplace(g.find_value(name), t);
  for (const ir::Node* n : g.nodes()) {
    Tensor r = Tensor::empty(DType::kF32, ir::concrete_shape(g, *n->result(0), bind), alloc);
    std::vector<ir::TensorRef> in;
    for (const ir::Value* o : n->operands()) in.push_back(env.at(o).ref());
    n->op().reference({n->op().name, in, {r.ref()}, &n->attrs(), nullptr});
    env.emplace(n->result(0), r);
  }
  for (const auto& [name, v] : g.outputs()) {
    const Tensor& want = env.at(v);
    ASSERT_EQ(out[name].shape(), want.shape()) << name;
    for (int64_t i = 0; i < want.numel(); ++i) {
      EXPECT_NEAR(out[name].data<float>()[i], want.data<float>()[i],
                  1e-4 * (1 + std::abs(want.data<float>()[i])))
          << name << "[" << i << "] at B=" << bind.at("B") << ", S=" << bind.at("S");
    }
  }
}

TEST_F(ExecutorTest, LibraryGemmMatchesTheReferenceKernel) {
  auto g = ir::parse_graph(kMatmul);
  for (auto [b, s] : {std::pair{1, 1}, {2, 7}, {3, 31}}) {
    expect_reference_results(
        *g, {{"x", random(DType::kF32, {b, s, 24})}, {"w", random(DType::kF32, {24, 13}, 2)}},
        {{"B", b}, {"S", s}}, alloc);
  }
}

// Products with tril_a: %l is lower triangular (the block GEMMs), %p is not (a copy of its lower
// triangle), %w is a B shared by the batch; lengths span one to three 64-row blocks.
TEST_F(ExecutorTest, TriangularProductsMatchTheReferenceKernel) {
  auto g = ir::parse_graph(R"(graph @g {
  sym B in [1, 8]
  sym S in [1, 256]
  input %p : f32[B, S, S]
  input %y : f32[B, S, 13]
  input %w : f32[S, 5]
  %l = causal_mask(%p) {value = 0.0} : f32[B, S, S]
  %t1 = matmul(%l, %y) {tril_a = true} : f32[B, S, 13]
  %t2 = matmul(%l, %y) {transpose_a = true, tril_a = true} : f32[B, S, 13]
  %t3 = matmul(%p, %y) {transpose_a = true, tril_a = true} : f32[B, S, 13]
  %t4 = matmul(%l, %w) {tril_a = true} : f32[B, S, 5]
  output t1 = %t1
  output t2 = %t2
  output t3 = %t3
  output t4 = %t4
}
)");
  for (auto [b, s] : {std::pair{1, 1}, {2, 7}, {3, 64}, {2, 150}}) {
    expect_reference_results(*g,
                             {{"p", random(DType::kF32, {b, s, s})},
                              {"y", random(DType::kF32, {b, s, 13}, 2)},
                              {"w", random(DType::kF32, {s, 5}, 3)}},
                             {{"B", b}, {"S", s}}, alloc);
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
  Tensor w = random(DType::kF32, {24, 13});
  expect_error({{"x", random(DType::kF32, {2, 200, 24})}, {"w", w}},
               "input `x` dim 1 is 200, so S = 200, outside S's range [1, 128]: raise the bound in "
               "the graph or cut the batch");
  expect_error(
      {{"x", random(DType::kF32, {2, 5, 23})}, {"w", w}},
      "input `x` has shape [2, 5, 23], but f32[B, S, 24] is [2, 5, 24] for these symbol values");
  expect_error({{"x", random(DType::kF64, {2, 5, 24})}, {"w", w}},
               "input `x` is f64, the graph wants f32");
  expect_error({{"w", w}}, "no tensor given for input `x` (f32[B, S, 24])");
  expect_error({{"x", random(DType::kF32, {2, 5})}, {"w", w}},
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
  std::map<std::string, Tensor> ok = {{"a", random(DType::kF32, {2, 8})},
                                      {"b", random(DType::kF32, {2, 8})}};
  EXPECT_NO_THROW(ex.run(ok));
  std::map<std::string, Tensor> unequal = {{"a", random(DType::kF32, {2, 8})},
                                           {"b", random(DType::kF32, {2, 12})}};
  EXPECT_THROW(ex.run(unequal), ShapeError);
  std::map<std::string, Tensor> odd = {{"a", random(DType::kF32, {2, 6})},
                                       {"b", random(DType::kF32, {2, 6})}};
  try {
    ex.run(odd);
    ADD_FAILURE();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of 4"), std::string::npos) << e.what();
  }
}

// A graph over `sym N in [1, 100000]` whose 8 nodes form a chain: %xi = node(%x(i-1)), from the
// declarations `decls` (which declare %x0) to `output y = %x8`.
std::unique_ptr<ir::Graph> chain_graph(const std::string& decls,
                                       const std::function<std::string(const std::string&)>& node) {
  std::string text = "graph @g {\n  sym N in [1, 100000]\n  " + decls + "\n";
  for (int i = 1; i <= 8; ++i)
    text += "  %x" + std::to_string(i) + " = " + node("%x" + std::to_string(i - 1)) + "\n";
  return ir::parse_graph(text + "  output y = %x8\n}\n");
}

TEST_F(ExecutorTest, ValuesAreFreedAfterTheirLastUse) {
  // A chain of 8 products [N, 4] x [4, 4] (a matmul never runs in place): at most the argument,
  // the weight, one live value and the one being written are held at once, not all 9.
  auto g = chain_graph("input %x0 : f32[N, 4]\n  param %w : f32[4, 4]",
                       [](const std::string& x) { return "matmul(" + x + ", %w) : f32[N, 4]"; });
  Executor ex(*g, alloc);
  std::map<std::string, Tensor> args = {{"x0", random(DType::kF32, {1024, 4})},
                                        {"w", random(DType::kF32, {4, 4}, 2)}};
  StepStats stats;
  ex.run(args, &stats);
  EXPECT_EQ(stats.live_peak_bytes, 3 * 16384 + 64);
  EXPECT_EQ(stats.allocations, 8);
  EXPECT_EQ(stats.bindings.at("N"), 1024);
}

TEST_F(ExecutorTest, ElementwiseChainsRunInPlace) {
  // 8 tanhs over [N] f32, each over a value that dies there: after the first, each writes over its
  // operand, so one allocation holds the chain (the argument is never overwritten).
  auto g = chain_graph("input %x0 : f32[N]",
                       [](const std::string& x) { return "tanh(" + x + ") : f32[N]"; });
  Executor ex(*g, alloc);
  std::map<std::string, Tensor> args = {{"x0", random(DType::kF32, {1024})}};
  const std::vector<float> x0 = args["x0"].to_vector<float>();
  StepStats stats;
  auto out = ex.run(args, &stats);
  EXPECT_EQ(stats.live_peak_bytes, 2 * 4096);
  EXPECT_EQ(stats.allocations, 1);
  EXPECT_EQ(args["x0"].to_vector<float>(), x0);
  for (int64_t i = 0; i < 1024; ++i) {
    float want = x0[i];
    for (int k = 0; k < 8; ++k)
      want = std::tanh(want);  // what the reference kernel computes, element by element
    EXPECT_EQ(out["y"].data<float>()[i], want) << i;
  }
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
  std::map<std::string, Tensor> args = {{"table", random(DType::kF32, {4, 2})},
                                        {"ids", Tensor::from<int32_t>({2}, {1, 7}, alloc)}};
  try {
    ex.run(args);
    ADD_FAILURE();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "<input>:5:3: node %e = gather: gather: index 7 at position 1 is outside "
                 "[0, 4); check the token ids against the vocabulary size");
  }
}

}  // namespace
}  // namespace disc::engine
