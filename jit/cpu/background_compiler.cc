#include "jit/cpu/background_compiler.h"

#include <utility>

#include "base/error.h"

namespace disc::jit {

BackgroundCompiler::BackgroundCompiler(KernelCache& cache)
    : cache_(cache), thread_([this] { work(); }) {}

BackgroundCompiler::~BackgroundCompiler() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  changed_.notify_all();
  thread_.join();
}

void BackgroundCompiler::request(std::shared_ptr<const KernelIR> k, uint64_t fingerprint,
                                 int64_t cols, bool cols_static) {
  if (cache_.find(fingerprint, cols, cols_static)) return;
  {
    std::lock_guard lock(mu_);
    if (!asked_.insert(cache_.key(fingerprint, cols, cols_static)).second) return;
    queue_.push_back({std::move(k), fingerprint, cols, cols_static});
  }
  changed_.notify_all();
}

bool BackgroundCompiler::failed(uint64_t fingerprint, int64_t cols, bool cols_static) const {
  std::lock_guard lock(mu_);
  return failed_.contains(cache_.key(fingerprint, cols, cols_static));
}

std::vector<KernelCache::Lookup> BackgroundCompiler::take_finished() {
  std::lock_guard lock(mu_);
  return std::exchange(finished_, {});
}

void BackgroundCompiler::wait_idle() {
  std::unique_lock lock(mu_);
  changed_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void BackgroundCompiler::work() {
  std::unique_lock lock(mu_);
  while (true) {
    changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    KernelCache::Lookup l;
    bool ok = true;
    try {
      l = cache_.get(*job.kernel, job.fingerprint, job.cols, job.cols_static);
    } catch (const Error&) {  // the foreground compiles it again and reports it with its node
      ok = false;
    }
    lock.lock();
    busy_ = false;
    if (!ok)
      failed_.insert(cache_.key(job.fingerprint, job.cols, job.cols_static));
    else if (l.compiled)
      finished_.push_back(l);
    changed_.notify_all();
  }
}

}  // namespace disc::jit
