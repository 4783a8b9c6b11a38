// Rewrites a linear layer followed by cross-entropy into the `linear_cross_entropy` op, which a
// device runs by chunks of rows without the [..., classes] logits (ir/ops/
// linear_cross_entropy_ops.cc). Run it on the forward graph, before autodiff, so that the
// gradient comes from the op's own dh and dw rather than from the logits' gradient.
//
//   %l = matmul(%h, %w) [transpose_b]            %loss, %dh, %dw = linear_cross_entropy(%h, %w, %y)
//   %loss = cross_entropy(%l, %y)          =>        {ignore_index, transpose_w = transpose_b}
// where %w has rank 2 and %l has no other use (and is no output). The loss's rounding changes:
// values agree within f32 rounding.
// Needs: a verified graph. Keeps: every output's value, up to rounding.
#include "ir/passes/passes.h"

namespace disc::ir {
namespace {

// The matmul making `logits`, when it is a plain h [..., D] x w [D, V] (or w^T) read only here.
const Node* linear_layer(const Graph& g, const Value& logits) {
  const Node* mm = logits.producer();
  if (!mm || mm->op().name != "matmul" || logits.users().size() != 1 || g.is_output(&logits))
    return nullptr;
  const Attributes& a = mm->attrs();
  if (a.get_bool("transpose_a") || a.get_bool("sum_batch") || a.get_bool("tril_a")) return nullptr;
  return mm->operand(1)->rank() == 2 ? mm : nullptr;
}

class LinearCrossEntropyPass final : public Pass {
 public:
  std::string_view name() const override { return "linear_cross_entropy"; }
  std::string_view summary() const override {
    return "rewrite matmul -> cross_entropy into one linear_cross_entropy op, which runs without "
           "the "
           "[..., classes] logits";
  }
  std::string_view keeps() const override { return "every output's value, up to rounding"; }

  bool run(Graph& g) override {
    bool changed = false;
    for (Node* ce : g.nodes()) {
      if (ce->op().name != "cross_entropy") continue;
      const Node* mm = linear_layer(g, *ce->operand(0));
      if (!mm) continue;
      Node* fused =
          g.add_node("linear_cross_entropy", {mm->operand(0), mm->operand(1), ce->operand(1)},
                     {{"ignore_index", ce->attrs().get_int("ignore_index")},
                      {"transpose_w", mm->attrs().get_bool("transpose_b")}});
      g.move_before(fused, ce);
      g.replace_all_uses(ce->result(), fused->result(0));
      g.erase_nodes([&](const Node& n) { return &n == ce || &n == mm; });
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_linear_cross_entropy_pass() {
  return std::make_unique<LinearCrossEntropyPass>();
}

}  // namespace disc::ir
