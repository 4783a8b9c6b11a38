#include "memory/governor.h"

#include <algorithm>
#include <cstdio>

#include "base/bytes.h"
#include "base/error.h"
#include "ir/binding.h"
#include "ir/worst_case.h"

namespace disc::memory {
namespace {

// Plans are small, but a run over many shapes should not keep every one of them.
constexpr size_t kMaxCachedPlans = 512;

}  // namespace

StepSchedule schedule_ops(const ir::Graph& g, const GovernorOptions& options) {
  StepSchedule s;
  if (options.schedule) {
    s.schedule = choose_schedule(g, &s.live);
    return s;
  }
  auto nodes = g.nodes();
  s.schedule = {{nodes.begin(), nodes.end()}, "original", {}};
  s.live = analyze_liveness(g, s.schedule.order);
  return s;
}

std::vector<Candidate> remat_candidates(const ir::Graph& g, const StepSchedule& s,
                                        const GovernorOptions& options) {
  if (options.cap <= 0 || !(options.remat || options.offload)) return {};
  return find_candidates(g, s.live);
}

StepSchedule schedule_step(const ir::Graph& g, const GovernorOptions& options) {
  StepSchedule s = schedule_ops(g, options);
  s.candidates = remat_candidates(g, s, options);
  return s;
}

Governor::Governor(const ir::Graph& g, const GovernorOptions& options)
    : Governor(g, options, schedule_step(g, options)) {}

Governor::Governor(const ir::Graph& g, const GovernorOptions& options, StepSchedule s)
    : g_(g),
      options_(options),
      schedule_(std::move(s.schedule)),
      live_(std::move(s.live)),
      candidates_(std::move(s.candidates)),
      worst_(ir::maximal_bindings(g.shapes())) {}

PlanOptions Governor::plan_options(int64_t cap, bool cheapest) const {
  return {.cap = cap, .cheapest = cheapest, .remat = options_.remat, .offload = options_.offload};
}

bool Governor::feasible(const ir::Bindings& b, int64_t held_before_step, int64_t cap) const {
  try {
    plan_memory(g_, live_, candidates_, b, held_before_step, plan_options(cap, /*cheapest=*/false));
    return true;
  } catch (const OutOfMemory&) {
    return false;
  }
}

const MemoryPlan& Governor::plan(const ir::Bindings& b, int64_t held_before_step) {
  auto key = std::pair(b, held_before_step);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  if (plans_.size() >= kMaxCachedPlans) plans_.clear();
  const PlanOptions options = plan_options(options_.cap);
  try {
    return plans_.emplace(key, plan_memory(g_, live_, candidates_, b, held_before_step, options))
        .first->second;
  } catch (const OutOfMemory&) {
    // The greedy planner is not monotone: a smaller shape can miss a plan that a larger one finds.
    // The larger one's evictions keep the smaller one too (a plan names values, not sizes).
    for (const ir::Bindings& w : worst_) {
      if (w == b || !ir::dominated_by(g_.shapes(), b, w)) continue;
      try {
        return plans_
            .emplace(key, plan_memory(g_, live_, candidates_, w, held_before_step, options))
            .first->second;
      } catch (const OutOfMemory&) {
      }
    }
    throw;
  }
}

int64_t Governor::smallest_feasible_cap(const ir::Bindings& b, int64_t held_before_step) const {
  const MemoryPlan free_run =
      plan_memory(g_, live_, candidates_, b, held_before_step, plan_options(0));
  auto fits = [&](int64_t cap) { return feasible(b, held_before_step, cap); };
  if (fits(free_run.lower_bound)) return free_run.lower_bound;
  int64_t lo = free_run.lower_bound, hi = free_run.unplanned_peak;  // lo fails, hi fits
  while (hi - lo > std::max<int64_t>(hi / 1000, 64)) {  // to 0.1%: the plan is a heuristic anyway
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? hi : lo) = mid;
  }
  return hi;
}

