// The CUDA device; see cuda_device.h.
#include "devices/cuda/cuda_device.h"

#include <thread>
#include <vector>

#include "devices/cuda/cublas.h"
#include "ir/error.h"

namespace disc::devices::cuda {
namespace {

CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

class Gpu final : public CudaDevice {
 public:
  Gpu(int ordinal, int host_threads) : api_(driver()), ordinal_(ordinal), host_threads_(host_threads) {
    check(api_.cuDeviceGet(&dev_, ordinal), "cuDeviceGet(" + std::to_string(ordinal) + ")");
    char name[256] = {};
    check(api_.cuDeviceGetName(name, sizeof name, dev_), "cuDeviceGetName");
    product_ = name;
    int major = 0, minor = 0;
    check(api_.cuDeviceGetAttribute(&major, kAttrComputeCapabilityMajor, dev_), "cuDeviceGetAttribute");
    check(api_.cuDeviceGetAttribute(&minor, kAttrComputeCapabilityMinor, dev_), "cuDeviceGetAttribute");
    check(api_.cuDeviceGetAttribute(&sms_, kAttrMultiprocessorCount, dev_), "cuDeviceGetAttribute");
    arch_ = "sm_" + std::to_string(major * 10 + minor);
    // The primary context: the one the CUDA runtime (inside cuBLAS) uses too.
    check(api_.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
    make_current();
    check(api_.cuStreamCreate(&compute_, kStreamNonBlocking), "cuStreamCreate");
    check(api_.cuStreamCreate(&copies_, kStreamNonBlocking), "cuStreamCreate");
    check(api_.cuEventCreate(&computed_, kEventDisableTiming), "cuEventCreate");
    check(api_.cuEventCreate(&copied_, kEventDisableTiming), "cuEventCreate");
    blas_ = std::make_unique<Cublas>(compute_);
  }

  ~Gpu() override {
    make_current();
    api_.cuStreamSynchronize(compute_);
    api_.cuStreamSynchronize(copies_);
    blas_.reset();
    for (CUmodule m : modules_) api_.cuModuleUnload(m);
    api_.cuEventDestroy(computed_);
    api_.cuEventDestroy(copied_);
    api_.cuStreamDestroy(compute_);
    api_.cuStreamDestroy(copies_);
    api_.cuDevicePrimaryCtxRelease(dev_);
  }

  std::string name() const override { return "cuda:" + std::to_string(ordinal_); }
  bool is_host() const override { return false; }
  MemoryInfo memory_info() const override {
    make_current();
    size_t free = 0, total = 0;
    check(api_.cuMemGetInfo(&free, &total), "cuMemGetInfo");
    return {static_cast<int64_t>(total), static_cast<int64_t>(free)};
  }

  void* allocate(size_t bytes) override {
    make_current();
    const size_t size = allocation_size(bytes);
    if (size == 0) throw OutOfMemory(name() + ": cannot allocate " + std::to_string(bytes) + " bytes");
    CUdeviceptr p = 0;
    check(api_.cuMemAlloc(&p, size), name() + " cuMemAlloc(" + std::to_string(size) + " bytes)");
    return reinterpret_cast<void*>(p);  // 256-byte aligned: more than kAllocAlignment
  }
  void deallocate(void* p, size_t) override {
    make_current();
    // Kernels queued on the block may still run: cuMemFree must come after them.
    check(api_.cuStreamSynchronize(compute_), "cuStreamSynchronize");
    check(api_.cuMemFree(dptr(p)), "cuMemFree");
  }

  void copy(void* dst, const void* src, size_t bytes, CopyKind kind) override {
    if (bytes == 0) return;
    make_current();
    if (kind == CopyKind::kDeviceToDevice) {
      check(api_.cuMemcpyDtoDAsync(dptr(dst), dptr(src), bytes, compute_), "cuMemcpyDtoDAsync");
      return;
    }
    // The copy waits for the kernels before it, and the kernels after it wait for the copy.
    check(api_.cuEventRecord(computed_, compute_), "cuEventRecord");
    check(api_.cuStreamWaitEvent(copies_, computed_, 0), "cuStreamWaitEvent");
    if (kind == CopyKind::kHostToDevice)
      check(api_.cuMemcpyHtoDAsync(dptr(dst), src, bytes, copies_), "cuMemcpyHtoDAsync");
    else
      check(api_.cuMemcpyDtoHAsync(dst, dptr(src), bytes, copies_), "cuMemcpyDtoHAsync");
    check(api_.cuEventRecord(copied_, copies_), "cuEventRecord");
    check(api_.cuStreamWaitEvent(compute_, copied_, 0), "cuStreamWaitEvent");
    // A copy to host memory is read by the host as soon as copy() returns.
    if (kind == CopyKind::kDeviceToHost) check(api_.cuStreamSynchronize(copies_), "cuStreamSynchronize");
  }

  void synchronize() override {
    make_current();
    check(api_.cuStreamSynchronize(copies_), "cuStreamSynchronize");
    check(api_.cuStreamSynchronize(compute_), "cuStreamSynchronize");
  }

  void gemm(const GemmArgs& g) override {
    make_current();
    blas_->gemm(g);
  }
  int threads() const override {
    return host_threads_ > 0 ? host_threads_ : static_cast<int>(std::thread::hardware_concurrency());
  }

  std::string product() const override { return product_; }
  std::string arch() const override { return arch_; }
  int multiprocessors() const override { return sms_; }

  CUfunction load_kernel(const std::string& image, const std::string& fn) override {
    make_current();
    CUmodule m = nullptr;
    check(api_.cuModuleLoadData(&m, image.c_str()), "cuModuleLoadData(" + fn + ")");
    modules_.push_back(m);
    CUfunction f = nullptr;
    check(api_.cuModuleGetFunction(&f, m, fn.c_str()), "cuModuleGetFunction(" + fn + ")");
    return f;
  }
  void launch(CUfunction f, const LaunchShape& s, void** params) override {
    if (s.grid == 0) return;
    make_current();
    check(api_.cuLaunchKernel(f, s.grid, 1, 1, s.block, 1, 1, s.shared_bytes, compute_, params, nullptr),
          "cuLaunchKernel(grid " + std::to_string(s.grid) + ", block " + std::to_string(s.block) + ")");
  }
  void zero(void* p, size_t bytes) override {
    if (bytes == 0) return;
    make_current();
    check(api_.cuMemsetD8Async(dptr(p), 0, bytes, compute_), "cuMemsetD8Async");
  }

 private:
  // The context is current per thread; any thread may call the device.
  void make_current() const { check(api_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); }
  void check(CUresult e, const std::string& what) const { cuda::check(api_, e, what); }

  const DriverApi& api_;
  int ordinal_;
  int host_threads_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream compute_ = nullptr, copies_ = nullptr;
  CUevent computed_ = nullptr, copied_ = nullptr;
  std::string product_, arch_;
  int sms_ = 0;
  std::vector<CUmodule> modules_;
  std::unique_ptr<Cublas> blas_;
};

}  // namespace

int cuda_device_count(std::string* why) {
  try {
    const DriverApi& api = driver();
    int n = 0;
    check(api, api.cuDeviceGetCount(&n), "cuDeviceGetCount");
    if (n == 0 && why) *why = "the CUDA driver sees no GPU";
    return n;
  } catch (const Error& e) {
    if (why) *why = e.what();
    return 0;
  }
}

std::unique_ptr<CudaDevice> make_cuda_device(int ordinal, int host_threads) {
  const DriverApi& api = driver();
  int n = 0;
  check(api, api.cuDeviceGetCount(&n), "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= n)
    throw DeviceError("cuda:" + std::to_string(ordinal) + " does not exist: this machine has " +
                      std::to_string(n) + " CUDA device(s)" +
                      (n > 0 ? ", cuda:0 to cuda:" + std::to_string(n - 1) : std::string()));
  return std::make_unique<Gpu>(ordinal, host_threads);
}

}  // namespace disc::devices::cuda
