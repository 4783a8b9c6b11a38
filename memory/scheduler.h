// Chooses the order in which a step's nodes run so that the peak of live bytes is low.
// Needs: a verified graph. Keeps: every dependency (an update is applied after its argument's
// last reader whatever the order, see liveness.h), so every order computes the same numbers.
//
// Four orders are tried and the one with the lowest simulated peak over sample shapes is kept
// (XLA does the same): the graph's own order, a list schedule driven by bytes freed minus bytes
// allocated (compared symbolically, estimated from hints only when the comparison is unknown),
// a depth-first order from the outputs, and the graph's order with the optimizer's work moved up
// (updates-early: each node whose results are scalars or update values runs as soon as its
// operands are made and, for an update, the argument's other readers have run; a parameter's
// AdamW step then follows its gradient, which dies there, and writes the parameter in place
// instead of the gradient being held to the end of the backward). The sample shapes are
// ir::sample_bindings.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "memory/liveness.h"

namespace disc::memory {

struct ScheduleChoice {
  std::vector<const ir::Node*> order;
  std::string method;  // "original", "list", "depth-first" or "updates-early"
  // Each order tried, with its simulated peak (largest over the samples) of produced values.
  std::vector<std::pair<std::string, int64_t>> tried;
};

// `comparisons`, where given, counts the gain comparisons the list scheduler made (its work).
std::vector<const ir::Node*> list_schedule(const ir::Graph& g, size_t* comparisons = nullptr);
std::vector<const ir::Node*> depth_first_schedule(const ir::Graph& g);
std::vector<const ir::Node*> updates_early_schedule(const ir::Graph& g);

// `order` with each collective (all_reduce) moved up to right after the nodes it reads, and the
// readers of collective k's results held back, where collective k+1 does not need them, until
// collective k+1 has started: each collective then runs on the communicator's thread beside the
// nodes after it (engine/executor.h), the backward beside the gradients' buckets. Without
// collectives, `order` as it is. choose_schedule applies it to every order it tries.
std::vector<const ir::Node*> overlap_collectives(std::vector<const ir::Node*> order);

// `chosen_live`, where given, receives the liveness of the order chosen (computed to compare).
ScheduleChoice choose_schedule(const ir::Graph& g, Liveness* chosen_live = nullptr);

}  // namespace disc::memory
