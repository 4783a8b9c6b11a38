// The precision policy: a forward graph in f32 becomes one whose matmuls read bf16 (or f16)
// operands, as PyTorch's autocast runs it. Run it before autodiff, so that the backward follows
// the forward's dtypes (a cast's gradient is the cast back; a bf16 matmul's gradients are bf16
// matmuls) and parameters' gradients arrive in f32, the dtype of the parameters themselves.
//
// Each node, in order, gets operands of the dtype its op runs in (OpDef::precision):
//   matmul, attention                    float operands cast to the low dtype; the devices' kernels
//                                        compute in f32 (GEMMs sum in f32, attention's softmax is
//                                        f32) and round each result once
//   linear_cross_entropy (the head)      h and w cast to bf16; logits, softmax and loss in f32.
//                                        In f16 it stays f32: its gradients are made for
//                                        dloss = 1, before the loss scale, and would underflow
//   norms, softmax, losses, reductions   low-precision operands cast back to f32, as autocast
//                                        keeps them
//   everything else (elementwise,        operands promoted to the widest float dtype among them;
//   layout, gather)                      a constant (or a broadcast or reshape of one) takes the
//                                        dtype of the tensor it meets, as a Python scalar does
// A node whose operands change is made again, so its results take the dtypes its op infers.
// Parameters stay f32 (the masters the optimizer updates); each cast of a value is made once,
// before its first reader; a 16-bit value widened to f32 is read as itself where 16 bits are
// wanted. f64 values are left alone.
// Every bf16 value is rounded where its op makes it, by a reference kernel or inside a fused one
// (jit/kernel_ir/lowering.h), so the numbers do not depend on the fusion plan or on a recompute;
// autodiff adds the gradients of a bf16 value's several uses in f32 (ir/autodiff.h).
// Needs: a verified forward graph. Keeps: every output's value, up to the low dtype's rounding.
#include <map>
#include <set>
#include <utility>

#include "ir/passes/passes.h"

namespace disc::ir {
namespace {

// A value made from constants alone: it adapts to the tensors it meets.
bool is_weak(const Value& v) {
  for (const Node* p = v.producer(); p; p = p->operand(0)->producer()) {
    if (p->op().makes_constant) return true;
    if (!p->op().carries_constant) return false;
  }
  return false;
}

// f64 > f32 > 16-bit: the dtype a promoting op computes its mixed float operands in.
int width(DType t) {
  return t == DType::kF64 ? 3 : t == DType::kF32 ? 2 : is_half_float(t) ? 1 : 0;
}

class Autocast final : public Pass {
 public:
  explicit Autocast(DType low) : low_(low) {}

  std::string_view name() const override { return "precision"; }
  std::string_view summary() const override {
    return "matmuls in bf16 or f16 as told (f32 sums); norms, softmax, losses and reductions in "
           "f32";
  }
  std::string_view keeps() const override { return "every output's value, up to rounding"; }

  bool run(Graph& g) override {
    casts_.clear();
    std::set<const Value*> retyped;  // results of nodes made again, whose dtype changed
    std::vector<Node*> replaced;
    for (Node* n : g.nodes()) {
      std::vector<Value*> operands = n->operands();
      bool again = false;
      for (size_t i = 0; i < operands.size(); ++i) {
        again = again || retyped.contains(operands[i]);
        const DType want = dtype_for(*n, i);
        if (want != operands[i]->dtype()) operands[i] = cast(g, operands[i], want, n), again = true;
      }
      if (!again) continue;
      std::vector<std::string> names;
      for (const Value* r : n->results()) names.push_back(g.unique_name(r->name()));
      Node* made = g.add_node(n->op().name, operands, n->attrs(), names);
      g.move_before(made, n);
      for (int r = 0; r < static_cast<int>(n->results().size()); ++r) {
        if (made->result(r)->dtype() != n->result(r)->dtype()) retyped.insert(made->result(r));
        g.replace_all_uses(n->result(r), made->result(r));
      }
      replaced.push_back(n);
    }
    const std::set<const Node*> gone(replaced.begin(), replaced.end());
    g.erase_nodes([&](const Node& n) { return gone.contains(&n); });
    return !replaced.empty();
  }

 private:
  // The dtype operand i of `n` is read in.
  DType dtype_for(const Node& n, size_t i) const {
    const DType t = n.operand(static_cast<int>(i))->dtype();
    if (width(t) == 0 || t == DType::kF64) return t;
    switch (n.op().precision) {
      case Precision::kLow:
        return low_;
      case Precision::kLowInBf16:
        return low_ == DType::kBF16 ? low_ : DType::kF32;
      case Precision::kF32:
        return DType::kF32;
      case Precision::kFollow:
        break;
    }
    if (is_weak(*n.operand(static_cast<int>(i)))) {
      // A constant meeting a tensor takes its dtype; among constants alone, nothing changes.
      for (const Value* o : n.operands())
        if (width(o->dtype()) > 0 && !is_weak(*o)) return promoted(n);
      return t;
    }
    return promoted(n);
  }

  // The widest float dtype among n's operands that are not constants.
  static DType promoted(const Node& n) {
    DType best = DType::kBool;
    for (const Value* o : n.operands())
      if (!is_weak(*o) && width(o->dtype()) > width(best)) best = o->dtype();
    return best;
  }

  // `v` as `to`, made once per value and dtype, before its first reader `at`. A value that is an
  // exact widening of one already in `to` (a frozen bf16 weight the model reads as f32) is that
  // value: no copy of the weight is made or held.
  Value* cast(Graph& g, Value* v, DType to, const Node* at) {
    if (const Node* p = v->producer(); p && p->op().name == "cast") {
      Value* narrow = p->operand(0);
      if (narrow->dtype() == to && is_half_float(to) && width(v->dtype()) > width(to))
        return narrow;
    }
    auto [it, fresh] = casts_.try_emplace({v, to}, nullptr);
    if (fresh) {
      const std::string name = g.unique_name(v->name() + "." + std::string(dtype_name(to)));
      it->second = g.add("cast", {v}, {{"dtype", to}}, name);
      g.move_before(it->second->producer(), at);
    }
    return it->second;
  }

  DType low_;
  std::map<std::pair<const Value*, DType>, Value*> casts_;
};

}  // namespace

void check_precision(DType precision) {
  if (precision != DType::kF32 && !is_half_float(precision))
    throw InvalidArgument("precision " + std::string(dtype_name(precision)) +
                          " is not one disc trains in: use f32, bf16 or f16");
}

std::unique_ptr<Pass> make_autocast_pass(DType low) {
  check_precision(low);
  if (low == DType::kF32)
    throw InvalidArgument("precision f32 needs no precision pass: the graph is f32 already");
  return std::make_unique<Autocast>(low);
}

}  // namespace disc::ir
