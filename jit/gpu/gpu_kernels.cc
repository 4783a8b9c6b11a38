#include "jit/gpu/gpu_kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "base/error.h"
#include "base/hash.h"
#include "jit/gpu/gpu_ops.h"

namespace disc::jit {
namespace {

// Part of every binary's cache key: bump it when the emitted CUDA C changes for the same IR. 2:
// bf16 and f16; 3: warp rows, sums in warps; 4: groups of 16 rows; 5: column sums in registers.
constexpr int kCudaEmitterRevision = 5;

unsigned blocks(int64_t n, int64_t per_block, int64_t cap) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + per_block - 1) / per_block, 1, cap));
}

}  // namespace

int64_t gpu_sums_floats(const CudaKernelSource& s, int64_t rows, int64_t cols) {
  return (rows + s.rows_per_group - 1) / s.rows_per_group * s.sums_per_group(cols);
}

std::vector<GpuLaunch> gpu_launches(const CudaKernelSource& s, int64_t rows, int64_t cols,
                                    int64_t max_blocks) {
  const auto b = static_cast<unsigned>(s.block);
  std::vector<GpuLaunch> out;
  if (s.has_totals) out.push_back({GpuLaunch::Kind::kTotals, s.name + "_totals", {1, b, 0}});
  // No rows: nothing to run per row, but sums over no rows are still written (as 0).
  const int64_t groups = (rows + s.rows_per_group - 1) / s.rows_per_group;
  if (groups > 0)
    out.push_back({GpuLaunch::Kind::kRows, s.name, {blocks(groups, 1, max_blocks), b, 0}});
  // The sums: a thread per summed element, in blocks of one warp, so that the few hundred
  // elements of a column sum spread over as many multiprocessors.
  if (!s.summed.empty())
    out.push_back({GpuLaunch::Kind::kSums,
                   s.name + "_sums",
                   {blocks(s.sums_per_group(cols), 32, max_blocks), 32, 0}});
  return out;
}

GpuKernelCompiler::GpuKernelCompiler(GpuVendor vendor, std::string arch, std::string cache_dir,
                                     std::vector<int64_t> buckets)
    : vendor_(vendor),
      arch_(std::move(arch)),
      buckets_(std::move(buckets)),
      cache_(std::move(cache_dir)) {}

GpuKernelCompiler::Compiled GpuKernelCompiler::compile(const KernelIR& k, uint64_t fingerprint,
                                                       int64_t cols, bool cols_static) {
  const Bucket b = bucket(cols, cols_static);
  CudaKernelSource source = emit_cuda_kernel(k, b, "k" + std::to_string(fingerprint));
  Compiled c = compile_source(std::to_string(fingerprint) + "|" + b.str() + "|cuda-emitter-" +
                                  std::to_string(kCudaEmitterRevision),
                              source.source(), source.name + ".cu");
  c.source = std::move(source);
  return c;
}

GpuKernelCompiler::Compiled GpuKernelCompiler::compile_source(const std::string& key,
                                                              const std::string& source,
                                                              const std::string& file_name) {
  const RuntimeCompiler& rtc = RuntimeCompiler::get(vendor_);
  const std::string full_key = "gpu|" + key + "|" + arch_ + "|" + rtc.name();
  const auto start = std::chrono::steady_clock::now();
  Compiled c;
  if (std::optional<std::string> hit = cache_.get(full_key)) {
    c.binary = std::move(*hit);
    c.from_cache = true;
  } else {
    c.binary = rtc.compile(source, file_name, arch_).binary;
    cache_.put(full_key, c.binary);
  }
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return c;
}

GpuKernels::GpuKernels(devices::GpuDevice& dev, std::string cache_dir, std::vector<int64_t> buckets)
    : dev_(dev),
      compiler_(dev.arch().rfind("sm_", 0) == 0 ? GpuVendor::kNvidia : GpuVendor::kAmd, dev.arch(),
                std::move(cache_dir), std::move(buckets)),
      ops_(std::make_unique<GpuOps>(dev_, [this](const std::string& source, KernelRun& run) {
        GpuKernelCompiler::Compiled c =
            compiler_.compile_source("ops|" + std::to_string(fnv1a(source)), source, "disc_ops.cu");
        run = {.compiled = true, .from_cache = c.from_cache, .seconds = c.seconds};
        return std::move(c.binary);
      })) {}

GpuKernels::~GpuKernels() = default;  // here, where GpuOps is complete

