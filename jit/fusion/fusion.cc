#include "jit/fusion/fusion.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <sstream>
#include <unordered_map>

#include "base/error.h"
#include "ir/worst_case.h"
#include "jit/fusion/fused_op.h"
#include "jit/kernel_ir/lowering.h"

namespace disc::jit {
namespace {

using ir::DimExpr;
using NodeSet = std::set<const ir::Node*>;

struct Draft {
  std::vector<const ir::Node*> nodes;
  std::vector<DimExpr> space;
};

// Values the group must write: used outside it, or outputs and updates of the graph.
std::vector<const ir::Value*> outputs_of(const ir::Graph& g,
                                         const std::vector<const ir::Node*>& nodes) {
  const NodeSet members(nodes.begin(), nodes.end());
  std::vector<const ir::Value*> out;
  for (const ir::Node* n : nodes) {
    for (const ir::Value* v : n->results()) {
      bool outside = g.is_output(v);
      for (const ir::Node* u : v->users()) outside |= !members.contains(u);
      if (outside) out.push_back(v);
    }
  }
  return out;
}

// Builds the group's kernel; nothing when a node does not fit the group, and InvalidArgument when
// its outputs cannot be stored.
std::optional<FusionGroup> lower(const ir::Graph& g, const Draft& d) {
  KernelBuilder b(d.space, g.shapes());
  for (const ir::Node* n : d.nodes) {
    if (!b.fits(*n)) return std::nullopt;
    b.add(*n);
  }
  FusionGroup fg{.nodes = d.nodes, .space = d.space};
  fg.outputs = outputs_of(g, d.nodes);
  fg.kernel = b.finish(fg.outputs);
  fg.inputs = b.inputs();
  return fg;
}

FusionGroup build(const ir::Graph& g, const Draft& d) {
  std::optional<FusionGroup> fg = lower(g, d);
  if (!fg)
    throw InvalidArgument("fusion: a group of " + g.describe(*d.nodes.front()) +
                          " does not fit its space");
  return *std::move(fg);
}

bool cost_ok(const ir::Graph& g, const std::vector<ir::Bindings>& worst, const FusionGroup& fg,
             const FusionOptions& o) {
  const KernelIR& k = fg.kernel;
  int reductions = 0, full_loads = 0;
  for (const Instr& in : k.code) {
    reductions += is_reduction(in.op);
    full_loads += in.op == KOp::kLoad && in.access == Access::kFull;
  }
  if (reductions + 1 > o.max_passes) return false;
  if (reductions > 0 && !fg.space.empty() &&
      ir::largest_value(g.shapes(), worst, fg.space.back()) * 4 * full_loads > o.cache_bytes)
    return false;
  const std::vector<int> count = k.evaluations();
  int recompute = 0;
  for (size_t i = 0; i < k.code.size(); ++i) {
    const KOp op = k.code[i].op;
    if (count[i] > 1 && op != KOp::kLoad && op != KOp::kConst)
      recompute += (is_expensive(op) ? 8 : 1) * (count[i] - 1);
  }
  return recompute <= o.max_recompute;
}

// A normalization whose input other nodes read too (the residual stream: x + attn(x) feeds the
// next norm and the next residual add) starts its own kernel. Fused with the add, the kernel would
// write both, and under a memory cap a recompute of the norm's result would rerun the add and the
// GEMM feeding it (the GEMM's result is long gone); apart, the norm reruns from the residual,
// which is alive, at a few flops per element. The cost: the norm reads the residual once more.
bool keeps_apart(const ir::Node& n) {
  return n.op().lowering.kind == ir::FusionKind::kNorm && n.operand(0)->users().size() > 1;
}

class Planner {
 public:
  Planner(const ir::Graph& g, const FusionOptions& o)
      : g_(g), o_(o), worst_(ir::maximal_bindings(g.shapes())) {
    for (const ir::Node* n : g.nodes()) {
      outside_before_.push_back(outside_before_.empty() ? 0 : outside_before_.back());
      if (!lowerable(*n)) ++outside_before_.back();
      index_[n] = static_cast<int>(index_.size());
    }
    member_.assign(index_.size(), 0);
    seen_.assign(index_.size(), 0);
  }

