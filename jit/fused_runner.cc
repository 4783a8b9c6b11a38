#include "jit/fused_runner.h"

#include <vector>

#include "jit/fused_op.h"
#include "jit/kernel_interpreter.h"

namespace disc::jit {

FusedRunner::FusedRunner(const ir::Graph& g, KernelCache& cache, bool background)
    : cache_(cache), background_(background ? std::make_unique<BackgroundCompiler>(cache) : nullptr) {
  for (const ir::Node* n : g.nodes())
    if (n->op().name == "fused") nodes_.emplace(n, fused_kernel_of(*n));
}

KernelCache::Lookup FusedRunner::prepare(const ir::Node& n, const ir::Bindings& b) {
  const FusedKernel& p = nodes_.at(&n);
  const int64_t cols = p.cols.evaluate(b);
  if (!background_) return cache_.get(*p.kernel, p.fingerprint, cols, p.cols_static);
  background_->request(p.kernel, p.fingerprint, cols, p.cols_static);
  return {};
}

std::vector<KernelCache::Lookup> FusedRunner::finished_in_background() {
  return background_ ? background_->take_finished() : std::vector<KernelCache::Lookup>{};
}

void FusedRunner::wait_for_background() {
  if (background_) background_->wait_idle();
}

KernelCache::Lookup FusedRunner::run(const ir::Node& n, const ir::KernelArgs& a, bool* interpreted) {
  const FusedKernel& p = nodes_.at(&n);
  std::vector<ir::TensorRef> buffers = a.in;
  buffers.insert(buffers.end(), a.out.begin(), a.out.end());
  const Space s = space_of(*p.kernel, buffers);
  if (background_ && !cache_.find(p.fingerprint, s.cols, p.cols_static) &&
      !background_->failed(p.fingerprint, s.cols, p.cols_static)) {
    background_->request(p.kernel, p.fingerprint, s.cols, p.cols_static);
    interpret(*p.kernel, buffers);
    if (interpreted) *interpreted = true;
    return {};
  }
  KernelCache::Lookup l = cache_.get(*p.kernel, p.fingerprint, s.cols, p.cols_static);
  std::vector<void*> data;
  data.reserve(buffers.size());
  for (const ir::TensorRef& b : buffers) data.push_back(b.data);
  run_kernel(*p.kernel, l.fn, s.rows, s.cols, data.data());
  return l;
}

}  // namespace disc::jit
