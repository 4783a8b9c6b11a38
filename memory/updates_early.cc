// The updates-early order (scheduler.h): the graph's order with each node whose results are
// scalars or update values moved up, with the nodes only it reads, to right after the last node
// it must follow.
//
// Each move used to rebuild the whole order to find where the node stood and where it could go,
// which made the order quadratic in the number of parameters. The order is now a linked list whose
// labels compare as positions: a move costs the size of what moves and of what it must follow.
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "memory/scheduler.h"

namespace disc::memory {
namespace {

using ir::Node;
using ir::Value;

// An order of nodes that can move a run of nodes elsewhere and compare two nodes' positions in
// constant time (order maintenance with spaced labels, relabelled when a gap runs out).
class LinkedOrder {
 public:
  explicit LinkedOrder(const std::vector<Node*>& nodes)
      : nodes_(nodes.begin(), nodes.end()), links_(nodes.size() + 1) {
    const int n = static_cast<int>(nodes.size());
    for (int i = 0; i <= n; ++i)
      links_[i] = {.prev = i == 0 ? n : i - 1, .next = i == n ? 0 : i + 1};
    for (int i = 0; i < n; ++i) index_[nodes_[i]] = i;
    relabel();
  }

  bool before(const Node* a, const Node* b) const { return label(a) < label(b); }
  // The node after `n`; after nullptr, the first. nullptr past the last.
  const Node* next(const Node* n) const {
    const int i = links_[n ? index_.at(n) : head()].next;
    return i == head() ? nullptr : nodes_[i];
  }

  // Moves `run` (nodes in their current order, `pos` not among them) to right after `pos`
  // (nullptr: to the front), keeping their order.
  void move_after(const Node* pos, const std::vector<const Node*>& run) {
    for (const Node* m : run) unlink(index_.at(m));
    const int at = pos ? index_.at(pos) : head();
    if (gap_after(at) <= static_cast<int64_t>(run.size())) relabel();
    const int64_t lo = links_[at].label,
                  step = gap_after(at) / static_cast<int64_t>(run.size() + 1);
    int prev = at;
    for (size_t k = 0; k < run.size(); ++k) {
      const int i = index_.at(run[k]);
      link_after(prev, i);
      links_[i].label = lo + step * static_cast<int64_t>(k + 1);
      prev = i;
    }
  }

  std::vector<const Node*> order() const {
    std::vector<const Node*> out;
    for (int i = links_[head()].next; i != head(); i = links_[i].next) out.push_back(nodes_[i]);
    return out;
  }

 private:
  // A fresh gap halves with each move into it: about 31 moves before everything is relabelled.
  static constexpr int64_t kSpacing = int64_t{1} << 31;

  struct Link {
    int prev = 0, next = 0;
    int64_t label = 0;
  };

  int head() const { return static_cast<int>(nodes_.size()); }  // the sentinel, label 0
  int64_t label(const Node* n) const { return links_[index_.at(n)].label; }
  // Labels free between i and the node after it (the end has a spacing's worth).
  int64_t gap_after(int i) const {
    const int j = links_[i].next;
    return (j == head() ? links_[i].label + kSpacing : links_[j].label) - links_[i].label;
  }
  void unlink(int i) {
    links_[links_[i].prev].next = links_[i].next;
    links_[links_[i].next].prev = links_[i].prev;
  }
  void link_after(int at, int i) {
    links_[i].prev = at;
    links_[i].next = links_[at].next;
    links_[links_[at].next].prev = i;
    links_[at].next = i;
  }
  void relabel() {
    int64_t l = 0;
    for (int i = links_[head()].next; i != head(); i = links_[i].next)
      links_[i].label = l += kSpacing;
  }

  std::vector<const Node*> nodes_;
  std::vector<Link>
      links_;  // by index; the last is the sentinel before the first and after the last
  std::unordered_map<const Node*, int> index_;
};

// n and the nodes whose results only they read (a gradient's square before its sum): what moves
// with n. `kept`: outputs and update values, which stay after their readers. Nodes of scalars
// move on their own, earlier in the scan, and are no part of a later node's cone: the next term of
// a sum read only by the following one would otherwise drag every earlier term, and the gradients
// they read, down to the latest term's place.
std::set<const Node*> private_cone(const std::set<const Value*>& kept, const Node* n) {
  std::set<const Node*> cone = {n};
  std::vector<const Node*> todo = {n};
  auto read_in_cone = [&](const Value* r) {
    return !kept.contains(r) && std::all_of(r->users().begin(), r->users().end(),
                                            [&](const Node* u) { return cone.contains(u); });
  };
  while (!todo.empty()) {
    const Node* m = todo.back();
    todo.pop_back();
    for (const Value* o : m->operands()) {
      const Node* p = o->producer();
      if (!p || cone.contains(p) ||
          !std::all_of(p->results().begin(), p->results().end(), read_in_cone) ||
          std::all_of(p->results().begin(), p->results().end(),
                      [](const Value* r) { return r->type().rank() == 0; }))
        continue;
      cone.insert(p);
      todo.push_back(p);
    }
  }
  return cone;
}

// What the cone must follow: the producers of what it reads; for an update, the argument's
// readers and the readers of their results, so that those results can still be recomputed from
// the argument (remat.h) wherever they are read.
std::set<const Node*> cone_follows(const std::set<const Node*>& cone, const Node* n,
                                   const std::map<const Value*, const Value*>& argument_of) {
  std::set<const Node*> after;
  for (const Node* m : cone) {
    for (const Value* o : m->operands()) {
      if (o->producer()) after.insert(o->producer());
    }
  }
  for (const Value* r : n->results()) {
    auto it = argument_of.find(r);
    if (it == argument_of.end()) continue;
    for (const Node* reader : it->second->users()) {
      after.insert(reader);
      for (const Value* made : reader->results())
        after.insert(made->users().begin(), made->users().end());
    }
  }
  for (const Node* m : cone) after.erase(m);
  return after;
}

// Whether the cone of n, put right after `last` (nullptr: at the front), moves n up: some node
// outside the cone stands between `last` and n. The cone's other nodes all precede n.
bool moves_up(const LinkedOrder& order, const std::set<const Node*>& cone, const Node* last,
              const Node* n) {
  if (last && !order.before(last, n)) return false;
  const Node* m = order.next(last);
  while (m != n && cone.contains(m)) m = order.next(m);
  return m != n;
}

}  // namespace

std::vector<const Node*> updates_early_schedule(const ir::Graph& g) {
  std::map<const Value*, const Value*> argument_of;  // update value -> the argument it updates
  std::set<const Value*> kept;
  for (const auto& [name, v] : g.outputs()) kept.insert(v);
  for (const auto& [arg, v] : g.updates()) argument_of[v] = arg, kept.insert(v);
  auto small = [&](const Value* r) { return r->type().rank() == 0 || argument_of.contains(r); };
  const auto nodes = g.nodes();
  LinkedOrder order(nodes);
  for (const Node* n : nodes) {
    if (!std::all_of(n->results().begin(), n->results().end(), small)) continue;
    const std::set<const Node*> cone = private_cone(kept, n);
    const Node* last = nullptr;  // the last node the cone must follow
    for (const Node* m : cone_follows(cone, n, argument_of)) {
      if (!last || order.before(last, m)) last = m;
    }
    if (!moves_up(order, cone, last, n)) continue;
    std::vector<const Node*> run(cone.begin(), cone.end());
    std::sort(run.begin(), run.end(),
              [&](const Node* a, const Node* b) { return order.before(a, b); });
    order.move_after(last, run);
  }
  return order.order();
}

}  // namespace disc::memory
