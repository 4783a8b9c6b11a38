#include "memory/scheduler.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "ir/binding.h"
#include "memory/liveness.h"

namespace disc::memory {
namespace {

using ir::Node;
using ir::Value;

// Distinct nodes reading each produced value.
std::map<const Value*, int> reader_counts(const ir::Graph& g) {
  std::map<const Value*, int> readers;
  for (const Node* n : g.nodes()) {
    for (const Value* o : std::set<const Value*>(n->operands().begin(), n->operands().end())) {
      if (o->producer()) ++readers[o];
    }
  }
  return readers;
}

// Values that stay after their readers: outputs, and values copied into arguments by updates.
std::set<const Value*> kept_values(const ir::Graph& g) {
  std::set<const Value*> kept;
  for (const auto& [name, v] : g.outputs()) kept.insert(v);
  for (const auto& [arg, v] : g.updates()) kept.insert(v);
  return kept;
}

}  // namespace

std::vector<const Node*> list_schedule(const ir::Graph& g) {
  const auto nodes = g.nodes();
  std::map<const Node*, int> index, waiting;
  for (size_t i = 0; i < nodes.size(); ++i) index[nodes[i]] = static_cast<int>(i);
  auto readers = reader_counts(g);
  const auto kept = kept_values(g);
  auto by_index = [&](const Node* a, const Node* b) { return index.at(a) < index.at(b); };
  std::set<const Node*, decltype(by_index)> ready(by_index);
  for (const Node* n : nodes) {
    std::set<const Node*> producers;
    for (const Value* o : n->operands()) {
      if (o->producer()) producers.insert(o->producer());
    }
    waiting[n] = static_cast<int>(producers.size());
    if (producers.empty()) ready.insert(n);
  }
  // Bytes the node frees (operands it reads last) minus the bytes it allocates.
  auto gain = [&](const Node* n) {
    ir::DimExpr d;
    for (const Value* o : std::set<const Value*>(n->operands().begin(), n->operands().end())) {
      if (o->producer() && readers.at(o) == 1 && !kept.contains(o)) d += o->type().bytes();
    }
    for (const Value* r : n->results()) d += -r->type().bytes();
    return d;
  };
  const ir::ShapeGraph& shapes = g.shapes();
  std::vector<const Node*> order;
  while (!ready.empty()) {
    const Node* best = *ready.begin();
    ir::DimExpr best_gain = gain(best);
    for (auto it = std::next(ready.begin()); it != ready.end(); ++it) {
      ir::DimExpr d = gain(*it);
      ir::Ordering o = shapes.compare(d, best_gain);
      if (o == ir::Ordering::kGT ||
          (o == ir::Ordering::kUnknown && shapes.estimate(d) > shapes.estimate(best_gain))) {
        best = *it, best_gain = d;
      }
    }
    ready.erase(best);
    order.push_back(best);
    std::set<const Node*> released;
    for (const Value* o :
         std::set<const Value*>(best->operands().begin(), best->operands().end())) {
      if (o->producer()) --readers.at(o);
    }
    for (const Value* r : best->results()) {
      for (const Node* u : r->users()) released.insert(u);
    }
    for (const Node* u : released) {
      if (--waiting.at(u) == 0) ready.insert(u);
    }
  }
  return order;
}

std::vector<const Node*> depth_first_schedule(const ir::Graph& g) {
  std::vector<const Node*> order;
  std::set<const Node*> done;
  // Iterative post-order, so that deep graphs cannot overflow the stack.
  auto visit = [&](const Node* root) {
    std::vector<std::pair<const Node*, size_t>> stack = {{root, 0}};
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (done.contains(n)) {
        stack.pop_back();
        continue;
      }
      if (next < n->operands().size()) {
        const Value* o = n->operands()[next++];
        if (o->producer() && !done.contains(o->producer())) stack.push_back({o->producer(), 0});
        continue;
      }
      done.insert(n);
      order.push_back(n);
      stack.pop_back();
    }
  };
  for (const auto& [name, v] : g.outputs()) {
    if (v->producer()) visit(v->producer());
  }
  for (const auto& [arg, v] : g.updates()) {
    if (v->producer()) visit(v->producer());
  }
  for (const Node* n : g.nodes()) visit(n);  // nodes that feed no output still run
  return order;
}

namespace {

// n and the nodes whose results only they read (a gradient's square before its sum): what moves
// with n.
std::set<const Node*> private_cone(const ir::Graph& g, const Node* n) {
  std::set<const Node*> cone = {n};
  std::vector<const Node*> todo = {n};
  auto read_in_cone = [&](const Value* r) {
    return !g.is_output(r) && std::all_of(r->users().begin(), r->users().end(),
                                          [&](const Node* u) { return cone.contains(u); });
  };
  while (!todo.empty()) {
    const Node* m = todo.back();
    todo.pop_back();
    for (const Value* o : m->operands()) {
      const Node* p = o->producer();
      if (!p || cone.contains(p) ||
          !std::all_of(p->results().begin(), p->results().end(), read_in_cone))
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

}  // namespace

std::vector<const Node*> updates_early_schedule(const ir::Graph& g) {
  std::map<const Value*, const Value*> argument_of;  // update value -> the argument it updates
  for (const auto& [arg, v] : g.updates()) argument_of[v] = arg;
  auto small = [&](const Value* r) { return r->type().rank() == 0 || argument_of.contains(r); };
  const auto nodes = g.nodes();
  std::vector<const Node*> order(nodes.begin(), nodes.end());
  for (const Node* n : nodes) {
    if (!std::all_of(n->results().begin(), n->results().end(), small)) continue;
    const std::set<const Node*> cone = private_cone(g, n);
    const std::set<const Node*> after = cone_follows(cone, n, argument_of);
    // The cone, in its order, goes right after the last node it must follow.
    std::vector<const Node*> moved, rest;
    size_t to = 0, was = 0;
    for (const Node* m : order) {
      if (m == n) was = moved.size() + rest.size();
      if (cone.contains(m)) {
        moved.push_back(m);
      } else {
        rest.push_back(m);
        if (after.contains(m)) to = rest.size();
      }
    }
    if (to + moved.size() - 1 >= was) continue;  // n would not move up
    rest.insert(rest.begin() + static_cast<std::ptrdiff_t>(to), moved.begin(), moved.end());
    order = std::move(rest);
  }
  return order;
}

ScheduleChoice choose_schedule(const ir::Graph& g) {
  const auto original = g.nodes();
  std::vector<std::pair<std::string, std::vector<const Node*>>> orders = {
      {"original", {original.begin(), original.end()}},
      {"list", list_schedule(g)},
      {"depth-first", depth_first_schedule(g)},
      {"updates-early", updates_early_schedule(g)},
  };
  const auto samples = ir::sample_bindings(g);
  ScheduleChoice choice;
  int64_t best_total = -1;
  for (auto& [method, order] : orders) {
    Liveness l = analyze_liveness(g, order);
    int64_t total = 0, largest = 0;
    for (const auto& b : samples) {
      auto curve = live_curve(l, b);
      const int64_t peak = curve.empty() ? 0 : *std::max_element(curve.begin(), curve.end());
      total += peak;
      largest = std::max(largest, peak);
    }
    choice.tried.push_back({method, largest});
    if (best_total < 0 || total < best_total) {
      best_total = total;
      choice.order = std::move(order);
      choice.method = method;
    }
  }
  return choice;
}

}  // namespace disc::memory