void Governor::check_cap(const HeldFor& held) const {
  const int64_t cap = options_.cap;
  if (cap <= 0) return;
  for (const ir::Bindings& b : worst_) {
    if (feasible(b, held(b), cap)) continue;
    const MemoryPlan p = plan_memory(g_, live_, candidates_, b, held(b), plan_options(0));
    const bool below_bound = cap < p.lower_bound;
    const std::string which = worst_.size() == 1 ? "the largest batch" : "the batch of shape";
    throw OutOfMemory("the memory cap (memory.cap) " + exact_bytes(cap) + " is too small for " +
                      which + " (" + ir::describe_bindings(g_, b) + "): " +
                      (below_bound ? "it is below the lower bound " : "the lower bound is ") +
                      exact_bytes(p.lower_bound) + " (" + human_bytes(held(b)) +
                      " of parameters, optimizer state and inputs, plus what step " +
                      std::to_string(p.lower_bound_step) + ", " +
                      g_.describe(*live_.order.at(p.lower_bound_step)) +
                      ", must hold), and the smallest cap the planner reaches for every batch is " +
                      exact_bytes(smallest_cap(held)) +
                      ": raise the cap, or lower the batch size or the maximum length");
  }
}

bool Governor::keeps_cap(const HeldFor& held) const {
  return options_.cap <= 0 || std::all_of(worst_.begin(), worst_.end(), [&](const ir::Bindings& b) {
           return feasible(b, held(b), options_.cap);
         });
}

int64_t Governor::smallest_cap(const HeldFor& held) const {
  // The ends of the staircase first: the largest need is often at one of them, and the shapes
  // that fit under it cost one plan each rather than a search.
  std::vector<const ir::Bindings*> order = {&worst_.front(), &worst_.back()};
  for (size_t i = 1; i + 1 < worst_.size(); ++i) order.push_back(&worst_[i]);
  int64_t cap = 0;
  for (const ir::Bindings* b : order) {
    const int64_t h = held(*b);
    if (cap > 0 && feasible(*b, h, cap)) continue;
    cap = std::max(cap, smallest_feasible_cap(*b, h));
  }
  return cap;
}

int64_t Governor::lower_bound(const ir::Bindings& b, int64_t held_before_step) const {
  const std::vector<Candidate> all = candidates_.empty() ? find_candidates(g_, live_) : candidates_;
  return plan_memory(g_, live_, all, b, held_before_step, plan_options(0)).lower_bound;
}

std::string Governor::report(const ir::Bindings& b, int64_t held_before_step) const {
  std::string s =
      "schedule: " + schedule_.method + " order of " + std::to_string(live_.steps()) + " steps";
  for (const auto& [method, peak] : schedule_.tried)
    s += "; " + method + " peaks at " + human_bytes(peak);
  s += "\n" + std::to_string(candidates_.size()) + " eviction candidates" +
       (candidates_.empty() ? " (none without a cap, or with remat and offload off)\n" : ":\n") +
       print_candidates(candidates_) + "memory plan for " + ir::describe_bindings(g_, b) + ": ";
  try {
    s += print_plan(
        g_, live_, candidates_,
        plan_memory(g_, live_, candidates_, b, held_before_step, plan_options(options_.cap)),
        options_.cap);
  } catch (const OutOfMemory& e) {
    s += e.what() + std::string("\n");
  }
  if (candidates_.empty()) {
    s += "lower bound under a cap (what remat could reach): " +
         human_bytes(lower_bound(b, held_before_step)) + "\n";
  } else {
    const MemoryPlan free_run =
        plan_memory(g_, live_, candidates_, b, held_before_step, plan_options(0));
    const int64_t smallest = smallest_feasible_cap(b, held_before_step);
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2f",
                  static_cast<double>(smallest) /
                      static_cast<double>(std::max<int64_t>(free_run.lower_bound, 1)));
    s += "smallest cap the planner reaches: " + human_bytes(smallest) + " (" + ratio +
         "x the lower bound)\n";
  }
  return s;
}

}  // namespace disc::memory
