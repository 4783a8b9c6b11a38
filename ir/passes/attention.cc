// Rewrites scaled dot-product attention written as primitives into the `attention` op, which a
// device runs by blocks of query rows without holding the [..., S, S] scores (ir/ops/
// attention_ops.cc). Run it on the forward graph, before autodiff, so that the gradient is one
// `attention_grad` rather than the primitives' gradients.
//
//   %s = matmul(%q, %k) {transpose_b = true}       %o = attention(%x, %k, %v)
//   [%s = mul(%s, broadcast(constant c2))]         {causal = true, scale = c * c2}
//   %m = causal_mask(%s)            (optional)  =>
//   %p = softmax(%m)
//   %o = matmul(%p, %v)
// where %q = mul(%x, broadcast(constant c)) folds into `scale` (else scale = 1, %q stays), the
// mask has value -inf and a square [..., S, S], and %s, %m, %p have no other use.
// The softmax's own rounding is replaced by the attention kernel's: values change within f32
// rounding, so the pass is opt-in (TrainerOptions::fuse_attention), like fusion.
// Needs: a verified graph. Keeps: every output's value, up to rounding.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "ir/passes/causal_patterns.h"
#include "ir/passes/passes.h"

namespace disc::ir {
namespace {

// The node producing `v` when it is `op` and `v` feeds only one node and no output.
const Node* sole_use_of(const Graph& g, const Value* v, const std::string& op) {
  const Node* n = v->producer();
  if (!n || n->op().name != op || v->users().size() != 1 || g.is_output(v)) return nullptr;
  return n;
}

bool plain_matmul(const Node& n, bool transpose_b) {
  const Attributes& a = n.attrs();
  return !a.get_bool("transpose_a") && a.get_bool("transpose_b") == transpose_b &&
         !a.get_bool("sum_batch") && !a.get_bool("tril_a");
}

struct Match {
  Value *q, *k, *v;
  bool causal = false;
  double scale = 1.0;
  std::vector<const Node*> chain;  // the nodes it replaces, each before its operands' producers
};

// With m.q = mul(%x, broadcast(constant c)) used only by the scores: q becomes x, scale c.
void fold_scale(const Graph& g, Match& m) {
  const Node* mul = sole_use_of(g, m.q, "mul");
  const Node* b = mul ? mul->operand(1)->producer() : nullptr;
  if (!b || b->op().name != "broadcast" || !b->attrs().get_ints("dims").empty()) return;
  const Node* c = b->operand(0)->producer();
  if (!c || c->op().name != "constant") return;
  m.q = mul->operand(0);
  m.scale = c->attrs().get_float("value");
  m.chain.insert(m.chain.end(), {mul, b, c});
}

// %s = mul(%qk, broadcast(constant c)), the scale applied to the scores rather than to q (as
// exported graphs write it): the mul, with its factor in *c.
const Node* scores_scale(const Graph& g, const Value* s, double* c) {
  const Node* mul = sole_use_of(g, s, "mul");
  const Node* b = mul ? mul->operand(1)->producer() : nullptr;
  if (!b || b->op().name != "broadcast" || !b->attrs().get_ints("dims").empty()) return nullptr;
  const Node* k = b->operand(0)->producer();
  if (!k || k->op().name != "constant") return nullptr;
  *c = k->attrs().get_float("value");
  return mul;
}

std::optional<Match> match(const Graph& g, const Node& pv) {
  if (pv.op().name != "matmul" || !plain_matmul(pv, false)) return std::nullopt;
  const Node* softmax = sole_use_of(g, pv.operand(0), "softmax");
  if (!softmax) return std::nullopt;
  if (!over_last_axis(*softmax)) return std::nullopt;
  Match m{.v = pv.operand(1), .chain = {&pv, softmax}};
  Value* scores = softmax->operand(0);
  if (const Node* mask = sole_use_of(g, scores, "causal_mask")) {
    if (!is_mask_with(*scores, -INFINITY) || !square(g, *scores)) return std::nullopt;
    m.causal = true;
    m.chain.push_back(mask);
    scores = mask->operand(0);
  }
  double after = 1.0;
  if (const Node* mul = scores_scale(g, scores, &after)) {
    const Node* b = mul->operand(1)->producer();
    m.chain.insert(m.chain.end(), {mul, b, b->operand(0)->producer()});
    scores = mul->operand(0);
  }
  const Node* qk = sole_use_of(g, scores, "matmul");
  if (!qk || !plain_matmul(*qk, true)) return std::nullopt;
  m.chain.push_back(qk);
  m.q = qk->operand(0);
  m.k = qk->operand(1);
  fold_scale(g, m);
  m.scale *= after;
  if (m.q->rank() != m.k->rank() || m.v->rank() != m.k->rank())
    return std::nullopt;  // a shared k or v
  return m;
}

class AttentionPass final : public Pass {
 public:
  std::string_view name() const override { return "attention"; }
  std::string_view summary() const override {
    return "rewrite matmul -> [causal_mask] -> softmax -> matmul into one attention op, which runs "
           "without the [S, S] scores";
  }
  std::string_view keeps() const override { return "every output's value, up to rounding"; }

  bool run(Graph& g) override {
    bool changed = false;
    for (Node* pv : g.nodes()) {
      const std::optional<Match> m = match(g, *pv);
      if (!m) continue;
      Node* att =
          g.add_node("attention", {m->q, m->k, m->v}, {{"causal", m->causal}, {"scale", m->scale}});
      g.move_before(att, pv);
      g.replace_all_uses(pv->result(), att->result());
      erase_unused(g, m->chain);
      changed = true;
    }
    return changed;
  }

 private:
  // Erases the replaced nodes that nothing else reads (a shared constant stays).
  static void erase_unused(Graph& g, const std::vector<const Node*>& chain) {
    std::set<const Node*> dead;
    for (const Node* n : chain) {
      bool unused = true;
      for (const Value* r : n->results()) {
        unused &= !g.is_output(r) && std::all_of(r->users().begin(), r->users().end(),
                                                 [&](const Node* u) { return dead.contains(u); });
      }
      if (unused) dead.insert(n);
    }
    g.erase_nodes([&](const Node& n) { return dead.contains(&n); });
  }
};

}  // namespace

std::unique_ptr<Pass> make_attention_pass() {
  return std::make_unique<AttentionPass>();
}

}  // namespace disc::ir
