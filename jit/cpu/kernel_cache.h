// Compiled kernels by what they are and where they run: the kernel IR's fingerprint, the shape
// bucket of its column extent, the host target and the compiler version. Kept in memory (a second
// get() for the same key is a map lookup) and, through LlvmCompiler's object cache, on disk under
// `jit.cache_dir` (a second process emits IR but generates no code).
//
//   jit::KernelCache cache(options.jit.cache_dir, options.jit.buckets);
//   jit::KernelCache::Lookup l = cache.get(kernel, cols, /*cols_static=*/false);
//   void* buffers[] = {x.data, y.data};           // inputs, then outputs
//   jit::run_kernel(kernel, l.fn, rows, cols, buffers);   // rows spread over TBB
//
// Thread-safe: lookups take a short lock; a miss compiles under a second lock, so two threads
// missing the same key compile it once. Kernels stay callable until the cache is destroyed.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "jit/bucket.h"
#include "jit/cpu/llvm_compiler.h"
#include "jit/kernel_ir/kernel_ir.h"

namespace disc::jit {

// A compiled kernel: runs rows [row_begin, row_end) of a space with `cols` columns
// (llvm_emitter.h).
using KernelFn = void (*)(int64_t row_begin, int64_t row_end, int64_t cols, void* const* buffers);

struct KernelCacheStats {
  int64_t lookups = 0;     // get() calls
  int64_t hits = 0;        // of those, found in memory: no compiler call
  int64_t compiles = 0;    // kernels emitted and handed to the compiler
  int64_t codegens = 0;    // of those, optimised and compiled to machine code
  int64_t disk_loads = 0;  // of those, whose object came from the object cache instead
  double seconds = 0;      // wall time of the misses: emission, then compilation or loading
};

class KernelCache {
 public:
  // `cache_dir`: the on-disk object cache ("" keeps objects in memory only). `buckets`: the
  // config's jit.buckets boundaries for dynamic extents (empty: powers of two).
  explicit KernelCache(std::string cache_dir, std::vector<int64_t> buckets = {});
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  struct Lookup {
    KernelFn fn = nullptr;
    bool compiled = false;    // this call emitted the kernel and called the compiler
    bool from_cache = false;  // ... which loaded the object from its cache: no code generation
    double seconds = 0;       // wall time of that; 0 for a lookup found in memory
  };
  // The kernel for `k` over `cols` columns (a static extent is compiled in as a constant; a
  // dynamic one shares its bucket's kernel). Call it with the same `cols` (a dynamic bucket's
  // kernel: any extent in the bucket). Throws what emit_kernel and LlvmCompiler throw.
  Lookup get(const KernelIR& k, int64_t cols, bool cols_static) {
    return get(k, k.fingerprint(), cols, cols_static);
  }
  // The same, with k.fingerprint() computed once by the caller (hot paths run a kernel per step).
  Lookup get(const KernelIR& k, uint64_t fingerprint, int64_t cols, bool cols_static);

  // The kernel when it is in memory already, else nullptr; never compiles (nor waits for a
  // compile under way).
  KernelFn find(uint64_t fingerprint, int64_t cols, bool cols_static);

  Bucket bucket(int64_t cols, bool cols_static) const;
  // What tells kernels apart in memory: the fingerprint and the bucket of `cols`.
  using MemoryKey = std::tuple<uint64_t, int64_t, int64_t>;  // fingerprint, bucket lo and hi
  MemoryKey key(uint64_t fingerprint, int64_t cols, bool cols_static) const;
  KernelCacheStats stats() const;

 private:
  Lookup compile(const KernelIR& k, uint64_t fingerprint, const Bucket& b);
  KernelFn find_locked(const MemoryKey& key);  // with mu_ held; counts a hit

  const std::vector<int64_t> buckets_;
  LlvmCompiler compiler_;
  mutable std::mutex mu_;  // guards kernels_ and stats_; held only for lookups and inserts
  std::mutex compile_mu_;  // one miss compiles at a time, so a key is never compiled twice
  std::map<MemoryKey, KernelFn> kernels_;
  KernelCacheStats stats_;
};

// Runs `fn`, compiled from `k`, over rows [0, rows), split over TBB's threads in blocks of at
// least ~16K elements (one block, on the calling thread, when that is all there is). Rows are
// independent, so the results do not depend on the split. A kernel with column sums runs in
// blocks of kSumBlockRows rows instead, each into its own sums, added in block order after.
DISC_CALLS_JIT_CODE void run_kernel(const KernelIR& k, KernelFn fn, int64_t rows, int64_t cols,
                                    void* const* buffers);

}  // namespace disc::jit
