// Recomputes in the backward pass the memory-bound forward values it reads (elementwise ops,
// broadcasts, reductions, norms) from values it reads anyway, instead of holding them from the
// forward pass (AOTAutograd partitions the same way). In a Llama block the backward reads
// silu(gate) for the gradient of SwiGLU's up projection; it now computes it again from the gate,
// which it reads for the gate's own gradient: a [B, S, ffn] tensor per layer is no longer held
// from the forward to the backward, and the forward's SwiGLU kernel writes its product alone.
// Fusion folds the recompute into the backward's kernel.
//
//   %s = silu(%gate)                          %s = silu(%gate)
//   %p = mul(%s, %up)                         %p = mul(%s, %up)
//   ... backward ...                  =>      ... backward ...
//   %d = mul(%dp, %s)                         %s.re = silu(%gate)
//                                             %d = mul(%dp, %s.re)
// A value is made again when its node is memory-bound, the forward reads it only in memory-bound
// nodes, and each operand is an argument, a constant, or a value that the backward reads at or
// after that point anyway. Values that GEMMs read in the forward stay: the memory governor
// recomputes a GEMM's result from them (memory/remat.h). The backward is every node after the one
// that makes output `loss`; a graph without it is left alone.
// Needs: a training step (ir/training_step.h). Keeps: every value, bit for bit: the copy runs the
// same op on the same operands (a fused kernel rounds a bf16 or f16 copy as its node alone would).
#include <algorithm>
#include <map>
#include <set>

#include "ir/passes/passes.h"

namespace disc::ir {
namespace {

bool memory_bound(const Node& n) {
  const OpCategory c = n.op().category;
  return n.results().size() == 1 && (c == OpCategory::kElementwise || c == OpCategory::kBroadcast ||
                                     c == OpCategory::kReduce || c == OpCategory::kNormalization);
}

class BackwardRecomputePass final : public Pass {
 public:
  std::string_view name() const override { return "backward_recompute"; }
  std::string_view summary() const override {
    return "recompute memory-bound forward values in the backward from values it reads anyway, "
           "instead of "
           "holding them from the forward";
  }
  std::string_view needs() const override {
    return "a training step (the backward follows output `loss`)";
  }
  std::string_view keeps() const override {
    return "every value (the same ops on the same operands)";
  }

  bool run(Graph& g) override {
    const std::vector<Node*> nodes = g.nodes();
    const auto loss = std::find_if(g.outputs().begin(), g.outputs().end(),
                                   [](const auto& o) { return o.first == "loss"; });
    if (loss == g.outputs().end() || !loss->second->producer()) return false;
    step_.clear();
    for (const Node* n : nodes) step_[n] = static_cast<int>(step_.size());
    end_ = step_.at(loss->second->producer());
    // The backward's first and last reads of each forward value it reads.
    std::map<const Value*, int> first;
    last_.clear();
    for (int i = end_ + 1; i < static_cast<int>(nodes.size()); ++i) {
      for (const Value* o : nodes[i]->operands()) {
        if (!o->producer() || step_.at(o->producer()) > end_) continue;
        first.try_emplace(o, i);
        last_[o] = i;
      }
    }
    again_.clear();
    for (const auto& [v, at] : first) {
      if (makes_again(*v, at)) again_.insert(v);
    }
    copies_.clear();
    before_.clear();
    for (int i = end_ + 1; i < static_cast<int>(nodes.size()); ++i) {
      for (int k = 0; k < static_cast<int>(nodes[i]->operands().size()); ++k) {
        Value* o = nodes[i]->operand(k);
        if (again_.contains(o)) g.set_operand(nodes[i], k, copy_before(g, o, nodes[i]));
      }
    }
    if (again_.empty()) return false;
    // The copies were added last; each goes just before the node that first reads it, all at once
    // (one move_before each was quadratic: 7 s on a 1000-layer llama).
    std::vector<const Node*> order;
    for (const Node* n : nodes) {
      if (auto it = before_.find(n); it != before_.end())
        order.insert(order.end(), it->second.begin(), it->second.end());
      order.push_back(n);
    }
    g.reorder(order);
    return true;
  }

 private:
  bool forward(const Node* n) const { return step_.at(n) <= end_; }

  // Whether v, first read by the backward at step `at`, can be made again there: no GEMM reads it
  // in the forward, and its operands are there at `at` without being held longer for it.
  bool makes_again(const Value& v, int at) const {
    const Node& n = *v.producer();
    if (!memory_bound(n)) return false;
    for (const Node* u : v.users()) {
      if (forward(u) && !memory_bound(*u)) return false;
    }
    return std::all_of(n.operands().begin(), n.operands().end(), [&](const Value* o) {
      if (!o->producer() || o->role() == Role::kConstant) return true;
      auto it = last_.find(o);
      return it != last_.end() && it->second >= at;
    });
  }

  // The backward's copy of `v` (and of the constants and values made again that it reads), made
  // before `user` unless made already. Depth first with a stack of its own: a chain of values made
  // again is as long as the graph (30,000 relus), too deep for frames.
  Value* copy_before(Graph& g, Value* v, const Node* user) {
    std::vector<Value*> todo = {v};
    while (!todo.empty()) {
      Value* top = todo.back();
      if (copies_.contains(top)) {
        todo.pop_back();
        continue;
      }
      const Node& n = *top->producer();
      std::vector<Value*> operands, missing;
      for (Value* o : n.operands()) {
        if (o->role() != Role::kConstant && !again_.contains(o)) {
          operands.push_back(o);
        } else if (auto it = copies_.find(o); it != copies_.end()) {
          operands.push_back(it->second);
        } else {
          missing.push_back(o);
        }
      }
      if (!missing.empty()) {  // their copies first, the first operand's first, then `top` again
        todo.insert(todo.end(), missing.rbegin(), missing.rend());
        continue;
      }
      todo.pop_back();
      Node* copy =
          g.add_node(n.op().name, operands, n.attrs(), {g.unique_name(top->name() + ".re")});
      before_[user].push_back(copy);  // after the copies of its operands
      copies_[top] = copy->result();
    }
    return copies_.at(v);
  }

  std::map<const Node*, int> step_;
  int end_ = 0;                       // the step of the node that makes the loss
  std::map<const Value*, int> last_;  // the backward's last read of each forward value
  std::set<const Value*> again_;      // the forward values the backward makes again
  std::map<const Value*, Value*> copies_;
  std::map<const Node*, std::vector<const Node*>> before_;  // the copies each node reads first
};

}  // namespace

std::unique_ptr<Pass> make_backward_recompute_pass() {
  return std::make_unique<BackwardRecomputePass>();
}

}  // namespace disc::ir
