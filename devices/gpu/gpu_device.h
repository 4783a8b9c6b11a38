// A GPU as a Device, written once over GpuRuntime (gpu_runtime.h) for NVIDIA (CUDA Driver API)
// and AMD (HIP runtime), both loaded at run time. Memory comes from the vendor's allocator (the
// governor's caching allocator keeps the blocks); kernels and GEMMs run in order on one compute
// stream; copies between host and device run on a second stream, ordered against the compute
// stream by events, so that an offload copy into page-locked host memory (allocate_host) runs
// beside the kernels after it. Kernels compiled by
// jit/ (a cubin or an AMD code object for arch()) are loaded with load_kernel and launched on the
// compute stream. GEMMs go through cuBLAS or rocBLAS (gpu_blas.h), loaded at first use.
//
//   auto gpu = devices::cuda::make_cuda_device(0);      // throws DeviceError: no driver, no GPU
//   void* x = gpu->allocate(bytes);
//   gpu->copy(x, host, bytes, devices::CopyKind::kHostToDevice);
//   auto f = gpu->load_kernel(cubin, "k0");
//   gpu->launch(f, {.grid = rows, .block = 256}, params);
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "devices/device.h"
#include "devices/gpu/gpu_runtime.h"
#include "devices/gpu/host_block_cache.h"

namespace disc::devices {

class GpuBlas;

class GpuDevice final : public Device {
 public:
  using Kernel = GpuRuntime::Function;

  // host_threads <= 0: every hardware thread (for the nodes staged on the host).
  GpuDevice(std::unique_ptr<GpuRuntime> runtime, int host_threads);
  ~GpuDevice() override;

  std::string name() const override { return rt_->name(); }
  bool is_host() const override { return false; }
  MemoryInfo memory_info() const override { return rt_->memory_info(); }
  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes, CopyKind kind) override;
  void synchronize() override;
  // Page-locked, kept for reuse (host_block_cache.h): every copy of such memory runs on the copy
  // stream, in order.
  void* allocate_host(size_t bytes) override;
  void deallocate_host(void* p, size_t bytes) override;
  void gemm(const GemmArgs& g) override;
  int threads() const override { return host_threads_; }
  // f32 GEMMs in TF32 on the tensor cores from now on (products of 10-bit mantissas, sums in f32:
  // faster, and no longer the CPU's numbers within f32 rounding). Throws InvalidArgument on a GPU
  // whose BLAS has no such mode (rocBLAS).
  void set_tf32(bool on);

  std::string product() const { return rt_->product(); }
  std::string arch() const { return rt_->arch(); }
  int multiprocessors() const { return rt_->multiprocessors(); }
  // Loads a compiled image (cubin, PTX or AMD code object) and returns its function `name`; the
  // module stays loaded as long as the device.
  Kernel load_kernel(const std::string& image, const std::string& name);
  // Launches on the compute stream; params[i] points at the kernel's i-th argument.
  void launch(Kernel f, const LaunchShape& shape, void** params);
  // Sets [p, p + bytes) to 0 on the compute stream.
  void zero(void* p, size_t bytes);

 private:
  std::unique_ptr<GpuRuntime> rt_;
  int host_threads_;
  GpuRuntime::Stream compute_ = nullptr, copies_ = nullptr;
  GpuRuntime::Event computed_ = nullptr, copied_ = nullptr;
  std::vector<GpuRuntime::Module> modules_;
  std::once_flag blas_once_;
  std::unique_ptr<GpuBlas> blas_;
  std::atomic<bool> tf32_ = false;
  HostBlockCache host_blocks_;  // last: freed before the runtime goes
};

// Throws DeviceError when `api`:`ordinal` is not one of the `count` devices there are, naming them.
void check_ordinal(const std::string& api, int ordinal, int count);

// What a vendor's `count` returns, or 0 when it throws (no driver, no runtime); `why` gets the
// reason when it is 0 (`none` when the call found no device).
int device_count_or_zero(const std::function<int()>& count, const std::string& none,
                         std::string* why);

}  // namespace disc::devices