  FusionPlan run() {
    for (const ir::Node* n : g_.nodes()) {
      // A compare joins only with the select that reads it (take's loose producers): alone, its
      // bool result would be the kernel's output.
      if (!lowerable(*n) || compare(*n)) continue;
      if (!join_a_producer(n) && !start_a_group(n)) continue;
      absorb_producer_groups(n);
    }
    FusionPlan plan;
    for (const Draft& d : drafts_) {
      if (d.nodes.empty()) continue;
      plan.groups.push_back(build(g_, d));
      lowered_nodes_ += static_cast<int64_t>(d.nodes.size());
    }
    plan.lowered = lowered_nodes_;
    return plan;
  }

 private:
  bool acceptable(const Draft& d) {
    lowered_nodes_ += static_cast<int64_t>(d.nodes.size());
    try {
      const std::optional<FusionGroup> fg = lower(g_, d);
      return fg && cost_ok(g_, worst_, *fg, o_);
    } catch (const InvalidArgument&) {
      return false;
    }
  }

  // Tries the groups of n's producers, the latest first.
  bool join_a_producer(const ir::Node* n) {
    if (keeps_apart(*n)) return false;
    std::vector<int> candidates;
    for (const ir::Value* v : n->operands())
      if (v->producer() && group_of_.contains(v->producer()))
        candidates.push_back(group_of_.at(v->producer()));
    std::sort(candidates.rbegin(), candidates.rend());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    for (int gi : candidates) {
      if (too_far(drafts_[gi], n) || !KernelBuilder(drafts_[gi].space, g_.shapes()).fits(*n))
        continue;
      if (std::vector<const ir::Node*> tail = clean_append(gi, n); !tail.empty()) {
        for (const ir::Node* m : tail) {  // what take() would decide, without copying the group
          drafts_[gi].nodes.push_back(m);
          group_of_[m] = gi;
          lowered_[gi]->add(*m);
          ++lowered_nodes_;
        }
        return true;
      }
      if (too_big(drafts_[gi].nodes.size() + 1) || would_cycle(gi, n)) continue;
      if (take(gi, drafts_[gi], n)) return true;
    }
    return false;
  }

  bool start_a_group(const ir::Node* n) {
    drafts_.push_back(Draft{.space = natural_space(*n)});
    lowered_.emplace_back();
    if (take(static_cast<int>(drafts_.size()) - 1, Draft{.space = drafts_.back().space}, n))
      return true;
    drafts_.pop_back();
    lowered_.pop_back();
    return false;
  }

  // Makes group gi the draft d with n added, and with n's lowerable producers that are in no
  // group when that is acceptable: a compare cannot start a group (its bool result cannot be a
  // kernel's output), but the select reading it can take it in.
  bool take(int gi, Draft d, const ir::Node* n) {
    Draft with = d;
    for (const ir::Value* v : n->operands())
      if (const ir::Node* p = v->producer(); p && !group_of_.contains(p) && lowerable(*p))
        with.nodes.push_back(p);
    with.nodes.push_back(n);
    std::sort(with.nodes.begin(), with.nodes.end(),
              [&](auto* a, auto* b) { return index_.at(a) < index_.at(b); });
    d.nodes.push_back(n);
    for (Draft* c : {&with, &d}) {
      if (c == &with && with.nodes.size() == d.nodes.size()) continue;  // no loose producer
      if (cycles(c->nodes) || !acceptable(*c)) continue;
      for (const ir::Node* m : c->nodes) group_of_[m] = gi;
      drafts_[gi] = std::move(*c);
      relower(gi);
      return true;
    }
    return false;
  }

