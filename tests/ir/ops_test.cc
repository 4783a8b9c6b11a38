// Shape inference and verification of every op in the registry.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "base/error.h"
#include "ir/op_registry.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "op_cases.h"

namespace disc::ir {
namespace {

using testing::case_graph;

const Node& result_node(const Graph& g) {
  return *g.find_value("r")->producer();
}

TEST(Ops, ValidUsesInferTheExpectedType) {
  for (const auto& c : testing::valid_cases()) {
    SCOPED_TRACE(c.node);
    std::unique_ptr<Graph> g;
    ASSERT_NO_THROW(g = parse_graph(case_graph(c.node, c.type), "<case>"));
    const Node& n = result_node(*g);
    EXPECT_EQ(n.op().name, c.op);
    std::vector<const TensorType*> in;
    for (const Value* v : n.operands()) in.push_back(&v->type());
    ShapeGraph shapes = g->shapes();
    std::string inferred;
    for (const auto& t : infer_types(n.op(), in, n.attrs(), shapes)) {
      inferred += (inferred.empty() ? "" : ", ") + t.str();
    }
    EXPECT_EQ(inferred, c.type);
    EXPECT_NO_THROW(verify(*g));
  }
}

TEST(Ops, ValidUsesRejectAWrongDeclaredType) {
  for (const auto& c : testing::valid_cases()) {
    SCOPED_TRACE(c.node);
    // Same shape, other dtype (of the first result): the declared type no longer matches.
    std::string other = c.type.rfind("f64", 0) == 0 ? "f32" + c.type.substr(3)
                                                    : "f64" + c.type.substr(c.type.find('['));
    std::string first = other.substr(0, other.find(']') + 1);
    try {
      parse_graph(case_graph(c.node, other), "<case>");
      ADD_FAILURE() << "accepted result type " << other;
    } catch (const VerifyError& e) {
      EXPECT_NE(std::string(e.what()).find("is declared " + first), std::string::npos) << e.what();
    }
  }
}

TEST(Ops, InvalidUsesFailWithTheirMessageAndLocation) {
  // The node sits on the line after the preamble.
  std::string preamble = testing::kCasePreamble;
  std::string at =
      "<case>:" + std::to_string(std::count(preamble.begin(), preamble.end(), '\n') + 1) + ":";
  for (const auto& c : testing::invalid_cases()) {
    SCOPED_TRACE(c.node);
    try {
      parse_graph(case_graph(c.node, "f32[]"), "<case>");
      ADD_FAILURE() << "accepted " << c.node;
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(c.error), std::string::npos) << msg;
      EXPECT_EQ(msg.rfind(at, 0), 0u) << "no location in: " << msg;
    }
  }
}

TEST(Ops, EveryRegisteredOpHasValidAndInvalidCases) {
  std::set<std::string> valid, invalid;
  for (const auto& c : testing::valid_cases()) valid.insert(c.op);
  for (const auto& c : testing::invalid_cases()) invalid.insert(c.op);
  for (const OpDef* op : OpRegistry::instance().all()) {
    EXPECT_TRUE(valid.contains(op->name)) << op->name << " has no valid case in op_cases.cc";
    EXPECT_TRUE(invalid.contains(op->name)) << op->name << " has no invalid case in op_cases.cc";
    EXPECT_FALSE(op->summary.empty()) << op->name;
  }
  for (const auto& name : valid) EXPECT_NE(OpRegistry::instance().find(name), nullptr) << name;
}

TEST(Ops, EveryOpHasAReferenceKernel) {
  for (const OpDef* op : OpRegistry::instance().all()) {
    EXPECT_TRUE(static_cast<bool>(op->reference)) << op->name << " has no reference kernel";
  }
}

TEST(Ops, UnknownOpSuggestsTheNearest) {
  try {
    OpRegistry::instance().get("sofmax");
    ADD_FAILURE();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "unknown op `sofmax` (did you mean `softmax`?)");
  }
}

TEST(Ops, ElementwiseEqualitiesFeedTheShapeGraph) {
  auto g = parse_graph(R"(graph @g {
  sym B in [1, 64]
  sym B2 in [1, 32]
  input %a : f32[B, 8]
  input %b : f32[B2, 8]
  %c = add(%a, %b) : f32[B, 8]
  output c = %c
})");
  EXPECT_EQ(g->shapes().canonical(DimExpr::symbol("B2")).str(), "B");
  EXPECT_EQ(g->shapes().find("B")->hi, 32);  // B2's range narrows B's
}

TEST(Ops, CostsAreSymbolic) {
  auto g = parse_graph(case_graph("matmul(%x, %w)", "f32[B, S, 16]"));
  const Node& n = result_node(*g);
  std::vector<TensorType> in = {n.operand(0)->type(), n.operand(1)->type()};
  OpCost c = n.op().cost_of(in, {n.result()->type()}, n.attrs());
  EXPECT_EQ(c.flops.str(), "256*B*S");       // 2 * (B*S*16 outputs) * K=8
  EXPECT_EQ(c.bytes.str(), "96*B*S + 512");  // 4 bytes * (8BS + 128 + 16BS)

  auto e = parse_graph(case_graph("add(%x, %y)", "f32[B, S, 8]"));
  const Node& add = result_node(*e);
  OpCost ca = add.op().cost_of({add.operand(0)->type(), add.operand(1)->type()},
                               {add.result()->type()}, add.attrs());
  EXPECT_EQ(ca.flops.str(), "8*B*S");
  EXPECT_EQ(ca.bytes.str(), "96*B*S");
}

}  // namespace
}  // namespace disc::ir
