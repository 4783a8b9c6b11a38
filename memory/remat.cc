#include "memory/remat.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

namespace disc::memory {
namespace {

using ir::Node;
using ir::Value;

// Each node's cost, computed once: a fused node with thousands of results is in as many chains.
using NodeCosts = std::unordered_map<const Node*, ir::OpCost>;

std::vector<ir::TensorType> types_of(const std::vector<Value*>& vs) {
  std::vector<ir::TensorType> ts;
  for (const Value* v : vs) ts.push_back(v->type());
  return ts;
}

// The nodes to rerun so that `v` exists again just before step r, or nothing when that takes
// more than kMaxChain nodes or a node that must not run twice.
std::optional<Candidate> recompute_chain(const Liveness& l, const std::set<const Node*>& never,
                                         const Value* v, int r, NodeCosts& costs) {
  Candidate c;
  std::set<const Value*> seen;
  // Post-order over the producers that are needed, so that each runs after its operands. Each
  // level deeper adds a node to the chain, so past kMaxChain levels it can only fail: the
  // recursion stops there, however long the graph's chains.
  std::function<bool(const Value*, int)> need = [&](const Value* x, int depth) {
    if (!seen.insert(x).second) return true;
    const Node* p = x->producer();
    if (never.contains(p) || static_cast<int>(c.recompute.size()) >= kMaxChain || depth > kMaxChain)
      return false;
    for (const Value* o : p->operands()) {
      if (!o->producer()) {  // an argument: held all step, but an update may overwrite it
        auto it = l.overwritten_after.find(o);
        if (it != l.overwritten_after.end() && it->second < r) return false;
        continue;
      }
      if (o != v && l.lives.at(o).def < r && l.live_at(o, r)) {  // alive then anyway
        if (std::find(c.leaves.begin(), c.leaves.end(), o) == c.leaves.end()) c.leaves.push_back(o);
        continue;
      }
      if (o == v || !need(o, depth + 1)) return false;
    }
    if (std::find(c.recompute.begin(), c.recompute.end(), p) == c.recompute.end())
      c.recompute.push_back(p);
    return true;
  };
  if (!need(v, 0) || static_cast<int>(c.recompute.size()) > kMaxChain) return std::nullopt;
  c.drop_after.resize(c.recompute.size());
  for (size_t m = 0; m < c.recompute.size(); ++m) {
    for (const Value* r : c.recompute[m]->results()) {
      if (r == v) continue;
      size_t last = m;
      for (size_t k = m + 1; k < c.recompute.size(); ++k) {
        const auto& ops = c.recompute[k]->operands();
        if (std::find(ops.begin(), ops.end(), r) != ops.end()) last = k;
      }
      c.drop_after[last].push_back(r);
    }
  }
  for (const Node* n : c.recompute) {
    auto [it, fresh] = costs.try_emplace(n);
    if (fresh)
      it->second = n->op().cost_of(types_of(n->operands()), types_of(n->results()), n->attrs());
    c.recompute_flops += it->second.flops;
    c.recompute_bytes += it->second.bytes;
  }
  return c;
}

}  // namespace

std::vector<Candidate> find_candidates(const ir::Graph& g, const Liveness& l, int min_gap) {
  std::set<const Value*> kept;
  std::set<const Node*> never;  // nodes whose results feed updates: the optimizer's own work
  for (const auto& [name, v] : g.outputs()) kept.insert(v);
  for (const auto& [arg, v] : g.updates()) kept.insert(v), never.insert(v->producer());
  // A collective recomputed on one rank would wait for the others forever.
  for (const Node* n : l.order)
    if (n->op().category == ir::OpCategory::kCollective) never.insert(n);
  std::vector<Candidate> out;
  NodeCosts costs;
  for (const Node* n : l.order) {
    for (const Value* v : n->results()) {
      if (kept.contains(v)) continue;
      const Life& life = l.lives.at(v);
      int from = life.def;
      for (int use : life.uses) {
        if (use - from >= min_gap) {
          Candidate c = recompute_chain(l, never, v, use, costs).value_or(Candidate{});
          c.value = v, c.evict_after = from, c.regen_before = use;
          out.push_back(std::move(c));
        }
        from = use;
      }
    }
  }
  return out;
}

std::string print_candidates(const std::vector<Candidate>& cs) {
  std::ostringstream os;
  for (const Candidate& c : cs) {
    os << "%" << c.value->name() << " [" << c.evict_after << " -> " << c.regen_before << "] "
       << c.value->type().bytes().str() << " bytes, ";
    if (c.recompute.empty()) {
      os << "reload only";
    } else {
      os << "recompute";
      for (size_t i = 0; i < c.recompute.size(); ++i) {
        os << (i ? ", %" : " %") << c.recompute[i]->result()->name();
      }
      os << " (flops " << c.recompute_flops.str() << ")";
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace disc::memory
