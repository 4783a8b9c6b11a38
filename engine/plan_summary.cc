#include "engine/plan_summary.h"

#include <algorithm>

#include "base/error.h"
#include "memory/governor.h"

namespace disc::engine {

PlanSummary summarize_plan(Trainer& trainer, const ir::Bindings& b) {
  memory::Governor& gov = trainer.governor();
  PlanSummary s{.schedule = gov.schedule().method,
                .held_before_step = trainer.bytes_held_for(b),
                .cap = trainer.memory_cap()};
  s.lower_bound = gov.lower_bound(b, s.held_before_step);
  const memory::HeldFor held_for = [&](const ir::Bindings& w) { return trainer.bytes_held_for(w); };
  for (const ir::Bindings& w : gov.worst_shapes())
    s.every_shape_lower_bound =
        std::max(s.every_shape_lower_bound, gov.lower_bound(w, held_for(w)));
  s.worst_shapes = gov.worst_shapes().size();
  if (!gov.candidates().empty()) s.every_shape_smallest_cap = gov.smallest_cap(held_for);
  try {
    const memory::MemoryPlan& p = gov.plan(b, s.held_before_step);
    s.fits_at_shape = true;
    s.peak = p.unplanned_peak, s.planned_peak = p.peak, s.evictions = p.evictions.size();
  } catch (const OutOfMemory& e) {
    s.error = e.what();
  }
  try {
    gov.check_cap(held_for);
  } catch (const OutOfMemory& e) {
    s.every_shape_error = e.what();
  }
  if (!gov.candidates().empty()) s.smallest_cap = gov.smallest_feasible_cap(b, s.held_before_step);
  return s;
}

std::string governor_report(Trainer& trainer, const ir::Bindings& b) {
  return trainer.governor().report(b, trainer.bytes_held_for(b));
}

std::vector<const ir::Node*> execution_order(Trainer& trainer) {
  const auto& order = trainer.governor().liveness().order;
  return {order.begin(), order.end()};
}

}  // namespace disc::engine