  // The groups of n's other producers, whole, into n's group (sigmoid(x) and 1 - sigmoid(x)
  // each start a group; the node that reads both makes them one). Also, for a select, the groups
  // that only stretch scalars for the compare it took in (an update kept where a scalar guard
  // says so): alone, each would write a full-size tensor that only the compare reads.
  void absorb_producer_groups(const ir::Node* n) {
    if (keeps_apart(*n)) return;
    const int gi = group_of_.at(n);
    std::vector<const ir::Value*> operands(n->operands().begin(), n->operands().end());
    for (const ir::Value* v : n->operands())
      if (const ir::Node* c = v->producer(); c && compare(*c) && group_of_.at(c) == gi)
        for (const ir::Value* w : c->operands())
          if (w->producer() && group_of_.contains(w->producer()) &&
              stretches_scalars(drafts_[group_of_.at(w->producer())]))
            operands.push_back(w);
    for (const ir::Value* v : operands) {
      if (!v->producer() || !group_of_.contains(v->producer())) continue;
      const int hi = group_of_.at(v->producer());
      if (hi == gi || too_far(drafts_[hi], n) ||
          too_big(drafts_[gi].nodes.size() + drafts_[hi].nodes.size()) ||
          !all_fit(drafts_[hi], drafts_[gi].space))
        continue;
      if (shares_scalars(hi, gi) || merges_cleanly(gi, hi)) continue;
      Draft d = drafts_[gi];
      d.nodes.insert(d.nodes.end(), drafts_[hi].nodes.begin(), drafts_[hi].nodes.end());
      std::sort(d.nodes.begin(), d.nodes.end(),
                [&](auto* a, auto* b) { return index_.at(a) < index_.at(b); });
      if (cycles(d.nodes) || !acceptable(d)) continue;  // acceptable: every node fits n's space
      for (const ir::Node* m : drafts_[hi].nodes) group_of_[m] = gi;
      drafts_[gi] = std::move(d);
      drafts_[hi].nodes.clear();
      relower(gi);
      relower(hi);
    }
  }

  // Merges group hi into group gi, as acceptable() would decide, without building the merged
  // kernel: one of the two (the base) is a loop group (lowered_), and the other's nodes are fills
  // that only the two read (autodiff's zeros) or one-instruction elementwise nodes after all of
  // the base, each storing in full what leaves the pair. Then fills close no cycle, a cycle must
  // end in the later nodes (cycles_through), and the kernel is the base's with loads, constants
  // and instructions added: one pass, nothing evaluated twice. A backward chain of 30,000 relu
  // gradients grew one group a node at a time this way, each check a full one before.
  bool merges_cleanly(int gi, int hi) {
    if (o_.max_passes < 1 || o_.max_recompute < 0 ||
        drafts_[gi].nodes.size() + drafts_[hi].nodes.size() > static_cast<size_t>(o_.max_nodes))
      return false;
    for (const int base : {gi, hi}) {
      const int extra = base == gi ? hi : gi;
      KernelBuilder* b = lowered_[base].get();
      if (!b || drafts_[base].space != drafts_[gi].space) continue;  // the merged group's space
      auto in_pair = [&](const ir::Node* m) {
        const auto it = group_of_.find(m);
        return it != group_of_.end() && (it->second == gi || it->second == hi);
      };
      std::vector<const ir::Node*> later;
      bool ok = true;
      for (const ir::Node* m : drafts_[extra].nodes) {
        if (m->operands().empty()) {
          ok &= m->results().size() == 1 && !g_.is_output(m->result()) &&
                std::all_of(m->result()->users().begin(), m->result()->users().end(), in_pair);
        } else {
          ok &= index_.at(m) > index_.at(drafts_[base].nodes.back()) && appends(*b, *m, in_pair);
          later.push_back(m);
        }
      }
      if (!ok || (!later.empty() && cycles_through(base, later, in_pair))) continue;
      for (const ir::Node* m : drafts_[extra].nodes) b->add(*m);
      lowered_nodes_ += static_cast<int64_t>(drafts_[extra].nodes.size());
      std::vector<const ir::Node*> merged;
      std::merge(drafts_[gi].nodes.begin(), drafts_[gi].nodes.end(), drafts_[hi].nodes.begin(),
                 drafts_[hi].nodes.end(), std::back_inserter(merged),
                 [&](auto* x, auto* y) { return index_.at(x) < index_.at(y); });
      for (const ir::Node* m : drafts_[hi].nodes) group_of_[m] = gi;
      lowered_[gi] = std::move(lowered_[base]);
      drafts_[gi].nodes = std::move(merged);
      drafts_[hi].nodes.clear();
      lowered_[hi].reset();
      return true;
    }
    return false;
  }

