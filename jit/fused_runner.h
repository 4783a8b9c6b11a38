// Runs `fused` nodes as compiled kernels: the executor's fast path for every fused group on the
// host. A node's kernel is parsed and fingerprinted once, when the runner is made; each run binds
// the concrete buffers, finds (or compiles) the kernel for the bucket of the column extent in the
// kernel cache, and spreads the rows over TBB's threads. prepare() compiles a step's kernels
// ahead, as the executor does when a step begins.
//
//   jit::KernelCache cache(options.kernel_cache_dir, options.buckets);
//   jit::FusedRunner runner(graph, cache);
//   runner.prepare(n, bindings);                         // optional: compile it now
//   if (runner.handles(n)) {
//     jit::KernelCache::Lookup l = runner.run(n, args);  // l.compiled: this run compiled it
//   }
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "ir/graph.h"
#include "ir/op_def.h"
#include "jit/kernel_cache.h"

namespace disc::jit {

class FusedRunner {
 public:
  // `g` and `cache` must outlive the runner.
  FusedRunner(const ir::Graph& g, KernelCache& cache);

  bool handles(const ir::Node& n) const { return nodes_.contains(&n); }
  // Runs fused node `n` on `a` (operands, then results, as KernelArgs hold them; the results
  // allocated with their concrete shapes). Throws ShapeError for buffers that do not fit the
  // kernel, and what the kernel cache throws when it cannot compile.
  KernelCache::Lookup run(const ir::Node& n, const ir::KernelArgs& a);
  // Finds (or compiles) fused node `n`'s kernel for the column extent the symbols `b` give: the
  // kernel run(n, ...) will use in a step with those symbols.
  KernelCache::Lookup prepare(const ir::Node& n, const ir::Bindings& b);

 private:
  struct Prepared {
    std::shared_ptr<const KernelIR> kernel;
    uint64_t fingerprint = 0;
    bool cols_static = false;  // the space's last dim is a constant in the graph
    ir::DimExpr cols{int64_t{1}};  // the space's last dim (1 for a scalar space)
  };
  KernelCache& cache_;
  std::map<const ir::Node*, Prepared> nodes_;
};

}  // namespace disc::jit
