// The kernels the fusion planner makes of a small llama's training step as the Trainer compiles it
// (engine/pipeline.h: attention and the head as ops, backward recompute, tril, AdamW with
// clipping), each once, with the column extents it meets: the emitters' tests run every one.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "engine/pipeline.h"
#include "ir/models/model.h"

namespace disc::jit {

struct StepKernel {
  KernelIR kernel;
  std::vector<int64_t> extents;  // a static extent alone (its constants, a vocabulary, assume it)
};

// With `precision` bf16 or f16, the matmuls' dtype (TrainerOptions::precision): kernels that
// load, store and round 16-bit values.
inline std::vector<StepKernel> llama_step_kernels(size_t* groups = nullptr,
                                                  DType precision = DType::kF32) {
  ir::models::LlamaConfig c;
  c.vocab = 32, c.hidden = 64, c.layers = 1, c.heads = 4, c.kv_heads = 2, c.ffn = 172;
  c.max_seq = 64;
  engine::TrainerOptions options;
  options.optimizer.clip_norm = 1.0;
  options.precision = precision;
  const engine::CompiledStep step = engine::Pipeline(options).run(ir::models::build_llama(c));
  const FusionPlan& plan = *step.fusion;
  if (groups) *groups = plan.groups.size();
  std::set<std::string> seen;
  std::vector<StepKernel> kernels;
  for (const FusionGroup& g : plan.groups) {
    if (!seen.insert(g.kernel.str()).second) continue;  // the same kernel in another layer
    std::vector<int64_t> extents = {1, 17, 64, 1000};
    if (!g.space.empty() && g.space.back().constant()) extents = {*g.space.back().constant()};
    kernels.push_back({g.kernel, extents});
  }
  return kernels;
}

}  // namespace disc::jit