  // Whether the one-instruction elementwise node m adds to kernel b as it stands: it fits, its
  // operands come from the group (`inside`) or load, a compare's bool stays inside and a select's
  // condition is a compare inside, and what leaves the group is stored in full.
  template <class Inside>
  bool appends(const KernelBuilder& b, const ir::Node& m, const Inside& inside) const {
    const std::optional<KOp> one = m.op().lowering.single;
    if (!one || m.results().size() != 1 || *one < KOp::kNeg || *one > KOp::kSelect ||
        static_cast<int>(m.operands().size()) != kop_arity(*one) || !b.fits(m))
      return false;
    const KOp k = *one;
    for (const ir::Value* v : m.operands()) {
      const ir::Node* p = v->producer();
      if (p && inside(p)) continue;
      if (p && !group_of_.contains(p) && lowerable(*p)) return false;  // a loose producer
      if (b.fit_of(v->shape()) == KernelBuilder::Fit::kNone) return false;
    }
    if (k == KOp::kSelect) {
      const ir::Node* c = m.operand(0)->producer();
      if (!c || !inside(c) || !compare(*c)) return false;
    }
    const ir::Value* r = m.result();
    const std::vector<ir::Node*>& users = r->users();
    const bool leaves = g_.is_output(r) || !std::all_of(users.begin(), users.end(), inside);
    if (is_compare(k) || !leaves) return !leaves && !users.empty();  // else it stores nothing
    return b.fit_of(r->shape()) == KernelBuilder::Fit::kFull;
  }

  // False when a node of d cannot be lowered into `space` at all; acceptable() would then refuse
  // d merged into a group of that space, after copying, sorting and checking the group.
  bool all_fit(const Draft& d, const std::vector<DimExpr>& space) const {
    const KernelBuilder fresh(space, g_.shapes());  // fits() only refuses more once nodes are in
    return std::all_of(d.nodes.begin(), d.nodes.end(),
                       [&](const ir::Node* m) { return fresh.fits(*m); });
  }

  bool too_big(size_t nodes) const {
    return nodes > static_cast<size_t>(std::min(o_.max_checked_nodes, o_.max_nodes));
  }

  // True when more than max_span nodes outside every group run between d's last node and n.
  bool too_far(const Draft& d, const ir::Node* n) const {
    const int last = index_.at(d.nodes.back());
    return outside_before_[index_.at(n)] - outside_before_[last] > o_.max_span;
  }

  // True when some path leaves `nodes` and comes back: they cannot run as one kernel.
  bool cycles(const std::vector<const ir::Node*>& nodes) const {
    const int in = ++stamp_;
    for (const ir::Node* m : nodes) member_[index_.at(m)] = in;
    auto member = [&](const ir::Node* x) { return member_[index_.at(x)] == in; };
    std::vector<const ir::Node*> outside;
    for (const ir::Node* m : nodes)
      for (const ir::Value* v : m->operands())
        if (const ir::Node* p = v->producer(); p && !member(p)) outside.push_back(p);
    return reaches(std::move(outside), member, index_.at(nodes.front()));
  }

  bool would_cycle(int gi, const ir::Node* n) const {
    const Draft& d = drafts_[gi];
    if (!d.nodes.empty() && index_.at(n) > index_.at(d.nodes.back()))
      return cycles_through(gi, {n});
    std::vector<const ir::Node*> nodes = d.nodes;
    nodes.push_back(n);
    return cycles(nodes);
  }

