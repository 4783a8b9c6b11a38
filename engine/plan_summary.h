// What `disc-train plan` answers first about a Trainer's step at one shape: the peak without and
// with the governor's evictions under the cap, the lower bound a cap could reach and, where the
// governor may evict, the smallest cap its planner reaches; and the same over every admissible
// batch (the worst shapes), which is what a run's cap check decides on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/trainer.h"
#include "ir/binding.h"

namespace disc::engine {

struct PlanSummary {
  std::string schedule;  // how the order was chosen
  int64_t held_before_step = 0, cap = 0, lower_bound = 0;
  // At this shape: whether a plan keeps the cap, its peaks and evictions, or why not.
  bool fits_at_shape = false;
  int64_t peak = 0, planned_peak = 0;
  size_t evictions = 0;
  std::string error;
  std::optional<int64_t> smallest_cap;  // where the governor may evict
  // Over every admissible batch: empty `every_shape_error` when the cap keeps them all.
  size_t worst_shapes = 0;
  int64_t every_shape_lower_bound = 0;
  std::optional<int64_t> every_shape_smallest_cap;
  std::string every_shape_error;
};

PlanSummary summarize_plan(Trainer& trainer, const ir::Bindings& b);

// The governor's own report at `b` (schedule, candidates, plan) and the step's execution order,
// as the Trainer holds them: text lines for `disc-train plan`.
std::string governor_report(Trainer& trainer, const ir::Bindings& b);
std::vector<const ir::Node*> execution_order(Trainer& trainer);

}  // namespace disc::engine
