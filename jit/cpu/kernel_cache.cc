#include "jit/cpu/kernel_cache.h"

#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "jit/cpu/llvm_emitter.h"
#include "jit/cpu/target.h"
#include "jit/kernel_ir/kernel_interpreter.h"

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

KernelCache::MemoryKey KernelCache::key(uint64_t fingerprint, int64_t cols,
                                        bool cols_static) const {
  const Bucket b = bucket(cols, cols_static);
  return {fingerprint, b.lo, b.hi};
}

KernelFn KernelCache::find(uint64_t fingerprint, int64_t cols, bool cols_static) {
  const MemoryKey k = key(fingerprint, cols, cols_static);
  std::lock_guard lock(mu_);
  auto it = kernels_.find(k);
  return it == kernels_.end() ? nullptr : it->second;
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
                         host_target().fingerprint() + "|" + LlvmCompiler::version() + "|emitter-" +
                         std::to_string(kEmitterRevision));
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

namespace {

// Calls of one kernel over ranges of rows: its buffers, then the row totals and a scratch of the
// call's own (llvm_emitter.h's totals_slot and scratch_slot).
struct Calls {
  KernelFn fn;
  int64_t cols;
  std::vector<void*> buffers;
  int64_t scratch_floats;
  int scratch;  // its slot

  void operator()(int64_t begin, int64_t end, std::vector<void*> b) const {
    std::vector<float> rows_scratch(static_cast<size_t>(scratch_floats));
    b[scratch] = rows_scratch.data();
    call(fn, begin, end, cols, b.data());
  }
  void operator()(int64_t begin, int64_t end) const { (*this)(begin, end, buffers); }
};

// Summed stores (kernel_ir.h): each block of kSumBlockRows rows adds its rows into its own zeroed
// sums, in f32; the blocks' sums are then added in block order, in double.
void run_summed(const KernelIR& k, const Calls& calls, int64_t rows) {
  const std::vector<int> sums = k.summed_stores();
  std::vector<int64_t> len;  // per summed store: cols (col access) or 1 (scalar)
  for (int b : sums) {
    bool col = false;
    for (const Instr& in : k.code)
      col |= in.op == KOp::kStore && in.buffer == b && in.access == Access::kCol;
    len.push_back(col ? calls.cols : 1);
  }
  const int64_t blocks = (rows + kSumBlockRows - 1) / kSumBlockRows;
  std::vector<std::vector<float>> partial(sums.size());
  for (size_t s = 0; s < sums.size(); ++s) partial[s].assign(blocks * len[s], 0.0f);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, blocks),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      std::vector<void*> mine = calls.buffers;
                      for (int64_t b = r.begin(); b < r.end(); ++b) {
                        for (size_t s = 0; s < sums.size(); ++s)
                          mine[sums[s]] = partial[s].data() + b * len[s];
                        calls(b * kSumBlockRows, std::min(rows, (b + 1) * kSumBlockRows), mine);
                      }
                    });
  for (size_t s = 0; s < sums.size(); ++s) {
    float* out = static_cast<float*>(calls.buffers[sums[s]]);
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, len[s]),
                      [&](const tbb::blocked_range<int64_t>& r) {
                        for (int64_t c = r.begin(); c < r.end(); ++c) {
                          double acc = 0;
                          for (int64_t b = 0; b < blocks; ++b) acc += partial[s][b * len[s] + c];
                          out[c] = static_cast<float>(acc);
                        }
                      });
  }
}

}  // namespace

void run_kernel(const KernelIR& k, KernelFn fn, int64_t rows, int64_t cols, void* const* buffers) {
  Calls calls{.fn = fn,
              .cols = cols,
              .buffers = {buffers, buffers + k.buffers()},
              .scratch_floats = static_cast<int64_t>(cached_values(k).size()) * cols,
              .scratch = scratch_slot(k)};
  calls.buffers.resize(scratch_slot(k) + 1, nullptr);
  // Row totals come first (and their checks, which may throw).
  std::vector<double> totals;
  if (k.has_row_totals()) {
    std::vector<ir::TensorRef> refs;
    for (int i = 0; i < k.buffers(); ++i) refs.push_back({k.types[i], {}, buffers[i]});
    totals = row_totals(k, refs, rows, cols);
    calls.buffers[totals_slot(k)] = totals.data();
  }
  if (!k.summed_stores().empty()) return run_summed(k, calls, rows);
  if (rows <= 0) return;
  // Enough elements per task that TBB's scheduling (about a microsecond) stays in the noise.
  constexpr int64_t kMinElementsPerTask = 16 * 1024;
  const int64_t grain = std::max<int64_t>(1, kMinElementsPerTask / std::max<int64_t>(cols, 1));
  if (rows <= grain) return calls(0, rows);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, grain),
                    [&](const tbb::blocked_range<int64_t>& r) { calls(r.begin(), r.end()); });
}

}  // namespace disc::jit
