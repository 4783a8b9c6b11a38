// The CUDA Driver API as a GpuRuntime; see cuda_device.h.
#include "devices/cuda/cuda_device.h"

#include "base/error.h"
#include "devices/cuda/driver_api.h"

namespace disc::devices::cuda {
namespace {

CUdeviceptr dptr(const void* p) {
  return reinterpret_cast<CUdeviceptr>(p);
}

class DriverRuntime final : public GpuRuntime {
 public:
  explicit DriverRuntime(int ordinal) : api_(driver()), ordinal_(ordinal) {
    check(api_.cuDeviceGet(&dev_, ordinal), "cuDeviceGet(" + std::to_string(ordinal) + ")");
    char name[256] = {};
    check(api_.cuDeviceGetName(name, sizeof name, dev_), "cuDeviceGetName");
    product_ = name;
    int major = 0, minor = 0;
    check(api_.cuDeviceGetAttribute(&major, kAttrComputeCapabilityMajor, dev_),
          "cuDeviceGetAttribute");
    check(api_.cuDeviceGetAttribute(&minor, kAttrComputeCapabilityMinor, dev_),
          "cuDeviceGetAttribute");
    check(api_.cuDeviceGetAttribute(&sms_, kAttrMultiprocessorCount, dev_), "cuDeviceGetAttribute");
    arch_ = "sm_" + std::to_string(major * 10 + minor);
    // The primary context: the one the CUDA runtime inside cuBLAS uses too.
    check(api_.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
  }
  ~DriverRuntime() override { api_.cuDevicePrimaryCtxRelease(dev_); }

  std::string name() const override { return "cuda:" + std::to_string(ordinal_); }
  std::string product() const override { return product_; }
  std::string arch() const override { return arch_; }
  int multiprocessors() const override { return sms_; }
  BlasLibrary blas() const override { return BlasLibrary::kCublas; }
  void make_current() const override { check(api_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); }

  MemoryInfo memory_info() const override {
    make_current();
    size_t free = 0, total = 0;
    check(api_.cuMemGetInfo(&free, &total), "cuMemGetInfo");
    return {static_cast<int64_t>(total), static_cast<int64_t>(free)};
  }
  void* allocate(size_t bytes) override {
    CUdeviceptr p = 0;
    check(api_.cuMemAlloc(&p, bytes), name() + " cuMemAlloc(" + std::to_string(bytes) + " bytes)");
    return reinterpret_cast<void*>(p);
  }
  void free(void* p) override { check(api_.cuMemFree(dptr(p)), "cuMemFree"); }
  void* allocate_host(size_t bytes) override {
    void* p = nullptr;
    check(api_.cuMemAllocHost(&p, bytes), "cuMemAllocHost(" + std::to_string(bytes) + " bytes)");
    return p;
  }
  void free_host(void* p) override { check(api_.cuMemFreeHost(p), "cuMemFreeHost"); }
  void copy(void* dst, const void* src, size_t bytes, CopyKind kind, Stream s) override {
    switch (kind) {
      case CopyKind::kHostToDevice:
        return check(api_.cuMemcpyHtoDAsync(dptr(dst), src, bytes, stream(s)), "cuMemcpyHtoDAsync");
      case CopyKind::kDeviceToHost:
        return check(api_.cuMemcpyDtoHAsync(dst, dptr(src), bytes, stream(s)), "cuMemcpyDtoHAsync");
      case CopyKind::kDeviceToDevice:
        return check(api_.cuMemcpyDtoDAsync(dptr(dst), dptr(src), bytes, stream(s)),
                     "cuMemcpyDtoDAsync");
    }
  }
  void zero(void* p, size_t bytes, Stream s) override {
    check(api_.cuMemsetD8Async(dptr(p), 0, bytes, stream(s)), "cuMemsetD8Async");
  }

  Stream create_stream() override {
    CUstream s = nullptr;
    check(api_.cuStreamCreate(&s, kStreamNonBlocking), "cuStreamCreate");
    return s;
  }
  void destroy_stream(Stream s) override {
    check(api_.cuStreamDestroy(stream(s)), "cuStreamDestroy");
  }
  void synchronize(Stream s) override {
    check(api_.cuStreamSynchronize(stream(s)), "cuStreamSynchronize");
  }
  Event create_event() override {
    CUevent e = nullptr;
    check(api_.cuEventCreate(&e, kEventDisableTiming), "cuEventCreate");
    return e;
  }
  void destroy_event(Event e) override { check(api_.cuEventDestroy(event(e)), "cuEventDestroy"); }
  void record(Event e, Stream s) override {
    check(api_.cuEventRecord(event(e), stream(s)), "cuEventRecord");
  }
  void wait(Stream s, Event e) override {
    check(api_.cuStreamWaitEvent(stream(s), event(e), 0), "cuStreamWaitEvent");
  }

  Module load_module(const std::string& image) override {
    CUmodule m = nullptr;
    check(api_.cuModuleLoadData(&m, image.c_str()), "cuModuleLoadData");
    return m;
  }
  void unload_module(Module m) override {
    check(api_.cuModuleUnload(static_cast<CUmodule>(m)), "cuModuleUnload");
  }
  Function function(Module m, const std::string& fn) override {
    CUfunction f = nullptr;
    check(api_.cuModuleGetFunction(&f, static_cast<CUmodule>(m), fn.c_str()),
          "cuModuleGetFunction(" + fn + ")");
    return f;
  }
  void launch(Function f, const LaunchShape& sh, Stream s, void** params) override {
    check(api_.cuLaunchKernel(static_cast<CUfunction>(f), sh.grid, 1, 1, sh.block, 1, 1,
                              sh.shared_bytes, stream(s), params, nullptr),
          "cuLaunchKernel(grid " + std::to_string(sh.grid) + ", block " + std::to_string(sh.block) +
              ")");
  }

 private:
  static CUstream stream(Stream s) { return static_cast<CUstream>(s); }
  static CUevent event(Event e) { return static_cast<CUevent>(e); }
  void check(CUresult e, const std::string& what) const { cuda::check(api_, e, what); }

  const DriverApi& api_;
  int ordinal_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  std::string product_, arch_;
  int sms_ = 0;
};

// The devices the CUDA driver sees; throws when it is not there.
int count_devices() {
  const DriverApi& api = driver();
  int n = 0;
  check(api, api.cuDeviceGetCount(&n), "cuDeviceGetCount");
  return n;
}

}  // namespace

int cuda_device_count(std::string* why) {
  return device_count_or_zero(count_devices, "the CUDA driver sees no GPU", why);
}

std::unique_ptr<GpuDevice> make_cuda_device(int ordinal, int host_threads) {
  check_ordinal("cuda", ordinal, count_devices());
  return std::make_unique<GpuDevice>(std::make_unique<DriverRuntime>(ordinal), host_threads);
}

}  // namespace disc::devices::cuda
