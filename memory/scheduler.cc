#include "memory/scheduler.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "ir/binding.h"
#include "memory/liveness.h"

namespace disc::memory {
namespace {

using ir::Node;
using ir::Value;

}  // namespace

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

ScheduleChoice choose_schedule(const ir::Graph& g, Liveness* chosen_live) {
  const auto original = g.nodes();
  std::vector<std::pair<std::string, std::vector<const Node*>>> orders = {
      {"original", {original.begin(), original.end()}},
      {"list", list_schedule(g)},
      {"depth-first", depth_first_schedule(g)},
      {"updates-early", updates_early_schedule(g)},
  };
  const auto samples = ir::sample_bindings(g);
  // Each value's bytes at each sample, computed once for all the orders (a product of dims).
  std::vector<std::unordered_map<const Value*, int64_t>> bytes(samples.size());
  ScheduleChoice choice;
  int64_t best_total = -1;
  for (auto& [method, order] : orders) {
    order = overlap_collectives(std::move(order));
    Liveness l = analyze_liveness(g, order);
    int64_t total = 0, largest = 0;
    for (size_t s = 0; s < samples.size(); ++s) {
      auto curve = live_curve(l, [&](const Value& v) {
        auto [it, added] = bytes[s].try_emplace(&v, 0);
        if (added) it->second = concrete_bytes(v, samples[s]);
        return it->second;
      });
      const int64_t peak = curve.empty() ? 0 : *std::max_element(curve.begin(), curve.end());
      total += peak;
      largest = std::max(largest, peak);
    }
    choice.tried.push_back({method, largest});
    if (best_total < 0 || total < best_total) {
      best_total = total;
      choice.order = std::move(order);
      choice.method = method;
      if (chosen_live) *chosen_live = std::move(l);
    }
  }
  return choice;
}

}  // namespace disc::memory
