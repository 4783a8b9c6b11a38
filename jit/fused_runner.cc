#include "jit/fused_runner.h"

#include <vector>

#include "jit/fused_op.h"

namespace disc::jit {

FusedRunner::FusedRunner(const ir::Graph& g, KernelCache& cache) : cache_(cache) {
  for (const ir::Node* n : g.nodes()) {
    if (n->op().name != "fused") continue;
    Prepared p;
    p.kernel = kernel_of(n->attrs());
    p.fingerprint = p.kernel->fingerprint();
    const auto& space = n->attrs().get_dims("shape");
    p.cols_static = space.empty() || space.back().constant().has_value();
    if (!space.empty()) p.cols = space.back();
    nodes_.emplace(n, std::move(p));
  }
}

KernelCache::Lookup FusedRunner::prepare(const ir::Node& n, const ir::Bindings& b) {
  const Prepared& p = nodes_.at(&n);
  return cache_.get(*p.kernel, p.fingerprint, p.cols.evaluate(b), p.cols_static);
}

KernelCache::Lookup FusedRunner::run(const ir::Node& n, const ir::KernelArgs& a) {
  const Prepared& p = nodes_.at(&n);
  std::vector<ir::TensorRef> buffers = a.in;
  buffers.insert(buffers.end(), a.out.begin(), a.out.end());
  const Space s = space_of(*p.kernel, buffers);
  KernelCache::Lookup l = cache_.get(*p.kernel, p.fingerprint, s.cols, p.cols_static);
  std::vector<void*> data;
  data.reserve(buffers.size());
  for (const ir::TensorRef& b : buffers) data.push_back(b.data);
  run_kernel(*p.kernel, l.fn, s.rows, s.cols, data.data());
  return l;
}

}  // namespace disc::jit
