// The tensors a step may evict under a memory cap, and how each comes back (BladeDISC++'s
// compile-time half of rematerialization). Needs: the liveness of a schedule. Keeps: the numbers
// (a recompute reruns the same kernels on the same inputs, bit for bit).
//
// A candidate is one gap in a value's life: after step `evict_after` (its producer, or a reader)
// nothing reads it until step `regen_before`. It may come back by
//  - recompute: rerunning its producer, and the producers of operands that are gone by then
//    (a chain of at most kMaxChain nodes), over values that are alive at that step anyway;
//  - reload: a copy to host memory and back, on devices whose memory is separate.
// Outputs and values that updates copy into parameters are never candidates, nodes whose
// results feed updates are never recomputed, nor are collectives (all_reduce: every rank runs each
// once, in the same order), and no recompute reads a parameter after its
// update has overwritten it. Random ops are counter-based (seed, position), so
// rerunning one draws the same numbers.
#pragma once

#include <string>
#include <vector>

#include "memory/liveness.h"

namespace disc::memory {

inline constexpr int kMaxChain = 6;

struct Candidate {
  const ir::Value* value = nullptr;
  int evict_after = 0;
  int regen_before = 0;
  // The nodes to rerun, producers first, the value's producer last; empty: reload only.
  std::vector<const ir::Node*> recompute;
  // For each node of `recompute`: its other results that no later node of the chain reads, which
  // the recompute drops after that node (all but `value` are temporaries).
  std::vector<std::vector<const ir::Value*>> drop_after;
  // Values the recompute reads that must be held at regen_before (produced values only).
  std::vector<const ir::Value*> leaves;
  ir::DimExpr recompute_flops;
  ir::DimExpr recompute_bytes;  // moved by the recompute: its time on memory-bound ops
};

// Gaps shorter than `min_gap` steps are not worth an eviction.
std::vector<Candidate> find_candidates(const ir::Graph& g, const Liveness& l, int min_gap = 2);

// One line per candidate: `%h [12 -> 40] 4096*B*S bytes, recompute %a, %h (flops 2048*B*S)`.
std::string print_candidates(const std::vector<Candidate>& cs);

}  // namespace disc::memory
