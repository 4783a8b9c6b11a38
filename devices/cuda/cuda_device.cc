// The CUDA Driver API as a GpuRuntime; see cuda_device.h.
#include "devices/cuda/cuda_device.h"

#include "base/error.h"
#include "devices/cuda/driver_api.h"
#include "devices/gpu/vendor_runtime.h"

namespace disc::devices::cuda {
namespace {

// The CUDA Driver API as VendorRuntime (vendor_runtime.h) reads it.
struct Cuda {
  using Api = DriverApi;
  using Result = CUresult;
  using DevicePtr = CUdeviceptr;
  using Stream = CUstream;
  using Event = CUevent;
  using Module = CUmodule;
  using Function = CUfunction;
  static constexpr const char* kName = "cuda";
  static constexpr BlasLibrary kBlas = BlasLibrary::kCublas;
  static constexpr unsigned kStreamNonBlocking = cuda::kStreamNonBlocking;
  static constexpr unsigned kEventDisableTiming = cuda::kEventDisableTiming;
  static const Api& api() { return driver(); }
  static void check(const Api& api, Result e, const std::string& what) {
    cuda::check(api, e, what);
  }

  static constexpr auto device_count = DISC_VENDOR_CALL(cuDeviceGetCount);
  static constexpr auto mem_get_info = DISC_VENDOR_CALL(cuMemGetInfo);
  static constexpr auto mem_alloc = DISC_VENDOR_CALL(cuMemAlloc);
  static constexpr auto mem_free = DISC_VENDOR_CALL(cuMemFree);
  static constexpr auto mem_free_host = DISC_VENDOR_CALL(cuMemFreeHost);
  static constexpr auto mem_set = DISC_VENDOR_CALL(cuMemsetD8Async);
  static constexpr auto stream_create = DISC_VENDOR_CALL(cuStreamCreate);
  static constexpr auto stream_destroy = DISC_VENDOR_CALL(cuStreamDestroy);
  static constexpr auto stream_synchronize = DISC_VENDOR_CALL(cuStreamSynchronize);
  static constexpr auto stream_wait_event = DISC_VENDOR_CALL(cuStreamWaitEvent);
  static constexpr auto event_create = DISC_VENDOR_CALL(cuEventCreate);
  static constexpr auto event_destroy = DISC_VENDOR_CALL(cuEventDestroy);
  static constexpr auto event_record = DISC_VENDOR_CALL(cuEventRecord);
  static constexpr auto module_load = DISC_VENDOR_CALL(cuModuleLoadData);
  static constexpr auto module_unload = DISC_VENDOR_CALL(cuModuleUnload);
  static constexpr auto module_function = DISC_VENDOR_CALL(cuModuleGetFunction);
  static constexpr auto launch_kernel = DISC_VENDOR_CALL(cuLaunchKernel);
};

class DriverRuntime final : public VendorRuntime<Cuda> {
 public:
  explicit DriverRuntime(int ordinal) : VendorRuntime(ordinal) {
    check(api_.cuDeviceGet(&dev_, ordinal), "cuDeviceGet(" + std::to_string(ordinal) + ")");
    char name[256] = {};
    check(api_.cuDeviceGetName(name, sizeof name, dev_), "cuDeviceGetName");
    product_ = name;
    int major = 0, minor = 0;
    check(api_.cuDeviceGetAttribute(&major, kAttrComputeCapabilityMajor, dev_),
          "cuDeviceGetAttribute");
    check(api_.cuDeviceGetAttribute(&minor, kAttrComputeCapabilityMinor, dev_),
          "cuDeviceGetAttribute");
    check(api_.cuDeviceGetAttribute(&multiprocessors_, kAttrMultiprocessorCount, dev_),
          "cuDeviceGetAttribute");
    arch_ = "sm_" + std::to_string(major * 10 + minor);
    // The primary context: the one the CUDA runtime inside cuBLAS uses too.
    check(api_.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
  }
  ~DriverRuntime() override { api_.cuDevicePrimaryCtxRelease(dev_); }

  void make_current() const override { check(api_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); }

  void* allocate_host(size_t bytes) override {
    void* p = nullptr;
    check(api_.cuMemAllocHost(&p, bytes), "cuMemAllocHost(" + std::to_string(bytes) + " bytes)");
    return p;
  }
  // One call a direction, where HIP has one call with a kind.
  void copy(void* dst, const void* src, size_t bytes, CopyKind kind, Stream s) override {
    switch (kind) {
      case CopyKind::kHostToDevice:
        return check(api_.cuMemcpyHtoDAsync(device_ptr(dst), src, bytes, stream(s)),
                     "cuMemcpyHtoDAsync");
      case CopyKind::kDeviceToHost:
        return check(api_.cuMemcpyDtoHAsync(dst, device_ptr(src), bytes, stream(s)),
                     "cuMemcpyDtoHAsync");
      case CopyKind::kDeviceToDevice:
        return check(api_.cuMemcpyDtoDAsync(device_ptr(dst), device_ptr(src), bytes, stream(s)),
                     "cuMemcpyDtoDAsync");
    }
  }

 private:
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
};

}  // namespace

int cuda_device_count(std::string* why) {
  return device_count_or_zero(DriverRuntime::count_devices, "the CUDA driver sees no GPU", why);
}

std::unique_ptr<GpuDevice> make_cuda_device(int ordinal, int host_threads) {
  check_ordinal("cuda", ordinal, DriverRuntime::count_devices());
  return std::make_unique<GpuDevice>(std::make_unique<DriverRuntime>(ordinal), host_threads);
}

}  // namespace disc::devices::cuda
