// Which candidates to evict for one set of concrete shapes, so that the bytes held stay under
// the cap (the run-time half of rematerialization). It simulates the step with the concrete
// sizes, finds the first step over the cap, and evicts there the candidate that costs the least
// time per byte freed (recompute time from the op's FLOPs and bytes, or the copy out and back),
// until every step fits; other plans relieve the step most over the cap first, or rank by the
// steps an eviction frees too, and the plan that regenerates in the least time wins. It counts
// the regenerations before each node in the order they run, with what they rerun and drop; then,
// where the cap leaves room, it brings back earlier a value that a regeneration reruns or makes
// on the way, so that it is computed once. The executor then follows the plan: no search on the
// hot path.
//
//   MemoryPlan p = plan_memory(g, live, candidates, bindings, held_before_step, {.cap = 1 << 30});
#pragma once

#include <string>
#include <vector>

#include "memory/remat.h"

namespace disc::memory {

enum class Regen : uint8_t { kRecompute, kReload };

// The greedy planner, two ways. Which step over the cap it relieves next: the first, or the one
// most over. How it ranks the candidates that can relieve it: by time per byte freed, or by that
// over the square root of the steps the eviction frees (favouring evictions that relieve many
// steps at once). Which variant wins depends on the graph, the shapes and the cap (llama 4x512,
// B=8 at 720 MiB: ranking by the steps freed too, 0.84 s against 0.94 for the first variant at
// S=703 and 0.43 against 0.49 at S=527; at 725 MiB and S=703 all four tie), so a plan tries
// each and keeps the cheapest.
enum class Sweep : uint8_t { kFirstOver, kMostOver };
enum class Ranking : uint8_t { kPerByte, kPerByteAndStep };
struct Greedy {
  Sweep sweep = Sweep::kFirstOver;
  Ranking ranking = Ranking::kPerByte;
};

struct PlanOptions {
  int64_t cap = 0;  // 0: no cap, no evictions
  std::vector<Greedy> greedy = {{Sweep::kFirstOver, Ranking::kPerByte},
                                {Sweep::kMostOver, Ranking::kPerByte},
                                {Sweep::kFirstOver, Ranking::kPerByteAndStep},
                                {Sweep::kMostOver, Ranking::kPerByteAndStep}};
  // false: the first variant that fits, not the cheapest (enough to learn whether a cap is
  // feasible)
  bool cheapest = true;
  bool remat = true;
  bool offload = false;  // only on devices with separate memory
  // Rates that turn work into time, so that recompute and reload can be compared.
  double flops_per_second = 2e11;
  double bytes_per_second = 2e10;       // memory-bound kernels
  double copy_bytes_per_second = 1e10;  // device <-> host
};

struct Eviction {
  int candidate = 0;  // index into the candidates
  Regen how = Regen::kRecompute;
  int64_t bytes = 0;
  // The step before which it comes back: the candidate's, or an earlier one where another
  // regeneration needs it and the cap leaves room to keep it from then on.
  int regen_before = 0;
  // Candidates whose values the recompute reads while they are evicted: they rerun first, deepest
  // first, as temporaries (see RegenRun).
  std::vector<int> rerun_first;
};

// One reload or recompute before a step; a step's runs go in order. A run with no eviction reruns
// a candidate that is evicted across the step, once for every later run there that reads its
// value; the run that reads it last drops it.
struct RegenRun {
  int candidate = 0;
  int eviction = -1;  // the eviction it ends, or -1: the value is a temporary
  // Candidates whose values the recompute makes on the way (other results of its nodes) and keeps
  // for the runs after it, in place of running them again.
  std::vector<int> keep;
  std::vector<int> drop;  // candidates of earlier temporaries to erase after this run
};

struct MemoryPlan {
  std::vector<Eviction> evictions;
  // Per step: the evictions to carry out after it, and those to regenerate before it.
  std::vector<std::vector<int>> evict_after, regen_before;
  std::vector<std::vector<RegenRun>> regen_runs;  // per step: how regen_before's values come back
  std::vector<int64_t> curve;    // bytes held during each step, held_before_step included
  int64_t held_before_step = 0;  // arguments, and whatever else was allocated before the step
  int64_t unplanned_peak = 0;    // the peak without evictions
  int64_t peak = 0;              // the peak with them (regeneration temporaries included)
  int64_t lower_bound = 0;       // no plan over these candidates can go below this
  int lower_bound_step = 0;      // the step that sets it
  double recompute_flops = 0;
  double regen_seconds = 0;  // the regenerations' time at the options' rates: what plans compare by
  int64_t reload_bytes = 0;  // copied each way
};

// Throws OutOfMemory, with the cap, the peak it could reach and the lower bound, when no choice
// of evictions fits the cap.
MemoryPlan plan_memory(const ir::Graph& g, const Liveness& l, const std::vector<Candidate>& cs,
                       const ir::Bindings& b, int64_t held_before_step, const PlanOptions& options);

// "peak 12.0 MiB -> 7.5 MiB (cap 8.0 MiB, lower bound 6.2 MiB at step 40); 3 evictions" and one
// line per eviction.
std::string print_plan(const ir::Graph& g, const Liveness& l, const std::vector<Candidate>& cs,
                       const MemoryPlan& p, int64_t cap);

}  // namespace disc::memory
