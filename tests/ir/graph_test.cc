// Building and editing graphs through the C++ API.
#include "ir/graph.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "ir/text_format.h"
#include "ir/verifier.h"

namespace disc::ir {
namespace {

DimExpr sym(const char* s) {
  return DimExpr::symbol(s);
}

TEST(Graph, BuildInferAndPrint) {
  Graph g("mlp");
  g.shapes().add_symbol({"B", 1, 256, 1, 32});
  Value* x = g.add_argument("x", {DType::kF32, {sym("B"), 784}}, Role::kInput);
  Value* w = g.add_argument("w", {DType::kF32, {784, 10}}, Role::kParameter);
  Value* y = g.add("matmul", {x, w}, {}, "y");
  Value* l = g.add("reduce_mean", {y}, {{"axes", std::vector<int64_t>{0, 1}}}, "loss");
  g.add_output("loss", l);
  EXPECT_EQ(y->type().str(), "f32[B, 10]");
  EXPECT_EQ(l->type().str(), "f32[]");
  EXPECT_EQ(y->role(), Role::kIntermediate);
  EXPECT_EQ(x->users().size(), 1u);
  EXPECT_EQ(y->producer()->op().name, "matmul");
  EXPECT_NO_THROW(verify(g));
  EXPECT_EQ(print_graph(g), R"(graph @mlp {
  sym B in [1, 256] hint 32
  input %x : f32[B, 784]
  param %w : f32[784, 10]
  %y = matmul(%x, %w) : f32[B, 10]
  %loss = reduce_mean(%y) {axes = [0, 1]} : f32[]
  output loss = %loss
}
)");
}

TEST(Graph, ConstantsHaveTheConstantRole) {
  Graph g;
  Value* c = g.add("constant", {}, {{"value", 1.5}});
  EXPECT_EQ(c->role(), Role::kConstant);
  EXPECT_EQ(c->type().str(), "f32[]");
}

TEST(Graph, GeneratedNamesNeverCollide) {
  Graph g;
  g.shapes().add_symbol({"N", 1, 8});
  Value* x = g.add_argument("0", {DType::kF32, {sym("N")}}, Role::kInput);
  Value* a = g.add("exp", {x});
  Value* b = g.add("exp", {x}, {}, "a");
  Value* c = g.add("exp", {x}, {}, "a");
  EXPECT_NE(a->name(), "0");
  EXPECT_EQ(b->name(), "a");
  EXPECT_NE(c->name(), "a");
  EXPECT_NO_THROW(verify(g));
}

TEST(Graph, BadNodesAreRejectedWithTheNodeNamed) {
  Graph g;
  Value* x = g.add_argument("x", {DType::kF32, {4}}, Role::kInput);
  try {
    g.add_node("transpose", {x}, {{"perm", std::vector<int64_t>{1}}}, {"t"});
    ADD_FAILURE();
  } catch (const VerifyError& e) {
    EXPECT_STREQ(e.what(), "node %t = transpose: `perm` must be a permutation of 0..0");
  }
  EXPECT_EQ(g.find_value("t"), nullptr);  // nothing was added
  EXPECT_EQ(g.num_nodes(), 0u);
  EXPECT_THROW(g.add_argument("y", {DType::kF32, {sym("Q")}}, Role::kInput), VerifyError);
  EXPECT_THROW(g.add_argument("z", {DType::kF32, {4}}, Role::kIntermediate), InvalidArgument);
  EXPECT_THROW(g.add("nope", {x}), InvalidArgument);
}

TEST(Graph, ReplaceUsesAndErase) {
  Graph g;
  Value* x = g.add_argument("x", {DType::kF32, {4}}, Role::kInput);
  Value* a = g.add("exp", {x}, {}, "a");
  Value* c = g.add("log", {x}, {}, "c");
  Value* b = g.add("add", {a, a}, {}, "b");
  g.add_output("out", b);
  g.replace_all_uses(a, c);
  EXPECT_TRUE(a->users().empty());
  EXPECT_EQ(c->users().size(), 2u);
  EXPECT_THROW(g.erase_nodes([](const Node& n) { return n.op().name == "log"; }), VerifyError);
  g.erase_nodes([](const Node& n) { return n.op().name == "exp"; });
  EXPECT_EQ(g.num_nodes(), 2u);
  EXPECT_EQ(g.find_value("a"), nullptr);
  EXPECT_TRUE(x->users().size() == 1u && x->users()[0]->op().name == "log");
  EXPECT_NO_THROW(verify(g));
}

TEST(Graph, OutputsFollowReplacementsAndDrops) {
  Graph g;
  Value* x = g.add_argument("x", {DType::kF32, {4}}, Role::kInput);
  Value* w = g.add_argument("w", {DType::kF32, {4}}, Role::kParameter);
  Value* a = g.add("exp", {x}, {}, "a");
  Value* b = g.add("log", {x}, {}, "b");
  g.add_output("a", a);
  g.add_output("again", a);
  g.add_update(w, b);
  EXPECT_TRUE(g.is_output(a) && g.is_output(b) && !g.is_output(x));
  g.keep_outputs([](const std::string& name) { return name != "again"; });
  EXPECT_TRUE(g.is_output(a));  // still output `a`
  g.replace_all_uses(a, b);
  EXPECT_FALSE(g.is_output(a));
  EXPECT_TRUE(g.is_output(b));
  g.keep_outputs([](const std::string&) { return false; });
  EXPECT_TRUE(g.is_output(b));  // the update still names it
}

TEST(Graph, ReorderKeepsEveryProducerFirstOrChangesNothing) {
  Graph g;
  Value* x = g.add_argument("x", {DType::kF32, {4}}, Role::kInput);
  Value* a = g.add("exp", {x}, {}, "a");
  Value* b = g.add("log", {x}, {}, "b");
  Value* c = g.add("add", {a, b}, {}, "c");
  const std::vector<Node*> before = g.nodes();
  EXPECT_THROW(g.reorder({c->producer(), a->producer(), b->producer()}), VerifyError);
  EXPECT_THROW(g.reorder({a->producer(), a->producer(), c->producer()}), VerifyError);
  EXPECT_THROW(g.reorder({a->producer(), b->producer()}), VerifyError);
  EXPECT_EQ(g.nodes(), before);
  g.reorder({b->producer(), a->producer(), c->producer()});
  EXPECT_EQ(g.nodes(), (std::vector<Node*>{b->producer(), a->producer(), c->producer()}));
  EXPECT_NO_THROW(verify(g));
}

TEST(Verifier, CatchesWhatTheApiCannotPrevent) {
  auto g = parse_graph(R"(graph @g {
  sym B in [1, 8]
  input %x : f32[B, 4]
  %y = exp(%x) : f32[B, 4]
  output y = %y
})");
  // A pass that rewrote a type without re-inferring would leave this behind.
  g->set_type(g->find_value("y"), {DType::kF32, {sym("B"), 5}});
  try {
    verify(*g);
    ADD_FAILURE();
  } catch (const VerifyError& e) {
    EXPECT_STREQ(e.what(),
                 "<input>:4:3: node %y = exp: result %y has type f32[B, 5] but the op "
                 "gives f32[B, 4]");
  }
}

}  // namespace
}  // namespace disc::ir
