// Which nodes the fusion planner puts in one kernel, where that choice is made for memory: a
// normalization joins the residual add that feeds it only when nothing else reads the sum.
#include "jit/fusion/fusion.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "ir/text_format.h"
#include "tests/jit/pattern_kernels.h"

namespace disc::jit {
namespace {

// x + h, normalized; `tail` may read the sum again (the next residual add of a transformer).
std::unique_ptr<ir::Graph> residual_norm(const std::string& norm, const std::string& tail) {
  return ir::parse_graph(R"(graph @g {
  sym R in [1, 300]
  input %x : f32[R, 64]
  input %h : f32[R, 64]
  input %w : f32[64]
  input %b : f32[64]
  %sum = add(%x, %h) : f32[R, 64]
  %n = )" + norm + R"( : f32[R, 64]
  output n = %n
)" + tail + "}\n");
}

const char* const kRms = "rms_norm(%sum, %w) {eps = 1e-05}";
const char* const kLayer = "layer_norm(%sum, %w, %b) {eps = 1e-05}";
const char* const kNextAdd = "  %next = add(%sum, %x) : f32[R, 64]\n  output next = %next\n";

TEST(FusionPlan, ANormFusesWithTheAddWhoseSumOnlyItReads) {
  for (const char* norm : {kRms, kLayer}) {
    const FusionPlan plan = plan_fusion(*residual_norm(norm, ""));
    ASSERT_EQ(plan.groups.size(), 1u) << norm << "\n" << plan.str();
    EXPECT_EQ(plan.groups[0].nodes.size(), 2u) << plan.str();
  }
}

// Under a memory cap the norm's result is evicted and recomputed; in one kernel with the add, the
// recompute would rerun the add, whose operands (a GEMM's result in a transformer) are gone.
TEST(FusionPlan, ANormWhoseInputOthersReadTooGetsAKernelOfItsOwn) {
  for (const char* norm : {kRms, kLayer}) {
    auto g = residual_norm(norm, kNextAdd);
    const FusionPlan plan = plan_fusion(*g);
    ASSERT_EQ(plan.groups.size(), 2u) << norm << "\n" << plan.str();  // the adds, and the norm
    const FusionGroup& adds = plan.groups[0];
    const FusionGroup& alone = plan.groups[1];
    EXPECT_EQ(adds.nodes.size(), 2u) << plan.str();
    ASSERT_EQ(alone.nodes.size(), 1u) << plan.str();
    EXPECT_TRUE(alone.nodes[0]->op().name.ends_with("norm")) << plan.str();
    EXPECT_TRUE(std::any_of(alone.inputs.begin(), alone.inputs.end(), [](const ir::Value* v) {
      return v->name() == "sum";
    })) << plan.str();
  }
}

// SwiGLU on bf16 operands with an f32 residual: each bf16 value the kernel makes is rounded where
// it is made, as its node alone would store it (so that a recompute or another grouping gives the
// same bits); loads of bf16 buffers and f32 values are not rounded.
TEST(FusionPlan, EachSixteenBitValueIsRoundedWhereTheKernelMakesIt) {
  auto g = ir::parse_graph(kBf16SwiGluGraph);
  const FusionPlan plan = plan_fusion(*g);
  ASSERT_EQ(plan.groups.size(), 1u) << plan.str();
  EXPECT_EQ(plan.groups[0].kernel.str(),
            "kernel inputs=3 outputs=2 space=0 types=bf16,bf16,f32,f32,f16\n"
            "%0 = load 0 full\n%1 = silu %0\n%2 = round_bf16 %1\n%3 = load 1 full\n"
            "%4 = mul %2 %3\n%5 = round_bf16 %4\n%6 = load 2 full\n%7 = add %6 %5\n"
            "%8 = round_f16 %7\nstore 3 full %7\nstore 4 full %8");
}

// A chain of n elementwise nodes over one space: add, mul, tanh, sub in turn, each also reading x.
std::unique_ptr<ir::Graph> chain(int n) {
  std::string text = "graph @chain {\n  sym B in [1, 64]\n  input %x : f32[B, 32]\n";
  const char* ops[] = {"add", "mul", "tanh", "sub"};
  std::string prev = "%x";
  for (int i = 0; i < n; ++i) {
    const std::string v = "%v" + std::to_string(i), op = ops[i % 4];
    text += "  " + v + " = " + op + "(" + prev + (op == "tanh" ? "" : ", %x") + ") : f32[B, 32]\n";
    prev = v;
  }
  return ir::parse_graph(text + "  output y = " + prev + "\n}\n");
}

// The planner's work grows with the graph, not with the square of a group's size: each node of a
// chain is lowered about once as its group grows (lowering the whole group again for each node
// joining it was n^2 / 2 nodes: 2 million here), and once more for the final kernel.
TEST(FusionPlan, ALongChainIsOneKernelLoweredInWorkLinearInItsLength) {
  const int n = 2000;
  auto g = chain(n);
  const FusionPlan plan = plan_fusion(*g);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].nodes.size(), static_cast<size_t>(n));
  EXPECT_EQ(plan.groups[0].outputs.size(), 1u);
  EXPECT_LE(plan.lowered, 3 * n) << "the planner lowered " << plan.lowered << " nodes";
}

// A chain of selects, each taking its compare in with it (a relu's gradient): each pair appends
// to the group without a check of the whole group (a full check each time was n^2: 4 million
// nodes here), and the group stops at max_nodes, so kernels stay small enough to compile.
TEST(FusionPlan, GroupsStopAtTheirBound) {
  const int n = 2000;
  std::string text = "graph @chain {\n  sym B in [1, 64]\n  input %x : f32[B, 32]\n";
  std::string prev = "%x";
  for (int i = 0; i < n / 2; ++i) {
    const std::string c = "%c" + std::to_string(i), v = "%v" + std::to_string(i);
    text += "  " + c + " = gt(" + prev + ", %x) : bool[B, 32]\n";
    text += "  " + v + " = select(" + c + ", " + prev + ", %x) : f32[B, 32]\n";
    prev = v;
  }
  auto g = ir::parse_graph(text + "  output y = " + prev + "\n}\n");
  FusionOptions options;
  options.max_nodes = 64;
  const FusionPlan plan = plan_fusion(*g, options);
  size_t grouped = 0;
  for (const FusionGroup& group : plan.groups) {
    EXPECT_LE(group.nodes.size(), 64u);
    grouped += group.nodes.size();
  }
  EXPECT_EQ(grouped, static_cast<size_t>(n));
  EXPECT_GE(plan.groups.size(), static_cast<size_t>(n / 64));
  EXPECT_LE(plan.lowered, 4 * 64 * n) << "the planner lowered " << plan.lowered << " nodes";
}

}  // namespace
}  // namespace disc::jit
