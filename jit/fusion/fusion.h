// The fusion planner (FusionStitching-style): groups memory-bound nodes into kernels.
//   loop fusion    elementwise and broadcast chains over one iteration space;
//   input fusion   a row reduction as the root, with the elementwise work that feeds it;
//   stitch fusion  a reduction's row result feeding elementwise work in the same kernel
//                  (softmax, RMSNorm with the residual add, SwiGLU, AdamW with clipping).
// A norm joins the residual add only where nothing else reads the sum: in a transformer the sum
// is the residual stream, and a norm kept apart can be recomputed from it under a memory cap.
// Every node that has a lowering (jit/kernel_ir/lowering.h) lands in exactly one group; matmul and
// the ops without a lowering stay as they are.
//
// Greedy, in graph order: a node joins the group of one of its producers when it fits that
// group's space, the merged group stays acyclic (no path leaves the group and comes back), and
// the cost model agrees: at most `max_passes` passes over a row, the rows that multi-pass kernels
// re-read stay within `cache_bytes` (so the later passes read cache, not memory), and work that
// would be recomputed in several passes stays cheap. Fusion saves the bytes of every value that
// no longer leaves the kernel and one launch per merged node.
//
//   FusionPlan plan = plan_fusion(g);
//   std::cout << plan.str();                         // which nodes land in which kernel
//   std::unique_ptr<ir::Graph> fused = apply_fusion(g, plan);   // groups become `fused` nodes
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "jit/kernel_ir/kernel_ir.h"

namespace disc::jit {

struct FusionOptions {
  int max_passes = 4;               // reductions per kernel, plus the final pass
  int64_t cache_bytes = 512 << 10;  // re-read bytes per row of a multi-pass kernel, at the bounds
  int max_recompute = 16;           // weighted element ops evaluated again in later passes
  // Nodes outside every group (GEMMs, attention, ...) that may run between a group's last node and
  // a node that joins it. Farther, the kernel would compute that node's results early and hold
  // them across the work in between: a backward's copy of a forward value (ir/passes/
  // backward_recompute.cc) must not join the forward kernel that made the original.
  int max_span = 4;
  // A group grows past this many nodes only by appends that need no check of the whole group (see
  // Planner::appends_cleanly): any other join checks and lowers the group again, so without a bound
  // a group that grows by such joins (a 1000-layer llama's optimizer updates) costs its size
  // squared.
  int max_checked_nodes = 512;
  // No group grows past this many nodes, however it grows: a kernel's compile time (LLVM schedules
  // a block's instructions in more than linear time) and its per-kernel tables (outputs, in-place
  // inputs, the governor's recompute of its results) stay bounded. A chain of 30,000 relus from a
  // hostile ONNX file is 15 kernels, not one with 30,000 outputs that took minutes to compile.
  int max_nodes = 2048;
};

struct FusionGroup {
  std::vector<const ir::Node*> nodes;  // in graph order
  std::vector<ir::DimExpr> space;
  std::vector<const ir::Value*> inputs, outputs;
  KernelIR kernel;
  std::string kind() const;  // "loop", "input" or "stitch" (see above)
};

struct FusionPlan {
  std::vector<FusionGroup> groups;
  // The planner's work: nodes it lowered into kernels, trial drafts included. A group that grows
  // node by node must not be lowered whole at each step (that was quadratic in its size).
  int64_t lowered = 0;
  // One line per kernel: `kernel 3 (stitch, f32[B, S, 128]): %27 = add, %28 = rms_norm -> %28`.
  std::string str() const;
};

FusionPlan plan_fusion(const ir::Graph& g, const FusionOptions& options = {});

// A copy of `g` where each group is one `fused` node (jit/fusion/fused_op.h) whose results keep the
// names of the group's outputs; nodes outside groups are copied as they are.
std::unique_ptr<ir::Graph> apply_fusion(const ir::Graph& g, const FusionPlan& plan);

}  // namespace disc::jit
