// The HIP runtime as a GpuRuntime; see hip_device.h.
#include "devices/hip/hip_device.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/error.h"
#include "devices/gpu/vendor_runtime.h"
#include "devices/hip/hip_api.h"

namespace disc::devices::hip {
namespace {

// The HIP runtime as VendorRuntime (vendor_runtime.h) reads it.
struct Hip {
  using Api = HipApi;
  using Result = hipError_t;
  using DevicePtr = void*;
  using Stream = hipStream_t;
  using Event = hipEvent_t;
  using Module = hipModule_t;
  using Function = hipFunction_t;
  static constexpr const char* kName = "hip";
  static constexpr BlasLibrary kBlas = BlasLibrary::kRocblas;
  static constexpr unsigned kStreamNonBlocking = kHipStreamNonBlocking;
  static constexpr unsigned kEventDisableTiming = kHipEventDisableTiming;
  static const Api& api() { return hip_api(); }
  static void check(const Api& api, Result e, const std::string& what) { hip::check(api, e, what); }

  static constexpr auto device_count = DISC_VENDOR_CALL(hipGetDeviceCount);
  static constexpr auto mem_get_info = DISC_VENDOR_CALL(hipMemGetInfo);
  static constexpr auto mem_alloc = DISC_VENDOR_CALL(hipMalloc);
  static constexpr auto mem_free = DISC_VENDOR_CALL(hipFree);
  static constexpr auto mem_free_host = DISC_VENDOR_CALL(hipHostFree);
  static constexpr auto mem_set = DISC_VENDOR_CALL(hipMemsetAsync);
  static constexpr auto stream_create = DISC_VENDOR_CALL(hipStreamCreateWithFlags);
  static constexpr auto stream_destroy = DISC_VENDOR_CALL(hipStreamDestroy);
  static constexpr auto stream_synchronize = DISC_VENDOR_CALL(hipStreamSynchronize);
  static constexpr auto stream_wait_event = DISC_VENDOR_CALL(hipStreamWaitEvent);
  static constexpr auto event_create = DISC_VENDOR_CALL(hipEventCreateWithFlags);
  static constexpr auto event_destroy = DISC_VENDOR_CALL(hipEventDestroy);
  static constexpr auto event_record = DISC_VENDOR_CALL(hipEventRecord);
  static constexpr auto module_load = DISC_VENDOR_CALL(hipModuleLoadData);
  static constexpr auto module_unload = DISC_VENDOR_CALL(hipModuleUnload);
  static constexpr auto module_function = DISC_VENDOR_CALL(hipModuleGetFunction);
  static constexpr auto launch_kernel = DISC_VENDOR_CALL(hipModuleLaunchKernel);
};

class HipRuntime final : public VendorRuntime<Hip> {
 public:
  explicit HipRuntime(int ordinal) : VendorRuntime(ordinal) {
    make_current();
    char name[256] = {};
    check(api_.hipDeviceGetName(name, sizeof name, ordinal), "hipDeviceGetName");
    product_ = name;
    check(api_.hipDeviceGetAttribute(&multiprocessors_, kHipAttrMultiprocessorCount, ordinal),
          "hipDeviceGetAttribute");
    arch_ = kfd_arch(visible_gpu(ordinal));
  }

  void make_current() const override { check(api_.hipSetDevice(ordinal_), "hipSetDevice"); }

  void* allocate_host(size_t bytes) override {
    void* p = nullptr;
    check(api_.hipHostMalloc(&p, bytes, 0), "hipHostMalloc(" + std::to_string(bytes) + " bytes)");
    return p;
  }
  // One call with a kind, where CUDA has one call a direction.
  void copy(void* dst, const void* src, size_t bytes, CopyKind kind, Stream s) override {
    const int k = kind == CopyKind::kHostToDevice   ? kHipMemcpyHostToDevice
                  : kind == CopyKind::kDeviceToHost ? kHipMemcpyDeviceToHost
                                                    : kHipMemcpyDeviceToDevice;
    check(api_.hipMemcpyAsync(dst, src, bytes, k, stream(s)), "hipMemcpyAsync");
  }

 private:
  // The kernel driver's index of HIP's device `ordinal`: HIP_VISIBLE_DEVICES renumbers them.
  static int visible_gpu(int ordinal) {
    const char* visible = std::getenv("HIP_VISIBLE_DEVICES");
    if (!visible || !*visible) return ordinal;
    std::stringstream list(visible);
    std::string item;
    for (int i = 0; std::getline(list, item, ','); ++i)
      if (i == ordinal) return std::atoi(item.c_str());
    return ordinal;
  }
};

}  // namespace

std::string kfd_arch(int gpu, const std::string& nodes) {
  std::map<int, int> versions;  // node number -> gfx_target_version, GPU nodes only
  std::error_code ec;
  for (const auto& node : std::filesystem::directory_iterator(nodes, ec)) {
    std::ifstream props(node.path() / "properties");
    std::string key;
    int64_t value = 0;
    while (props >> key >> value)
      if (key == "gfx_target_version" && value > 0)
        versions[std::atoi(node.path().filename().c_str())] = static_cast<int>(value);
  }
  if (gpu < 0 || gpu >= static_cast<int>(versions.size()))
    throw DeviceError("hip: the kernel driver lists " + std::to_string(versions.size()) +
                      " GPU(s) under " + nodes + ", not GPU " + std::to_string(gpu));
  const int v = std::next(versions.begin(), gpu)->second;  // major * 10000 + minor * 100 + stepping
  char arch[32];
  std::snprintf(arch, sizeof arch, "gfx%d%x%x", v / 10000, v / 100 % 100, v % 100);
  return arch;
}

int hip_device_count(std::string* why) {
  return device_count_or_zero(HipRuntime::count_devices, "the HIP runtime sees no GPU", why);
}

std::unique_ptr<GpuDevice> make_hip_device(int ordinal, int host_threads) {
  check_ordinal("hip", ordinal, HipRuntime::count_devices());
  return std::make_unique<GpuDevice>(std::make_unique<HipRuntime>(ordinal), host_threads);
}

}  // namespace disc::devices::hip