const GpuKernels::Loaded& GpuKernels::load(const KernelIR& k, uint64_t fingerprint, int64_t cols,
                                           bool cols_static, KernelRun* compiled) {
  const Bucket b = compiler_.bucket(cols, cols_static);
  const auto key = std::make_tuple(fingerprint, b.lo, b.hi);
  std::lock_guard lock(mu_);
  if (auto it = loaded_.find(key); it != loaded_.end()) return it->second;
  GpuKernelCompiler::Compiled c = compiler_.compile(k, fingerprint, cols, cols_static);
  if (compiled) *compiled = {.compiled = true, .from_cache = c.from_cache, .seconds = c.seconds};
  Loaded l{std::move(c.source), {}};
  for (const GpuLaunch& launch : gpu_launches(l.source, 1, 1, 1))
    l.functions[launch.function] = dev_.load_kernel(c.binary, launch.function);
  return loaded_.emplace(key, std::move(l)).first->second;
}

const FusedKernel& GpuKernels::kernel_of(const ir::Node& n) {
  std::lock_guard lock(mu_);
  auto [it, added] = nodes_.try_emplace(&n);
  if (added) it->second = fused_kernel_of(n);
  return it->second;  // map nodes stay where they are
}

// Every fused node: the CUDA emitter loads, stores and rounds bf16 and f16 as the host does.
bool GpuKernels::handles(const ir::Node& n) const {
  return n.op().category == ir::OpCategory::kFused;
}

KernelRun GpuKernels::prepare(const ir::Node& n, const ir::Bindings& b) {
  const FusedKernel& f = kernel_of(n);
  KernelRun r;
  load(*f.kernel, f.fingerprint, f.cols.evaluate(b), f.cols_static, &r);
  return r;
}

KernelRun GpuKernels::run(const ir::Node& n, const ir::KernelArgs& a) {
  const FusedKernel* f = &kernel_of(n);
  std::vector<ir::TensorRef> refs = a.in;
  refs.insert(refs.end(), a.out.begin(), a.out.end());
  const Space s = space_of(*f->kernel, refs);  // shapes only: the data stay on the device
  std::vector<void*> buffers;
  for (const ir::TensorRef& r : refs) buffers.push_back(r.data);
  KernelRun r{.fused = true};  // compiles here only for a bucket prepare() did not see
  run_loaded(*f->kernel, load(*f->kernel, f->fingerprint, s.cols, f->cols_static, &r), s.rows,
             s.cols, buffers.data());
  return r;
}

void GpuKernels::run(const KernelIR& k, uint64_t fingerprint, int64_t rows, int64_t cols,
                     bool cols_static, void* const* buffers) {
  run_loaded(k, load(k, fingerprint, cols, cols_static), rows, cols, buffers);
}

void GpuKernels::run_loaded(const KernelIR& k, const Loaded& l, int64_t rows, int64_t cols,
                            void* const* buffers) {
  const CudaKernelSource& s = l.source;
  const size_t n = k.code.size();
  void* totals = s.has_totals ? totals_.get(n * sizeof(double)) : nullptr;
  void* sums = s.summed.empty()
                   ? nullptr
                   : sums_.get(static_cast<size_t>(gpu_sums_floats(s, rows, cols)) * sizeof(float));
  long long rows_arg = rows, cols_arg = cols;
  long long groups = (rows + s.rows_per_group - 1) / s.rows_per_group;
  std::vector<void*> values(buffers, buffers + k.buffers());
  for (const GpuLaunch& launch : gpu_launches(s, rows, cols, int64_t{dev_.multiprocessors()} * 8)) {
    // Each kernel's parameters, as cuLaunchKernel wants them: the address of each argument.
    std::vector<void*> params;
    std::vector<void*> summed;
    if (launch.kind == GpuLaunch::Kind::kSums) {
      for (int b : s.summed) summed.push_back(buffers[b]);
      params = {&groups, &cols_arg, &sums};
      for (void*& p : summed) params.push_back(&p);
    } else {
      params = {&rows_arg, &cols_arg};
      for (void*& p : values) params.push_back(&p);
      params.push_back(&totals);
      if (launch.kind == GpuLaunch::Kind::kRows) params.push_back(&sums);
    }
    dev_.launch(l.functions.at(launch.function), launch.shape, params.data());
    if (launch.kind != GpuLaunch::Kind::kTotals) continue;
    // The label checks, on the device: the executor raises them before the step's updates (rows
    // computed from a bad label hold numbers no update will use).
    for (size_t i = 0; i < n; ++i)
      if (k.code[i].op == KOp::kCheckLabels)
        ops_->report_nonzero(static_cast<const double*>(totals) + i,
                             ops_->checks().add_label_count_check(cols));
  }
}

}  // namespace disc::jit
