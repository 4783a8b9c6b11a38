// Marks the matmuls whose first operand is zero above its diagonal with tril_a, so that devices
// skip those blocks (devices/cpu/tril_gemm.h): in causal attention, the probabilities and their
// gradient, which p v, p^T dO, dS k and dS^T q read.
//
// A square value [..., S, S] is known lower triangular when it is
// - causal_mask(x) with value 0 (the gradient through the mask), or
// - softmax over the last axis of causal_mask(x) with value -inf: exp(-inf) is exactly 0.
// Either way, tril(A) == A, so setting tril_a changes no value.
// Needs: a verified graph. Keeps: every output's value.
#include <cmath>

#include "ir/passes/causal_patterns.h"
#include "ir/passes/passes.h"

namespace disc::ir {
namespace {

bool lower_triangular(const Graph& g, const Value& v) {
  if (!square(g, v)) return false;
  if (is_mask_with(v, 0.0)) return true;
  const Node* n = v.producer();
  return n && n->op().name == "softmax" && over_last_axis(*n) &&
         is_mask_with(*n->operand(0), -INFINITY);
}

class TrilPass final : public Pass {
 public:
  std::string_view name() const override { return "tril"; }
  std::string_view summary() const override {
    return "mark matmuls that read a lower-triangular operand (causal attention), so that "
           "devices skip the zero blocks";
  }
  std::string_view keeps() const override { return "every output's value"; }

  bool run(Graph& g) override {
    bool changed = false;
    for (Node* n : g.nodes()) {
      if (n->op().name != "matmul" || n->attrs().get_bool("tril_a")) continue;
      if (n->attrs().get_bool("sum_batch") || !lower_triangular(g, *n->operand(0))) continue;
      Attributes attrs = n->attrs();
      attrs.set("tril_a", true);
      g.set_attrs(n, std::move(attrs));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_tril_pass() {
  return std::make_unique<TrilPass>();
}

}  // namespace disc::ir
