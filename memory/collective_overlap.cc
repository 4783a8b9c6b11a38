// Collectives overlapped with the nodes around them (scheduler.h): the order is walked again as a
// list schedule that prefers, among the nodes whose operands are made, a collective first, then
// the first in the given order that is not held back, and takes a held-back node only when
// nothing else can run. A node is held back while it reads the results of collective k and
// collective k+1 has not started, unless collective k+1 needs it: the step then waits for bucket
// k only once bucket k+1 is on its way, and the memory that holds a bucket a little longer is in
// the order the governor plans with.
#include <algorithm>
#include <climits>
#include <functional>
#include <queue>
#include <set>
#include <unordered_map>

#include "memory/scheduler.h"

namespace disc::memory {
namespace {

using ir::Node;

bool is_collective(const Node* n) {
  return n->op().category == ir::OpCategory::kCollective;
}

}  // namespace

std::vector<const Node*> overlap_collectives(std::vector<const Node*> order) {
  const int n = static_cast<int>(order.size());
  std::unordered_map<const Node*, int> pos;
  std::vector<int> collective(n, -1);  // each collective's place among the collectives
  int collectives = 0;
  for (int i = 0; i < n; ++i) {
    pos[order[i]] = i;
    if (is_collective(order[i])) collective[i] = collectives++;
  }
  if (collectives == 0) return order;

  // The nodes each node's results feed (each once), and how many distinct producers each waits for.
  std::vector<std::vector<int>> feeds(n);
  std::vector<int> missing(n, 0);
  for (int i = 0; i < n; ++i) {
    std::set<int> producers;
    for (const ir::Value* v : order[i]->operands())
      if (v->producer()) producers.insert(pos.at(v->producer()));
    for (int p : producers) feeds[p].push_back(i);
    missing[i] = static_cast<int>(producers.size());
  }
  // The first collective that needs each node (INT_MAX: none), from the back.
  std::vector<int> first_needed_by(n, INT_MAX);
  for (int i = n - 1; i >= 0; --i)
    for (int d : feeds[i])
      first_needed_by[i] =
          std::min(first_needed_by[i], collective[d] >= 0 ? collective[d] : first_needed_by[d]);
  // How many collectives must have started before each node, preferably.
  std::vector<int> wants(n, 0);
  for (int i = 0; i < n; ++i) {
    const int k = collective[i];
    if (k < 0 || k + 1 == collectives) continue;
    for (int d : feeds[i])
      if (first_needed_by[d] != k + 1) wants[d] = std::max(wants[d], k + 2);
  }

  using Queue = std::priority_queue<int, std::vector<int>, std::greater<>>;
  Queue ready_collectives, ready;
  std::set<int> held;
  int started = 0;
  auto make_ready = [&](int i) {
    if (collective[i] >= 0) {
      ready_collectives.push(i);
    } else if (wants[i] > started) {
      held.insert(i);
    } else {
      ready.push(i);
    }
  };
  for (int i = 0; i < n; ++i)
    if (missing[i] == 0) make_ready(i);
  std::vector<const Node*> out;
  out.reserve(order.size());
  auto pop = [](Queue& q) {
    const int i = q.top();
    q.pop();
    return i;
  };
  while (static_cast<int>(out.size()) < n) {
    int i;
    if (!ready_collectives.empty()) {
      i = pop(ready_collectives);
      ++started;
      for (auto it = held.begin(); it != held.end();) {
        if (wants[*it] > started) {
          ++it;
          continue;
        }
        ready.push(*it);
        it = held.erase(it);
      }
    } else if (!ready.empty()) {
      i = pop(ready);
    } else {
      i = *held.begin();  // nothing else can run
      held.erase(held.begin());
    }
    out.push_back(order[i]);
    for (int d : feeds[i])
      if (--missing[d] == 0) make_ready(d);
  }
  return out;
}

}  // namespace disc::memory
