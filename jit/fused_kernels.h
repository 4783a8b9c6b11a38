// The one interface of the runners of `fused` nodes: FusedRunner on the host (kernels compiled
// by LLVM, jit/cpu/fused_runner.h) and GpuKernels on a GPU (NVRTC or hiprtc,
// jit/gpu/gpu_kernels.h). The executor compiles a step's kernels through prepare() before its
// first node, runs them through run(), and counts every compile either reports in StepStats.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "ir/op_def.h"

namespace disc::jit {

// What a prepare() or run() did besides running: whether it compiled a kernel (or loaded one from
// a cache), how long that took, and whether the node was interpreted instead.
struct KernelRun {
  bool compiled = false;     // a kernel was compiled or loaded from a cache for this call
  bool from_cache = false;   // ... loaded from a cache: no code generation
  double seconds = 0;        // wall time of that
  bool interpreted = false;  // background compilation: the kernel was not ready
  bool fused = false;        // a `fused` node ran (StepStats::fused_kernels)
};

class FusedKernels {
 public:
  virtual ~FusedKernels() = default;
  // Whether `n` is a fused node this runner has a kernel for.
  virtual bool handles(const ir::Node& n) const = 0;
  // Compiles (or with background compilation, queues) n's kernel for the symbols `b`.
  virtual KernelRun prepare(const ir::Node& n, const ir::Bindings& b) = 0;
  // Runs fused node `n` on `a` (operands, then results, as KernelArgs hold them).
  virtual KernelRun run(const ir::Node& n, const ir::KernelArgs& a) = 0;
  // The compiles a background thread finished since the last call: the executor counts them as
  // the next step begins.
  virtual std::vector<KernelRun> finished_in_background() { return {}; }
  // Waits until every compile queued so far has finished.
  virtual void wait_for_background() {}
};

}  // namespace disc::jit
