// The list schedule (scheduler.h): each step runs the ready node with the largest gain, bytes
// freed minus bytes allocated, the first in graph order among equals.
//
// The pick is defined as a scan of the ready nodes in graph order that keeps the first node and
// moves on to each later node whose gain beats the best so far (symbolically, or by estimate where
// the comparison is unknown). That relation need not be transitive, so the scan's result is not
// simply "a largest gain": rescanning every ready node made the schedule quadratic in the number
// of layers (a ready set as wide as the model's parameters). Here the ready nodes sit in buckets,
// one per distinct gain, each sorted by graph order, and the scan jumps from the best so far to
// the first later node of any bucket that beats it: the same node, in time proportional to the
// buckets times the jumps. A node's gain changes only when one of its operands is left with it as
// its one reader, so only that node moves to another bucket.
#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <unordered_map>

#include "memory/scheduler.h"

namespace disc::memory {
namespace {

using ir::Node;
using ir::Value;

// Ready nodes (by graph index) grouped by gain; picks the node the scan in graph order picks.
class ReadySet {
 public:
  explicit ReadySet(const ir::ShapeGraph& shapes) : shapes_(shapes) {}

  void insert(int index, const ir::DimExpr& gain) {
    const int b = bucket_of(gain);
    if (!listed_[b]) {
      live_.push_back(b);
      listed_[b] = true;
    }
    members_[b].insert(index);
    at_[index] = b;
  }
  void erase(int index) {
    auto it = at_.find(index);
    members_[it->second].erase(index);
    at_.erase(it);
  }
  bool contains(int index) const { return at_.contains(index); }
  bool empty() const { return at_.empty(); }

  // The scan's pick: the first ready node, then repeatedly the first later node whose gain beats
  // the best so far.
  int pick(size_t& comparisons) {
    std::erase_if(live_, [&](int b) {  // the buckets that emptied since the last pick
      if (!members_[b].empty()) return false;
      listed_[b] = false;
      return true;
    });
    int best = -1, at = INT_MAX;
    for (int b : live_) {
      if (*members_[b].begin() < at) at = *members_[b].begin(), best = b;
    }
    for (;;) {
      int next = INT_MAX, next_bucket = -1;
      for (int b : live_) {
        ++comparisons;
        if (!beats(b, best)) continue;
        auto it = members_[b].upper_bound(at);
        if (it != members_[b].end() && *it < next) next = *it, next_bucket = b;
      }
      if (next_bucket < 0) return at;
      best = next_bucket, at = next;
    }
  }

 private:
  struct ByTerms {
    bool operator()(const ir::DimExpr& a, const ir::DimExpr& b) const {
      return a.terms() < b.terms();
    }
  };

  int bucket_of(const ir::DimExpr& gain) {
    auto [it, added] = ids_.emplace(gain, static_cast<int>(gains_.size()));
    if (added) {
      gains_.push_back(gain);
      members_.emplace_back();
      listed_.push_back(false);
    }
    return it->second;
  }

  // Whether gain a replaces gain b as the best: the comparison the scan makes, once per pair.
  bool beats(int a, int b) {
    auto [it, added] = beats_.emplace(std::pair(a, b), false);
    if (added) {
      const ir::Ordering o = shapes_.compare(gains_[a], gains_[b]);
      it->second =
          o == ir::Ordering::kGT || (o == ir::Ordering::kUnknown &&
                                     shapes_.estimate(gains_[a]) > shapes_.estimate(gains_[b]));
    }
    return it->second;
  }

  const ir::ShapeGraph& shapes_;
  std::map<ir::DimExpr, int, ByTerms> ids_;
  std::vector<ir::DimExpr> gains_;      // by bucket
  std::vector<std::set<int>> members_;  // by bucket: ready nodes' graph indices
  std::vector<int> live_;               // buckets that may hold nodes, each once
  std::vector<bool> listed_;            // by bucket: whether live_ holds it
  std::unordered_map<int, int> at_;     // ready node -> its bucket
  std::map<std::pair<int, int>, bool> beats_;
};

// The list scheduler's state: what each node waits for and each value's remaining readers.
class ListScheduler {
 public:
  explicit ListScheduler(const ir::Graph& g)
      : nodes_(g.nodes()), ready_(g.shapes()), waiting_(nodes_.size(), 0) {
    for (size_t i = 0; i < nodes_.size(); ++i) index_[nodes_[i]] = static_cast<int>(i);
    for (const auto& [name, v] : g.outputs()) kept_.insert(v);
    for (const auto& [arg, v] : g.updates()) kept_.insert(v);
    for (const Node* n : nodes_) {
      std::set<const Node*> producers;
      for (const Value* o : distinct_operands(n)) {
        if (!o->producer()) continue;
        ++readers_[o];
        producers.insert(o->producer());
      }
      waiting_[index_.at(n)] = static_cast<int>(producers.size());
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (waiting_[i] == 0) ready_.insert(static_cast<int>(i), gain(nodes_[i]));
    }
  }

  std::vector<const Node*> run(size_t& comparisons) {
    std::vector<const Node*> order;
    order.reserve(nodes_.size());
    done_.assign(nodes_.size(), false);
    while (!ready_.empty()) {
      const int best = ready_.pick(comparisons);
      ready_.erase(best);
      done_[best] = true;
      order.push_back(nodes_[best]);
      ran(nodes_[best]);
    }
    return order;
  }

 private:
  // After n ran: its users may be ready, and a value it read last but one is freed by the one
  // reader left, whose gain changes.
  void ran(const Node* n) {
    std::set<int> released, changed;
    for (const Value* r : n->results()) {
      for (const Node* u : r->users()) released.insert(index_.at(u));
    }
    for (const Value* o : distinct_operands(n)) {
      if (!o->producer() || --readers_.at(o) != 1) continue;
      for (const Node* u : o->users()) {
        if (!done_[index_.at(u)]) changed.insert(index_.at(u));
      }
    }
    for (int u : released) --waiting_[u];
    changed.insert(released.begin(), released.end());
    for (int u : changed) {
      if (ready_.contains(u)) ready_.erase(u);
      if (waiting_[u] == 0) ready_.insert(u, gain(nodes_[u]));
    }
  }

  static std::set<const Value*> distinct_operands(const Node* n) {
    return {n->operands().begin(), n->operands().end()};
  }

  // Bytes the node frees (operands it reads last) minus the bytes it allocates.
  ir::DimExpr gain(const Node* n) const {
    ir::DimExpr d;
    for (const Value* o : distinct_operands(n)) {
      if (o->producer() && readers_.at(o) == 1 && !kept_.contains(o)) d += o->type().bytes();
    }
    for (const Value* r : n->results()) d += -r->type().bytes();
    return d;
  }

  const std::vector<Node*> nodes_;
  ReadySet ready_;
  std::vector<int> waiting_;  // by index: producers not yet run
  std::vector<bool> done_;    // by index: ran
  std::unordered_map<const Node*, int> index_;
  std::unordered_map<const Value*, int> readers_;  // distinct nodes yet to read each value
  std::set<const Value*> kept_;  // outputs and update values: never freed by a reader
};

}  // namespace

std::vector<const Node*> list_schedule(const ir::Graph& g, size_t* comparisons) {
  size_t count = 0;
  auto order = ListScheduler(g).run(count);
  if (comparisons) *comparisons = count;
  return order;
}

}  // namespace disc::memory
