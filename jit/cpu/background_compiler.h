// Compiles kernels into a KernelCache on a thread of its own, so that a step meeting a new shape
// bucket need not wait: the caller interprets the kernel's IR meanwhile (FusedRunner with
// background compilation). Each kernel is compiled once, in the order asked.
//
//   jit::BackgroundCompiler bg(cache);
//   bg.request(kernel, fingerprint, cols, cols_static);   // returns at once
//   ... cache.find(fingerprint, cols, cols_static) is null until it is done ...
//   for (const KernelCache::Lookup& l : bg.take_finished()) count(l);
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "jit/cpu/kernel_cache.h"

namespace disc::jit {

class BackgroundCompiler {
 public:
  // `cache` must outlive the compiler.
  explicit BackgroundCompiler(KernelCache& cache);
  // Finishes the compile under way and drops the queued ones.
  ~BackgroundCompiler();
  BackgroundCompiler(const BackgroundCompiler&) = delete;
  BackgroundCompiler& operator=(const BackgroundCompiler&) = delete;

  // Queues `k`'s kernel for `cols` unless the cache has it or it was asked for before.
  void request(std::shared_ptr<const KernelIR> k, uint64_t fingerprint, int64_t cols,
               bool cols_static);
  // True when that kernel's compile threw: the caller should compile it itself (KernelCache::get)
  // to get the error where it can say which node needed the kernel.
  bool failed(uint64_t fingerprint, int64_t cols, bool cols_static) const;
  // The lookups of the compiles finished since the last call (failed ones are not among them).
  std::vector<KernelCache::Lookup> take_finished();
  // Waits until nothing is queued or compiling.
  void wait_idle();

 private:
  struct Job {
    std::shared_ptr<const KernelIR> kernel;
    uint64_t fingerprint = 0;
    int64_t cols = 0;
    bool cols_static = false;
  };
  void work();

  KernelCache& cache_;
  mutable std::mutex mu_;  // guards everything below but the thread
  std::condition_variable changed_;
  std::deque<Job> queue_;
  std::set<KernelCache::MemoryKey> asked_, failed_;
  std::vector<KernelCache::Lookup> finished_;
  bool busy_ = false, stopping_ = false;
  std::thread thread_;  // last: starts after the members it reads
};

}  // namespace disc::jit
