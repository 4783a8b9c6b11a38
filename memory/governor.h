// The memory governor: everything disc decides about a step's memory, in one object.
// At construction (symbolic shapes): the op schedule, its liveness and the eviction candidates.
// Per new shape signature (concrete shapes, cached): the memory plan under the cap. The executor
// follows the plan; the CachingAllocator enforces the cap as a hard limit on reserved bytes.
//
//   memory::Governor gov(graph, {.cap = 512 << 20});
//   gov.check_cap(held_for);   // refuses a cap that some admissible step cannot keep
//   const memory::MemoryPlan& p = gov.plan(bindings, alloc.stats().live_bytes);
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "memory/governor_options.h"
#include "memory/memory_plan.h"
#include "memory/scheduler.h"

namespace disc::memory {

// The compile-time half of the governor, computed once per graph: the op order and its liveness
// (the pipeline's `schedule` stage) and the eviction candidates (its `remat` stage).
struct StepSchedule {
  ScheduleChoice schedule;
  Liveness live;
  std::vector<Candidate> candidates;  // none without a cap, or with remat and offload off
};

// The op order `options` asks for (memory-aware, or the graph's own) and its liveness.
StepSchedule schedule_ops(const ir::Graph& g, const GovernorOptions& options);
// The eviction candidates of `s`'s order, where `options` has a cap and a way to regenerate.
std::vector<Candidate> remat_candidates(const ir::Graph& g, const StepSchedule& s,
                                        const GovernorOptions& options);
// Both: the schedule with its candidates.
StepSchedule schedule_step(const ir::Graph& g, const GovernorOptions& options);

// The bytes allocated as a step at these bindings starts: parameters, optimizer state, inputs.
using HeldFor = std::function<int64_t(const ir::Bindings&)>;

class Governor {
 public:
  // The graph must outlive the governor.
  Governor(const ir::Graph& g, const GovernorOptions& options);
  // With the schedule and candidates computed already (engine/pipeline.h).
  Governor(const ir::Graph& g, const GovernorOptions& options, StepSchedule s);

  const Liveness& liveness() const { return live_; }
  const ScheduleChoice& schedule() const { return schedule_; }
  const std::vector<Candidate>& candidates() const { return candidates_; }
  const GovernorOptions& options() const { return options_; }

  // The shapes a cap must keep (ir::maximal_bindings): every symbol at its upper bound, or the
  // staircase that a limit such as a token budget `B*S <= 16384` leaves.
  const std::vector<ir::Bindings>& worst_shapes() const { return worst_; }

  // The plan for these bindings when `held_before_step` bytes are allocated as the step starts;
  // computed once per (bindings, bytes held) and cached. Where no plan of their own keeps the cap,
  // the plan of a worst shape at least as large in every symbol does: every size grows with every
  // symbol, so no step holds more than it does there. Throws OutOfMemory when neither keeps it.
  const MemoryPlan& plan(const ir::Bindings& b, int64_t held_before_step);

  // Refuses, before the first step, a cap that some worst shape cannot keep: the message names
  // the shape, its lower bound and the step that sets it, and the smallest cap that keeps every
  // worst shape. What it accepts, every admissible step keeps (see plan).
  void check_cap(const HeldFor& held) const;
  // Whether every worst shape keeps the cap: what check_cap accepts, without the search for a
  // message.
  bool keeps_cap(const HeldFor& held) const;
  // The smallest cap that keeps every worst shape: what check_cap accepts.
  int64_t smallest_cap(const HeldFor& held) const;
  // No plan under any cap holds less than this at `b`: every value a capped run could evict is
  // counted as evicted (uncapped, the governor has no candidates and its plans' bound is the peak).
  int64_t lower_bound(const ir::Bindings& b, int64_t held_before_step) const;
  // The smallest cap for which a plan exists (binary search over plan_memory).
  int64_t smallest_feasible_cap(const ir::Bindings& b, int64_t held_before_step) const;

  // For people: the schedule chosen (and the peaks of the orders tried), the candidates, and the
  // plan at `b` against the cap and the lower bound.
  std::string report(const ir::Bindings& b, int64_t held_before_step) const;

 private:
  PlanOptions plan_options(int64_t cap, bool cheapest = true) const;
  // True when some plan keeps `cap` at these bindings (the first variant that fits will do).
  bool feasible(const ir::Bindings& b, int64_t held_before_step, int64_t cap) const;

  const ir::Graph& g_;
  GovernorOptions options_;
  ScheduleChoice schedule_;
  Liveness live_;
  std::vector<Candidate> candidates_;
  std::vector<ir::Bindings> worst_;
  std::map<std::pair<ir::Bindings, int64_t>, MemoryPlan> plans_;
};

}  // namespace disc::memory
