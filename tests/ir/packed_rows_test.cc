// pack_one_row: a graph over rows [1, S] takes a packed step in its row. Attention written as
// primitives becomes one attention op reading the offsets, an index along the row (learned
// position embeddings) becomes the positions; what could still mix two examples is refused,
// naming the node.
#include "ir/models/packed_rows.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "ir/text_format.h"

namespace disc::ir::models {
namespace {

// A one-layer model over rows: token and learned position embeddings, causal self-attention
// written as exporters write it. `batch` is B's bound; `extra` adds lines before the output.
std::unique_ptr<Graph> row_model(int batch = 1, const std::string& extra = "",
                                 const std::string& output = "%o") {
  return parse_graph(R"(graph @g {
  sym B in [1, )" + std::to_string(batch) +
                     R"(]
  sym S in [1, 64]
  input %tokens : i32[B, S]
  param %embed : f32[16, 8]
  param %wpe : f32[64, 8]
  %x = gather(%embed, %tokens) : f32[B, S, 8]
  %i = iota() {shape = [S], dtype = i32} : i32[S]
  %pe = gather(%wpe, %i) : f32[S, 8]
  %peb = broadcast(%pe) {dims = [1, 2], shape = [B, S, 8]} : f32[B, S, 8]
  %h = add(%x, %peb) : f32[B, S, 8]
  %s = matmul(%h, %h) {transpose_b = true} : f32[B, S, S]
  %m = causal_mask(%s) : f32[B, S, S]
  %p = softmax(%m) : f32[B, S, S]
  %o = matmul(%p, %h) : f32[B, S, 8]
)" + extra +
                     "  output o = " + output + "\n}\n");
}

std::vector<const Node*> nodes_of(const Graph& g, const std::string& op) {
  std::vector<const Node*> out;
  for (const Node* n : g.nodes())
    if (n->op().name == op) out.push_back(n);
  return out;
}

TEST(PackedRows, AttentionReadsTheOffsetsAndTheRowIndexBecomesThePositions) {
  auto g = row_model();
  const nn::Packing p = pack_one_row(*g, 8);
  EXPECT_EQ(p.positions, g->find_value("positions"));
  EXPECT_EQ(p.offsets, g->find_value("offsets"));
  EXPECT_EQ(p.positions->type().str(), "i32[S]");
  EXPECT_EQ(p.offsets->type().str(), "i32[N + 1]");
  EXPECT_EQ(g->shapes().declaration("N").hi, 8);

  const auto att = nodes_of(*g, "attention");
  ASSERT_EQ(att.size(), 1u);
  ASSERT_EQ(att[0]->operands().size(), 4u);
  EXPECT_EQ(att[0]->operand(3), p.offsets);
  EXPECT_TRUE(att[0]->attrs().get_bool("causal"));
  EXPECT_TRUE(nodes_of(*g, "iota").empty());
  EXPECT_TRUE(nodes_of(*g, "causal_mask").empty());
  bool gathers_positions = false;  // the position table is read at the positions
  for (const Node* n : nodes_of(*g, "gather"))
    gathers_positions |= n->operand(0)->name() == "wpe" && n->operand(1) == p.positions;
  EXPECT_TRUE(gathers_positions) << print_graph(*g);
}

// An i64 index along the row of a wider shape: cast and broadcast from the positions.
TEST(PackedRows, AWiderIndexAlongTheRowIsBroadcastFromThePositions) {
  auto g = row_model(1, "  %j = iota() {shape = [B, S], axis = 1} : i64[B, S]\n", "%j");
  const nn::Packing p = pack_one_row(*g, 4);
  const Value* out = g->outputs().front().second;
  ASSERT_EQ(out->producer()->op().name, "broadcast");
  const Node* cast = out->producer()->operand(0)->producer();
  ASSERT_NE(cast, nullptr);
  EXPECT_EQ(cast->op().name, "cast");
  EXPECT_EQ(cast->operand(0), p.positions);
}

void expect_refused(std::unique_ptr<Graph> g, const std::string& why) {
  try {
    pack_one_row(*g, 8);
    ADD_FAILURE() << "packed: " << print_graph(*g);
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("cannot take packed steps: "), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST(PackedRows, RefusesWhatCouldMixTheExamplesOfARow) {
  expect_refused(row_model(4), "a packed step is one row (batch 1)");
  // Scores with a bias before the softmax: not an attention the pass recognises.
  expect_refused(row_model(1,
                           "  %bias = full() {value = 0.5, shape = [B, S, S]} : f32[B, S, S]\n"
                           "  %sb = add(%s, %bias) : f32[B, S, S]\n"
                           "  %pb = softmax(%sb) : f32[B, S, S]\n"
                           "  %ob = matmul(%pb, %h) : f32[B, S, 8]\n",
                           "%ob"),
                 "relates the row's tokens to each other outside an attention");
  expect_refused(row_model(1, "  %k = iota() {shape = [S, 8], axis = 1} : i64[S, 8]\n", "%k"),
                 "which is not the row");
  expect_refused(row_model(1, "  %positions = iota() {shape = [S]} : i64[S]\n", "%positions"),
                 "the graph already has a value `positions`");
}

}  // namespace
}  // namespace disc::ir::models
