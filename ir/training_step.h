// Turns a forward graph into one fixed-topology training step: forward, backward (autodiff),
// optional gradient clipping by global norm, and the optimizer's update of every parameter and
// its state. This graph is what the engine loads.
//
// The step gains these arguments: input `lr` (scalar, the learning rate, so schedules live
// outside the graph), input `step` (i64 scalar, 1 at the first step; AdamW's bias correction),
// and per parameter P the optimizer state `P.m`, `P.v` (AdamW) or `P.momentum` (SGD), all
// starting at zero: f32, or with a compact state (OptimizerConfig::state) bf16, or u8 codes with
// an f32 `P.m.scale` per block (ir/ops/state_codec.h; SGD then takes `step` too). Outputs: `loss`
// and `grad_norm` (before clipping). Every parameter and state argument gets an update. With
// OptimizerConfig::loss_scaling, also input `loss_scale` (scalar); with
// OptimizerConfig::accumulate, input `apply` and the accumulation buffers it describes; with
// clipping in two passes (OptimizerConfig::clip_passes 2), inputs `grad_norm.given` and `apply`.
#pragma once

#include <string_view>
#include <vector>

#include "ir/data_parallel.h"
#include "ir/graph.h"
#include "ir/optimizer_config.h"

namespace disc::ir {

// The forward graph's other outputs (a model's `logits`) are dropped: kept, they would hold their
// bytes to the end of the step. With debug_outputs they stay, and each parameter's gradient
// (before clipping) is also an output named `grad.<param>` (for tests and debugging).
//
// With `data_parallel`, the step is one rank's of a data-parallel run (ir/data_parallel.h): it
// trains on the loss of the global batch, whose value is the output `loss`, and its gradients are
// summed over the ranks (in buckets) before the norm, clipping and updates read them.
// Whether a state argument is one of gradient accumulation's buffers (`P.grad_sum`,
// `accumulated.loss`, `accumulated.count`): empty between steps, so checkpoints leave them out.
bool is_accumulation_state(std::string_view name);

void build_training_step(Graph& g, Value* loss, const std::vector<Value*>& params,
                         const OptimizerConfig& opt, bool debug_outputs = false,
                         const DataParallel* data_parallel = nullptr);

}  // namespace disc::ir
