#include "jit/cpu/fused_runner.h"

#include <vector>

#include "jit/fusion/fused_op.h"
#include "jit/kernel_ir/kernel_interpreter.h"

namespace disc::jit {
namespace {

KernelRun run_of(const KernelCache::Lookup& l) {
  return {.compiled = l.compiled, .from_cache = l.from_cache, .seconds = l.seconds};
}

}  // namespace

FusedRunner::FusedRunner(const ir::Graph& g, KernelCache& cache, bool background)
    : cache_(cache),
      background_(background ? std::make_unique<BackgroundCompiler>(cache) : nullptr) {
  for (const ir::Node* n : g.nodes())
    if (n->op().category == ir::OpCategory::kFused) nodes_.emplace(n, fused_kernel_of(*n));
}

KernelRun FusedRunner::prepare(const ir::Node& n, const ir::Bindings& b) {
  const FusedKernel& p = nodes_.at(&n);
  const int64_t cols = p.cols.evaluate(b);
  if (!background_) return run_of(cache_.get(*p.kernel, p.fingerprint, cols, p.cols_static));
  background_->request(p.kernel, p.fingerprint, cols, p.cols_static);
  return {};
}

std::vector<KernelRun> FusedRunner::finished_in_background() {
  std::vector<KernelRun> out;
  if (background_)
    for (const KernelCache::Lookup& l : background_->take_finished()) out.push_back(run_of(l));
  return out;
}

void FusedRunner::wait_for_background() {
  if (background_) background_->wait_idle();
}

KernelRun FusedRunner::run(const ir::Node& n, const ir::KernelArgs& a) {
  const FusedKernel& p = nodes_.at(&n);
  std::vector<ir::TensorRef> buffers = a.in;
  buffers.insert(buffers.end(), a.out.begin(), a.out.end());
  const Space s = space_of(*p.kernel, buffers);
  if (background_ && !cache_.find(p.fingerprint, s.cols, p.cols_static) &&
      !background_->failed(p.fingerprint, s.cols, p.cols_static)) {
    background_->request(p.kernel, p.fingerprint, s.cols, p.cols_static);
    interpret(*p.kernel, buffers);
    return {.interpreted = true, .fused = true};
  }
  KernelCache::Lookup l = cache_.get(*p.kernel, p.fingerprint, s.cols, p.cols_static);
  std::vector<void*> data;
  data.reserve(buffers.size());
  for (const ir::TensorRef& b : buffers) data.push_back(b.data);
  run_kernel(*p.kernel, l.fn, s.rows, s.cols, data.data());
  KernelRun r = run_of(l);
  r.fused = true;
  return r;
}

}  // namespace disc::jit
