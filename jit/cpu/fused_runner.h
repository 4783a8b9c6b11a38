// Runs `fused` nodes as compiled kernels: the executor's fast path for every fused group on the
// host. A node's kernel is parsed and fingerprinted once, when the runner is made; each run binds
// the concrete buffers, finds (or compiles) the kernel for the bucket of the column extent in the
// kernel cache, and spreads the rows over TBB's threads. prepare() compiles a step's kernels
// ahead, as the executor does when a step begins. With background compilation, prepare() only
// queues the compile, and run() interprets a node's kernel IR until its kernel is ready: a new
// bucket never stalls a step, but which nodes ran interpreted (in double, so with other rounding)
// depends on timing.
//
//   jit::KernelCache cache(options.kernel_cache_dir, options.buckets);
//   jit::FusedRunner runner(graph, cache);
//   runner.prepare(n, bindings);                         // optional: compile it now
//   if (runner.handles(n)) {
//     jit::KernelRun l = runner.run(n, args);            // l.compiled: this run compiled it
//   }
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "ir/graph.h"
#include "ir/op_def.h"
#include "jit/cpu/background_compiler.h"
#include "jit/cpu/kernel_cache.h"
#include "jit/fused_kernels.h"
#include "jit/fusion/fused_op.h"

namespace disc::jit {

class FusedRunner final : public FusedKernels {
 public:
  // `g` and `cache` must outlive the runner.
  FusedRunner(const ir::Graph& g, KernelCache& cache, bool background = false);

  bool handles(const ir::Node& n) const override { return nodes_.contains(&n); }
  // Runs fused node `n` on `a` (operands, then results, as KernelArgs hold them; the results
  // allocated with their concrete shapes). Throws ShapeError for buffers that do not fit the
  // kernel, and what the kernel cache throws when it cannot compile. With background compilation
  // a kernel not ready yet is interpreted (KernelRun::interpreted).
  KernelRun run(const ir::Node& n, const ir::KernelArgs& a) override;
  // Finds (or compiles, or with background compilation queues) fused node `n`'s kernel for the
  // column extent the symbols `b` give: the kernel run(n, ...) will use in a step with them.
  KernelRun prepare(const ir::Node& n, const ir::Bindings& b) override;
  // Background compilation: the compiles finished since the last call; else none.
  std::vector<KernelRun> finished_in_background() override;
  // Background compilation: waits until every queued kernel is compiled.
  void wait_for_background() override;

 private:
  KernelCache& cache_;
  std::map<const ir::Node*, FusedKernel> nodes_;
  std::unique_ptr<BackgroundCompiler> background_;  // with background compilation
};

}  // namespace disc::jit
