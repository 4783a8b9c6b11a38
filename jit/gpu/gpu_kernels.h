// Fused kernels on a GPU: the kernel IR through the CUDA emitter (cuda_emitter.h) and the vendor's
// run-time compiler (runtime_compiler.h), cached by (kernel, bucket, architecture, compiler) in
// memory and on disk, loaded into the device and launched as the emitter's protocol says. The
// GPU's runner of `fused` nodes (jit/fused_kernels.h); it also owns GpuOps (gpu_ops.h), the
// kernels of the ops fusion leaves, compiled by the same cache.
//
//   jit::GpuKernels kernels(gpu, "/var/cache/disc");
//   kernels.run(k, rows, cols, /*cols_static=*/false, device_buffers);   // inputs, then outputs
//
// GpuKernelCompiler is the part that needs no GPU (NVRTC and hiprtc compile for any
// architecture): the tests check its cache on a machine without one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "devices/gpu/gpu_device.h"
#include "ir/graph.h"
#include "ir/ops/kernels.h"
#include "jit/fused_kernels.h"
#include "jit/fusion/fused_op.h"
#include "jit/gpu/cuda_emitter.h"
#include "jit/gpu/gpu_scratch.h"
#include "jit/gpu/runtime_compiler.h"
#include "jit/kernel_ir/kernel_ir.h"
#include "jit/object_cache.h"

namespace disc::jit {

// One kernel launch of a CUDA source: which kernel, its grid, and what its arguments are.
struct GpuLaunch {
  enum class Kind { kTotals, kRows, kSums };
  Kind kind = Kind::kRows;
  std::string function;
  devices::LaunchShape shape;
};

// The launches that run `s` over rows x cols, in order: the totals (one block; the host reads
// their label checks before going on), the rows (a block per group of rows_per_group rows, at
// most `max_blocks`: the blocks stride over the rest), the sums over rows (a thread per summed
// element). Rows of no columns still launch (row stores and row sums have work); no rows launch
// no rows kernel, but the sums kernel still writes its sums over no rows: 0.
std::vector<GpuLaunch> gpu_launches(const CudaKernelSource& s, int64_t rows, int64_t cols,
                                    int64_t max_blocks);

// The floats of sums the rows kernel needs (a zeroed group each, zeroed by the kernel itself).
int64_t gpu_sums_floats(const CudaKernelSource& s, int64_t rows, int64_t cols);

class GpuKernelCompiler {
 public:
  // Compiles for `arch` ("sm_90", "gfx90a") with `vendor`'s compiler; `cache_dir` "" keeps
  // binaries in memory only; `buckets` as KernelCache's (jit.buckets).
  GpuKernelCompiler(GpuVendor vendor, std::string arch, std::string cache_dir,
                    std::vector<int64_t> buckets = {});

  struct Compiled {
    CudaKernelSource source;
    std::string binary;       // a cubin or an AMD code object
    bool from_cache = false;  // the binary came from the cache (memory or disk): no compile
    double seconds = 0;
  };
  // The kernel for `k` over `cols` columns in its bucket. Throws CompileError (with the
  // compiler's log) and what emit_cuda_kernel throws.
  Compiled compile(const KernelIR& k, int64_t cols, bool cols_static) {
    return compile(k, k.fingerprint(), cols, cols_static);
  }
  // The same, with k.fingerprint() computed once by the caller.
  Compiled compile(const KernelIR& k, uint64_t fingerprint, int64_t cols, bool cols_static);
  // Hand-written `source` (gpu_ops.h) compiled for this architecture, cached under `key`, which
  // must change whenever the source does; `compiled.source` stays empty.
  Compiled compile_source(const std::string& key, const std::string& source,
                          const std::string& file_name);
  Bucket bucket(int64_t cols, bool cols_static) const {
    return bucket_for(cols, cols_static, buckets_);
  }
  ObjectCacheStats cache_stats() const { return cache_.stats(); }

 private:
  GpuVendor vendor_;
  std::string arch_;
  std::vector<int64_t> buckets_;
  ObjectCache cache_;
};

class GpuOps;

class GpuKernels final : public FusedKernels {
 public:
  GpuKernels(devices::GpuDevice& dev, std::string cache_dir, std::vector<int64_t> buckets = {});
  ~GpuKernels();
  GpuKernels(const GpuKernels&) = delete;
  GpuKernels& operator=(const GpuKernels&) = delete;

  // Runs `k` over device buffers (inputs, then outputs), compiling and loading its kernel on the
  // first call for its bucket. Asynchronous on the device's compute stream, except that a kernel
  // with label checks waits for its totals. Throws InvalidArgument for labels outside the classes.
  void run(const KernelIR& k, int64_t rows, int64_t cols, bool cols_static, void* const* buffers) {
    run(k, k.fingerprint(), rows, cols, cols_static, buffers);
  }
  // The same, with k.fingerprint() computed once by the caller (a step runs each kernel again).
  void run(const KernelIR& k, uint64_t fingerprint, int64_t rows, int64_t cols, bool cols_static,
           void* const* buffers);
  // Every fused node, 16-bit ones included.
  bool handles(const ir::Node& n) const override;
  // Compiles and loads fused node n's kernel for the column extent the symbols `b` give.
  KernelRun prepare(const ir::Node& n, const ir::Bindings& b) override;
  // Fused node `n` over device tensors (operands, then results, as KernelArgs hold them).
  KernelRun run(const ir::Node& n, const ir::KernelArgs& a) override;
  // The kernels of the ops fusion leaves, on this device.
  GpuOps& ops() { return *ops_; }

 private:
  struct Loaded {
    CudaKernelSource source;
    std::map<std::string, devices::GpuDevice::Kernel> functions;
  };
  // The kernel for the bucket of `cols`, compiled and loaded on first use; `compiled` (if given)
  // says what that took.
  // Launches `l`, k's kernel for the bucket of `cols`, as the emitter's protocol says.
  void run_loaded(const KernelIR& k, const Loaded& l, int64_t rows, int64_t cols,
                  void* const* buffers);
  const Loaded& load(const KernelIR& k, uint64_t fingerprint, int64_t cols, bool cols_static,
                     KernelRun* compiled = nullptr);
  const FusedKernel& kernel_of(const ir::Node& n);

  devices::GpuDevice& dev_;
  GpuKernelCompiler compiler_;
  std::mutex mu_;
  std::map<std::tuple<uint64_t, int64_t, int64_t>, Loaded> loaded_;  // fingerprint, bucket
  std::map<const ir::Node*, FusedKernel> nodes_;  // each node's kernel, parsed once
  GpuScratch totals_{dev_}, sums_{dev_};
  std::unique_ptr<GpuOps> ops_;  // the unfused ops' kernels
};

}  // namespace disc::jit