  // The nodes that n, after every node of group gi in graph order, appends to it by the rules
  // take() applies (n and the compare its select reads, when that compare is in no group), shown
  // without building the group's kernel again; nothing when the full check must decide. gi is a
  // loop group without reductions (lowered_, which passed build() and cost_ok as it grew), and the
  // tail is plain arithmetic, or a select of a compare, whose result the kernel stores in full and
  // whose outside operands load (appends). Its kernel is then the group's with the tail's loads and
  // instructions appended and n's store added: it passes build()'s checks, has no reduction (so
  // cost_ok holds: one pass, nothing evaluated twice), and the stores of the group's other outputs
  // are as before.
  std::vector<const ir::Node*> clean_append(int gi, const ir::Node* n) const {
    const KernelBuilder* b = lowered_[gi].get();
    const Draft& d = drafts_[gi];
    if (!b || o_.max_passes < 1 || o_.max_recompute < 0) return {};
    std::vector<const ir::Node*> tail;
    if (const ir::Node* c = select_of_loose_compare(n)) {
      tail.push_back(c);
    } else if (!plain(*n)) {
      return {};
    }
    tail.push_back(n);
    if (d.nodes.size() + tail.size() > static_cast<size_t>(o_.max_nodes)) return {};
    auto inside = [&](const ir::Node* m) {
      const auto it = group_of_.find(m);
      return std::find(tail.begin(), tail.end(), m) != tail.end() ||
             (it != group_of_.end() && it->second == gi);
    };
    for (const ir::Node* m : tail)
      if (index_.at(m) < index_.at(d.nodes.back()) || !appends(*b, *m, inside)) return {};
    if (cycles_through(gi, tail, inside)) return {};
    return tail;
  }

  // The compare that select n reads as its condition when that compare is in no group and n is
  // its only reader: take() brings it in with n.
  const ir::Node* select_of_loose_compare(const ir::Node* n) const {
    if (n->op().lowering.single != KOp::kSelect || n->results().size() != 1) return nullptr;
    const ir::Node* c = n->operand(0)->producer();
    if (!c || !compare(*c) || group_of_.contains(c) || !lowerable(*c) ||
        c->result()->users().size() != 1 || g_.is_output(c->result()))
      return nullptr;
    return c;
  }

  // Whether group hi computes scalars that nodes beyond groups hi and gi read too (a clip's scale,
  // which every update reads): merged into gi, each other reader would wait for gi's kernel, and
  // the schedule could run no update before the last of those that gi waits for.
  bool shares_scalars(int hi, int gi) const {
    if (!drafts_[hi].space.empty()) return false;
    for (const ir::Node* m : drafts_[hi].nodes)
      for (const ir::Value* r : m->results())
        for (const ir::Node* u : r->users()) {
          const auto it = group_of_.find(u);
          if (it == group_of_.end() || (it->second != hi && it->second != gi)) return true;
        }
    return false;
  }

  // Whether group d reads nothing but scalars: what it writes costs nothing to compute again.
  static bool stretches_scalars(const Draft& d) {
    const NodeSet members(d.nodes.begin(), d.nodes.end());
    for (const ir::Node* m : d.nodes)
      for (const ir::Value* v : m->operands())
        if (!members.contains(v->producer()) && v->rank() > 0) return false;
    return true;
  }

  static bool compare(const ir::Node& n) {
    const std::optional<KOp> k = n.op().lowering.single;
    return k && is_compare(*k);
  }

  // Elementwise arithmetic on f32 values with one instruction of its own: no compare (its bool
  // result only feeds a select) and no select (its condition must be a compare in the kernel).
  static bool plain(const ir::Node& n) {
    const std::optional<KOp> k = n.op().lowering.single;
    return k && n.results().size() == 1 && *k >= KOp::kNeg && *k <= KOp::kPow &&
           static_cast<int>(n.operands().size()) == kop_arity(*k);
  }

  // Lowers to no reduction: a group of these is one pass over the space.
  static bool one_pass(const ir::Node& n) {
    return n.op().lowering.kind == ir::FusionKind::kElementwise;
  }

  // Group gi's kernel so far, kept while it is one pass (clean_append extends it).
  void relower(int gi) {
    const Draft& d = drafts_[gi];
    lowered_[gi].reset();
    if (d.nodes.empty() || !std::all_of(d.nodes.begin(), d.nodes.end(),
                                        [](const ir::Node* m) { return one_pass(*m); }))
      return;
    lowered_[gi] = std::make_unique<KernelBuilder>(d.space, g_.shapes());
    for (const ir::Node* m : d.nodes) lowered_[gi]->add(*m);
    lowered_nodes_ += static_cast<int64_t>(d.nodes.size());
  }

