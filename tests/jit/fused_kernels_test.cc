// The emitter on the kernels the fusion planner really produces: the training step of a small
// llama (forward, backward, AdamW with clipping) is planned, and every group's kernel is compiled
// and compared with the interpreter at a few extents, static and dynamic. Inputs are random, so
// the chains see values no model would (square roots of negatives, divisions by numbers near
// 0); outputs still agree, within a looser tolerance than the hand-built kernels' because the
// chains are long and reductions of random signs cancel.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ir/models/model.h"
#include "ir/training_step.h"
#include "jit/fusion.h"
#include "jit/kernel_cache.h"
#include "tests/jit/kernel_check.h"

namespace disc::jit {
namespace {

TEST(FusedKernels, EveryKernelOfALlamaTrainingStep) {
  ir::models::LlamaConfig c;
  c.vocab = 32, c.hidden = 64, c.layers = 1, c.heads = 4, c.kv_heads = 2, c.ffn = 172;
  c.max_seq = 64;
  ir::models::Model m = ir::models::build_llama(c);
  ir::OptimizerConfig opt;
  opt.clip_norm = 1.0;
  ir::build_training_step(*m.graph, m.loss, m.params, opt);
  const FusionPlan plan = plan_fusion(*m.graph);
  ASSERT_FALSE(plan.groups.empty());
  KernelCache cache("");
  std::set<std::string> seen;
  for (const FusionGroup& g : plan.groups) {
    if (!seen.insert(g.kernel.str()).second) continue;  // the same kernel in another layer
    SCOPED_TRACE(g.kernel.str());
    // A static extent is the only one the kernel meets (its constants, a vocabulary, assume it).
    std::vector<int64_t> extents = {1, 17, 64, 1000};
    if (!g.space.empty() && g.space.back().constant()) extents = {*g.space.back().constant()};
    for (int64_t cols : extents)
      for (bool is_static : {true, false})
        check_kernel(cache, g.kernel, {.rows = 3, .cols = cols, .is_static = is_static},
                     {.rtol = 1e-4, .atol = 1e-4});
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("%zu distinct kernels of %zu groups compiled and checked\n", seen.size(),
              plan.groups.size());
}

}  // namespace
}  // namespace disc::jit
