#include "ir/models/packed_rows.h"

#include <set>
#include <string>

#include "base/error.h"
#include "ir/pass.h"

namespace disc::ir::models {
namespace {

[[noreturn]] void refuse(const Graph& g, const std::string& why) {
  throw InvalidArgument(g.source() + ": cannot take packed steps: " + why);
}

bool same(const Graph& g, const DimExpr& a, const DimExpr& b) {
  return g.shapes().canonical(a) == g.shapes().canonical(b);
}

// The dims of v that are the row (S): more than one means tokens scored against tokens.
int row_dims(const Graph& g, const Value& v, const DimExpr& row) {
  int n = 0;
  for (const DimExpr& d : v.shape()) n += same(g, d, row);
  return n;
}

// A new symbol's name: `base`, or base_2, ... when the file named one so.
std::string fresh_symbol(const Graph& g, const std::string& base) {
  std::string name = base;
  for (int i = 2; g.shapes().find(name); ++i) name = base + "_" + std::to_string(i);
  return name;
}

// The op at `n` again with `extra` as its last operand, in its place.
void append_operand(Graph& g, Node* n, Value* extra, std::set<const Node*>& replaced) {
  std::vector<Value*> operands = n->operands();
  operands.push_back(extra);
  Node* m = g.add_node(n->op().name, operands, n->attrs());
  g.move_before(m, n);
  g.replace_all_uses(n->result(), m->result());
  replaced.insert(n);
}

// An index along the row (`iota`: learned position embeddings gather at it) becomes each
// token's position in its own example: what the index was in a padded row.
void index_by_positions(Graph& g, Node* n, Value* positions, const DimExpr& row,
                        std::set<const Node*>& replaced) {
  const Value* out = n->result();
  const int64_t a = n->attrs().get_int("axis"), axis = a < 0 ? a + out->rank() : a;
  if (!same(g, out->shape()[axis], row)) return;  // check_nothing_mixes refuses it
  Value* v = positions;
  auto before_n = [&](Value* added) {
    g.move_before(added->producer(), n);
    return added;
  };
  if (out->dtype() != DType::kI32) v = before_n(g.add("cast", {v}, {{"dtype", out->dtype()}}));
  if (out->rank() > 1) {
    v = before_n(
        g.add("broadcast", {v}, {{"shape", out->shape()}, {"dims", std::vector<int64_t>{axis}}}));
  }
  g.replace_all_uses(n->result(), v);
  replaced.insert(n);
}

// What could still tie the examples of a row together, once attention, rope and indices along
// the row read the offsets and positions.
void check_nothing_mixes(const Graph& g, const DimExpr& row) {
  for (const Node* n : g.nodes()) {
    const std::string& op = n->op().name;
    if (op == "iota")
      refuse(g, g.describe(*n) + " indexes along " + n->result()->type().str() +
                    "'s dim, which is not the row; set data.packing: false");
    if (op == "causal_mask" || (op != "attention" && row_dims(g, *n->result(), row) > 1))
      refuse(g, g.describe(*n) + " relates the row's tokens to each other outside an " +
                    "attention the attention pass recognised (matmul, [scale], causal mask, " +
                    "softmax, matmul); set data.packing: false");
  }
}

}  // namespace

nn::Packing pack_one_row(Graph& g, int64_t max_sequences) {
  Value* tokens = g.find_value("tokens");
  if (!tokens || tokens->role() != Role::kInput || tokens->rank() != 2)
    refuse(g, "packing feeds `tokens` [1, T], and the graph has no input `tokens` of rank 2");
  if (g.shapes().compare(tokens->shape()[0], DimExpr(1)) != Ordering::kEQ)
    refuse(g, "`tokens` is " + tokens->type().str() + "; a packed step is one row (batch 1)");
  for (const char* name : {"positions", "offsets"})
    if (g.find_value(name)) refuse(g, std::string("the graph already has a value `") + name + "`");
  const DimExpr row = tokens->shape()[1];

  PassManager passes;
  passes.add_list("verify,canonicalize,cse,dce,layers,attention,dce");
  passes.run(g);

  const std::string n_name = fresh_symbol(g, "N");
  g.shapes().add_symbol({n_name, 1, max_sequences, 1, std::nullopt});
  nn::Packing p{
      .positions = g.add_argument("positions", {DType::kI32, {row}}, Role::kInput),
      .offsets = g.add_argument("offsets", {DType::kI32, {DimExpr::symbol(n_name) + DimExpr(1)}},
                                Role::kInput)};
  std::set<const Node*> replaced;
  for (Node* n : g.nodes()) {
    const std::string& op = n->op().name;
    if (op == "rope" && n->operands().size() == 1) {
      const Value* x = n->operand(0);
      const int64_t axis = n->attrs().get_int("seq_axis");
      if (!same(g, x->shape().at(axis < 0 ? axis + x->rank() : axis), row))
        refuse(g, g.describe(*n) + " rotates along " + x->type().str() + "'s dim " +
                      std::to_string(axis) + ", not along the row");
      append_operand(g, n, p.positions, replaced);
    } else if (op == "attention" && n->operands().size() == 3) {
      const Value* q = n->operand(0);
      if (!same(g, q->shape()[q->rank() - 2], row))
        refuse(g, g.describe(*n) + "'s queries " + q->type().str() + " are not the row's tokens");
      append_operand(g, n, p.offsets, replaced);
    } else if (op == "iota") {
      index_by_positions(g, n, p.positions, row, replaced);
    }
  }
  g.erase_nodes([&](const Node& n) { return replaced.contains(&n); });
  check_nothing_mixes(g, row);
  return p;
}

}  // namespace disc::ir::models
