#include "jit/kernel_cache.h"

#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "jit/llvm_emitter.h"
#include "jit/target.h"

namespace disc::jit {
namespace {

std::string hex(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

// The separate function carries DISC_CALLS_JIT_CODE; TBB's lambda calls it.
DISC_CALLS_JIT_CODE void call(KernelFn fn, int64_t begin, int64_t end, int64_t cols,
                              void* const* buffers) {
  fn(begin, end, cols, buffers);
}

}  // namespace

KernelCache::KernelCache(std::string cache_dir, std::vector<int64_t> buckets)
    : buckets_(std::move(buckets)), compiler_({.cache_dir = std::move(cache_dir)}) {
  bucket_for(1, false, buckets_);  // throws now, naming the bad boundary, rather than per kernel
}

Bucket KernelCache::bucket(int64_t cols, bool cols_static) const {
  return bucket_for(cols, cols_static, buckets_);
}

KernelCache::Lookup KernelCache::get(const KernelIR& k, uint64_t fingerprint, int64_t cols,
                                     bool cols_static) {
  const Bucket b = bucket(cols, cols_static);
  const MemoryKey key{fingerprint, b.lo, b.hi};
  {
    std::lock_guard lock(mu_);
    ++stats_.lookups;
    if (KernelFn fn = find_locked(key)) return {.fn = fn};
  }
  std::lock_guard compiling(compile_mu_);
  {
    std::lock_guard lock(mu_);
    if (KernelFn fn = find_locked(key)) return {.fn = fn};  // another thread compiled it meanwhile
  }
  Lookup l = compile(k, fingerprint, b);
  std::lock_guard lock(mu_);
  kernels_.emplace(key, l.fn);
  ++stats_.compiles;
  ++(l.from_cache ? stats_.disk_loads : stats_.codegens);
  stats_.seconds += l.seconds;
  return l;
}

KernelFn KernelCache::find_locked(const MemoryKey& key) {
  auto it = kernels_.find(key);
  if (it == kernels_.end()) return nullptr;
  ++stats_.hits;
  return it->second;
}

// Emits the kernel into a module named by its cache key and compiles (or loads) it.
KernelCache::Lookup KernelCache::compile(const KernelIR& k, uint64_t fingerprint, const Bucket& b) {
  const auto start = std::chrono::steady_clock::now();
  const std::string name = "disc_kernel_" + hex(fingerprint);
  auto ctx = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> m = emit_kernel(k, b, host_target(), *ctx, name);
  m->setModuleIdentifier("kernel " + hex(fingerprint) + "|cols " + b.str() + "|" +
                         host_target().fingerprint() + "|" + LlvmCompiler::version());
  const CompiledKernel c =
      compiler_.compile(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx)), name);
  Lookup l;
  l.fn = reinterpret_cast<KernelFn>(c.address);
  l.compiled = true;
  l.from_cache = c.from_cache;
  l.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return l;
}

KernelCacheStats KernelCache::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void run_kernel(KernelFn fn, int64_t rows, int64_t cols, void* const* buffers) {
  if (rows <= 0) return;
  // Enough elements per task that TBB's scheduling (about a microsecond) stays in the noise.
  constexpr int64_t kMinElementsPerTask = 16 * 1024;
  const int64_t grain = std::max<int64_t>(1, kMinElementsPerTask / std::max<int64_t>(cols, 1));
  if (rows <= grain) return call(fn, 0, rows, cols, buffers);
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, rows, grain),
      [&](const tbb::blocked_range<int64_t>& r) { call(fn, r.begin(), r.end(), cols, buffers); });
}

}  // namespace disc::jit
