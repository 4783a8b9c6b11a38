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

#include "jit/cpu/kernel_cache.h"
#include "tests/jit/kernel_check.h"
#include "tests/jit/llama_step_kernels.h"

namespace disc::jit {
namespace {

TEST(FusedKernels, EveryKernelOfALlamaTrainingStep) {
  size_t groups = 0;
  const std::vector<StepKernel> kernels = llama_step_kernels(&groups);
  ASSERT_FALSE(kernels.empty());
  KernelCache cache("");
  for (const auto& [k, extents] : kernels) {
    SCOPED_TRACE(k.str());
    for (int64_t cols : extents)
      for (bool is_static : {true, false})
        check_kernel(cache, k, {.rows = 3, .cols = cols, .is_static = is_static},
                     {.rtol = 1e-4, .atol = 1e-4});
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("%zu distinct kernels of %zu groups compiled and checked\n", kernels.size(), groups);
}

}  // namespace
}  // namespace disc::jit
