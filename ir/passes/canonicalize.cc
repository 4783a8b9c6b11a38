// Puts the graph in canonical form, so that equal things look equal to later passes:
//  - every dim (in types and attributes) is rewritten over the independent symbols of the shape
//    graph (`S0` becomes `12*S1` once a reshape proved it);
//  - ops that do nothing are bypassed (reshape/broadcast to the same shape, identity transpose,
//    cast to the same dtype, full-range slice, zero pad, one-operand concat);
//  - chains fold: reshape of reshape, transpose of transpose, neg of neg.
// Bypassed nodes become dead; dce removes them.
// Needs: a verified graph. Keeps: every output's value, bit for bit.
#include <numeric>

#include "ir/op_def.h"
#include "ir/passes/passes.h"

namespace disc::ir {
namespace {

bool canonicalize_dims(Graph& g) {
  const ShapeGraph& shapes = g.shapes();
  bool changed = false;
  auto canon_type = [&](Value* v) {
    TensorType t = v->type();
    for (auto& d : t.shape) d = shapes.canonical(d);
    if (t != v->type()) g.set_type(v, std::move(t)), changed = true;
  };
  for (Value* a : g.arguments()) canon_type(a);
  for (Node* n : g.nodes()) {
    for (Value* r : n->results()) canon_type(r);
    Attributes attrs = n->attrs();
    for (const auto& [name, value] : n->attrs().all()) {
      if (const auto* d = std::get_if<DimExpr>(&value)) attrs.set(name, shapes.canonical(*d));
      if (const auto* ds = std::get_if<std::vector<DimExpr>>(&value)) {
        std::vector<DimExpr> c;
        for (const auto& d : *ds) c.push_back(shapes.canonical(d));
        attrs.set(name, c);
      }
    }
    if (!(attrs == n->attrs())) g.set_attrs(n, std::move(attrs)), changed = true;
  }
  return changed;
}

bool is_iota(const std::vector<int64_t>& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

bool all_zero(const std::vector<DimExpr>& v) {
  return std::all_of(v.begin(), v.end(), [](const DimExpr& x) { return x.is_zero(); });
}

// True when `n` returns its first operand unchanged.
bool is_identity(const Node& n) {
  const std::string& op = n.op().name;
  const Value *in = n.operand(0), *out = n.result();
  if (in->type() != out->type()) return false;
  const Attributes& a = n.attrs();
  if (op == "reshape" || op == "cast") return true;
  if (op == "transpose") return is_iota(a.get_ints("perm"));
  if (op == "broadcast") return is_iota(a.get_ints("dims"));
  if (op == "slice") return a.get_dim("start").is_zero();
  if (op == "pad") return all_zero(a.get_dims("low")) && all_zero(a.get_dims("high"));
  if (op == "concat") return n.operands().size() == 1;
  return false;
}

// Folds `n` into its producer chain; returns whether it changed anything.
bool fold_chain(Graph& g, Node* n) {
  const std::string& op = n->op().name;
  Node* inner = n->operand(0)->producer();
  if (!inner || inner->op().name != op) return false;
  if (op == "reshape") {
    g.set_operand(n, 0, inner->operand(0));
    return true;
  }
  if (op == "transpose") {
    const auto &p_in = inner->attrs().get_ints("perm"), &p_out = n->attrs().get_ints("perm");
    std::vector<int64_t> composed;
    for (int64_t p : p_out) composed.push_back(p_in[p]);
    Attributes a = n->attrs();
    a.set("perm", composed);
    g.set_attrs(n, a);
    g.set_operand(n, 0, inner->operand(0));
    return true;
  }
  if (op == "neg") {
    g.replace_all_uses(n->result(), inner->operand(0));
    return true;
  }
  return false;
}

class CanonicalizePass final : public Pass {
 public:
  std::string_view name() const override { return "canonicalize"; }
  std::string_view summary() const override {
    return "write dims over independent symbols, bypass no-op ops, fold chains";
  }
  std::string_view keeps() const override { return "every output's value, bit for bit"; }

  bool run(Graph& g) override {
    bool changed = canonicalize_dims(g);
    for (bool again = true; again;) {
      again = false;
      for (Node* n : g.nodes()) {
        bool dead = n->result()->users().empty() && !g.is_output(n->result());
        if (n->operands().empty() || n->results().size() != 1 || dead) continue;
        if (is_identity(*n)) {
          g.replace_all_uses(n->result(), n->operand(0));
          again = true;
        } else if (fold_chain(g, n)) {
          again = true;
        }
      }
      changed |= again;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_canonicalize_pass() {
  return std::make_unique<CanonicalizePass>();
}

}  // namespace disc::ir
