// Graphs as deep as a hostile file makes them: a chain of thousands of relus compiles on a thread
// with a small stack. A pass or planner that recursed once per chained node overflows it
// (BackwardRecomputePass::copy_before did: a 30,000-relu ONNX file crashed disc-train, SIGSEGV).
// The CPU kernel emitter's walk is tested alike in tests/jit/llvm_emitter_test.cc.
#include <gtest/gtest.h>

#include "engine/pipeline.h"
#include "ir/models/model.h"
#include "tests/base/on_stack.h"

namespace disc::engine {
namespace {

// An mlp whose hidden layer is followed by `depth` relus, one after the other.
ir::models::Model relu_chain(int depth) {
  ir::models::MlpConfig c;
  c.in = 6, c.classes = 3, c.hidden = {8}, c.max_batch = 4;
  ir::models::Model m;
  m.graph = std::make_unique<ir::Graph>("chain");
  ir::Graph& g = *m.graph;
  g.shapes().add_symbol({"B", 1, c.max_batch, 1, std::nullopt});
  const ir::DimExpr B = ir::DimExpr::symbol("B");
  ir::Value* x = g.add_argument("x", {DType::kF32, {B, c.in}}, ir::Role::kInput);
  ir::Value* labels = g.add_argument("labels", {DType::kI32, {B}}, ir::Role::kInput);
  ir::Value* w = ir::models::add_param(m, "w", {c.in, c.hidden[0]}, {});
  ir::Value* head = ir::models::add_param(m, "head", {c.hidden[0], c.classes}, {});
  ir::Value* h = g.add("matmul", {x, w});
  for (int i = 0; i < depth; ++i) h = g.add("relu", {h});
  ir::Value* logits = g.add("matmul", {h, head});
  m.loss = ir::nn::cross_entropy(g, logits, labels);
  g.add_output("logits", logits);
  return m;
}

constexpr int kDepth = 12000;

// Every stage on 12,000 chained relus (autodiff, backward recompute, fusion, schedule) in 256 KiB
// of stack: one frame per node would need several MiB.
TEST(DeepGraph, AChainOfTwelveThousandReluCompilesOnASmallStack) {
  disc::testing::on_stack(256 << 10, [] {
    TrainerOptions o;
    o.jit = true;
    Pipeline p(o);
    CompiledStep step = p.run(relu_chain(kDepth));
    ASSERT_TRUE(step.fused);
    int relus = 0;
    for (const ir::Node* n : step.model.graph->nodes()) relus += n->op().name == "relu";
    EXPECT_GE(relus, kDepth);  // the chain is all there before fusion
  });
}

}  // namespace
}  // namespace disc::engine