  // cycles(d.nodes + tail) for an acyclic group d and a tail after all of it: a path that leaves
  // and comes back must end in the tail (d's own paths stay inside, and nothing of d reads the
  // tail), so it is one of the tail's outside producers depending on the group.
  bool cycles_through(int gi, const std::vector<const ir::Node*>& tail) const {
    return cycles_through(gi, tail, [&](const ir::Node* m) {
      const auto it = group_of_.find(m);
      return std::find(tail.begin(), tail.end(), m) != tail.end() ||
             (it != group_of_.end() && it->second == gi);
    });
  }
  template <class IsMember>
  bool cycles_through(int gi, const std::vector<const ir::Node*>& tail,
                      const IsMember& member) const {
    std::vector<const ir::Node*> outside;
    for (const ir::Node* m : tail)
      for (const ir::Value* v : m->operands())
        if (const ir::Node* p = v->producer(); p && !member(p)) outside.push_back(p);
    return reaches(std::move(outside), member, index_.at(drafts_[gi].nodes.front()));
  }

  // True when a node of `from` (outside a group) depends on a member, through the nodes at or after
  // the group's first. One walk for all of them, each node seen once: walking from each alone was
  // quadratic on long chains (a 30,000-relu backward).
  template <class IsMember>
  bool reaches(std::vector<const ir::Node*> todo, const IsMember& member, int first) const {
    const int walk = ++stamp_;
    while (!todo.empty()) {
      const ir::Node* n = todo.back();
      todo.pop_back();
      if (member(n)) return true;
      const int i = index_.at(n);
      if (i < first || seen_[i] == walk) continue;
      seen_[i] = walk;
      for (const ir::Value* v : n->operands())
        if (v->producer()) todo.push_back(v->producer());
    }
    return false;
  }

  const ir::Graph& g_;
  const FusionOptions& o_;
  const std::vector<ir::Bindings> worst_;  // where a row is longest
  std::unordered_map<const ir::Node*, int> index_;
  std::vector<int>
      outside_before_;  // per node index: nodes without a lowering before it, it included
  std::unordered_map<const ir::Node*, int> group_of_;
  std::vector<Draft> drafts_;
  std::vector<std::unique_ptr<KernelBuilder>> lowered_;  // per draft (see relower)
  int64_t lowered_nodes_ = 0;                            // FusionPlan::lowered
  // Per node index, the stamp of the last cycles() that made it a member and of the last walk that
  // saw it: sets without building one per check.
  mutable std::vector<int> member_, seen_;
  mutable int stamp_ = 0;
};

std::string shape_str(const std::vector<DimExpr>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + s[i].str();
  return r + "]";
}

}  // namespace

std::string FusionGroup::kind() const {
  const std::vector<Level> levels = kernel.levels();
  bool reduces = false;
  for (size_t i = 0; i < kernel.code.size(); ++i) {
    const Instr& in = kernel.code[i];
    reduces |= is_reduction(in.op);
    // Element work that reads a row value a reduction made: stitched.
    if (levels[i] == Level::kElement && in.op != KOp::kStore)
      for (int a : in.args)
        if (levels[a] == Level::kRow && kernel.code[a].op != KOp::kLoad) return "stitch";
  }
  return reduces ? "input" : "loop";
}

std::string FusionPlan::str() const {
  std::ostringstream s;
  for (size_t i = 0; i < groups.size(); ++i) {
    const FusionGroup& fg = groups[i];
    s << "kernel " << i << " (" << fg.kind() << ", " << shape_str(fg.space) << "):";
    for (size_t j = 0; j < fg.nodes.size(); ++j) {
      s << (j ? ", " : " ");
      for (size_t r = 0; r < fg.nodes[j]->results().size(); ++r)
        s << (r ? ", %" : "%") << fg.nodes[j]->result(r)->name();
      s << " = " << fg.nodes[j]->op().name;
    }
    s << " ->";
    for (const ir::Value* v : fg.outputs) s << " %" << v->name();
    s << "\n";
  }
  return s.str();
}

FusionPlan plan_fusion(const ir::Graph& g, const FusionOptions& options) {
  return Planner(g, options).run();
}

namespace {

// A node outside every group, or a group: what the rewritten graph holds one node for.
struct Unit {
  const ir::Node* node = nullptr;
  const FusionGroup* group = nullptr;
  int last = 0;  // graph position of its last node: the order among ready units
};

// The units in an order where each comes after the units it reads from, as close to the
// original order as that allows (a group cannot always sit where its first or last node was).
std::vector<Unit> ordered_units(const ir::Graph& g, const FusionPlan& plan) {
  std::map<const ir::Node*, int> unit_of;
  std::vector<Unit> units;
  const std::vector<ir::Node*> nodes = g.nodes();
  std::map<const ir::Node*, int> index;
  for (const ir::Node* n : nodes) index[n] = static_cast<int>(index.size());
  for (const FusionGroup& fg : plan.groups) {
    for (const ir::Node* n : fg.nodes) unit_of[n] = static_cast<int>(units.size());
    units.push_back({.group = &fg, .last = index.at(fg.nodes.back())});
  }
  for (const ir::Node* n : nodes) {
    if (unit_of.contains(n)) continue;
    unit_of[n] = static_cast<int>(units.size());
    units.push_back({.node = n, .last = index.at(n)});
  }
  std::vector<std::set<int>> users(units.size());
  std::vector<int> waiting(units.size(), 0);
  for (const ir::Node* n : nodes) {
    const int u = unit_of.at(n);
    for (const ir::Value* v : n->operands()) {
      if (!v->producer()) continue;
      const int p = unit_of.at(v->producer());
      if (p != u && users[p].insert(u).second) ++waiting[u];
    }
  }
  using Item = std::pair<int, int>;  // (last, unit)
  std::priority_queue<Item, std::vector<Item>, std::greater<>> ready;
  for (size_t u = 0; u < units.size(); ++u)
    if (waiting[u] == 0) ready.push({units[u].last, static_cast<int>(u)});
  std::vector<Unit> order;
  while (!ready.empty()) {
    const int u = ready.top().second;
    ready.pop();
    order.push_back(units[u]);
    for (int w : users[u])
      if (--waiting[w] == 0) ready.push({units[w].last, w});
  }
  if (order.size() != units.size())
    throw InvalidArgument("fusion: the groups form a cycle (a planner bug)");
  return order;
}

}  // namespace

std::unique_ptr<ir::Graph> apply_fusion(const ir::Graph& g, const FusionPlan& plan) {
  register_fused_op();
  auto out = std::make_unique<ir::Graph>(g.name());
  out->set_source(g.source());
  out->shapes() = g.shapes();
  std::map<const ir::Value*, ir::Value*> map;
  for (const ir::Value* a : g.arguments())
    map[a] = out->add_argument(a->name(), a->type(), a->role());
  auto operands = [&](const std::vector<const ir::Value*>& vs) {
    std::vector<ir::Value*> r;
    for (const ir::Value* v : vs) r.push_back(map.at(v));
    return r;
  };
  auto add = [&](const std::string& op, const std::vector<const ir::Value*>& in,
                 ir::Attributes attrs, const std::vector<const ir::Value*>& results,
                 ir::SourceLoc loc) {
    std::vector<std::string> names;
    std::vector<ir::TensorType> types;
    for (const ir::Value* v : results) names.push_back(v->name()), types.push_back(v->type());
    ir::Node* n = out->add_node(op, operands(in), std::move(attrs), names, types, loc);
    for (size_t i = 0; i < results.size(); ++i) map[results[i]] = n->result(static_cast<int>(i));
  };
  for (const Unit& u : ordered_units(g, plan)) {
    if (u.node) {
      add(u.node->op().name, {u.node->operands().begin(), u.node->operands().end()},
          u.node->attrs(), {u.node->results().begin(), u.node->results().end()}, u.node->loc());
    } else {
      std::string text;  // on one line in the printed graph (in one pass: kernels can be long)
      for (const char c : u.group->kernel.str()) c == '\n' ? text += "; " : text += c;
      add("fused", u.group->inputs, {{"kernel", text}, {"shape", u.group->space}}, u.group->outputs,
          u.group->nodes.front()->loc());
    }
  }
  for (const auto& [name, v] : g.outputs()) out->add_output(name, map.at(v));
  for (const auto& [arg, v] : g.updates()) out->add_update(map.at(arg), map.at(v));
  return out;
}

}  // namespace disc::jit
