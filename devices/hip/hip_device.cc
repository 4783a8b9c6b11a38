// The HIP runtime as a GpuRuntime; see hip_device.h.
#include "devices/hip/hip_device.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/error.h"
#include "devices/hip/hip_api.h"

namespace disc::devices::hip {
namespace {

class HipRuntime final : public GpuRuntime {
 public:
  explicit HipRuntime(int ordinal) : api_(hip_api()), ordinal_(ordinal) {
    make_current();
    char name[256] = {};
    check(api_.hipDeviceGetName(name, sizeof name, ordinal), "hipDeviceGetName");
    product_ = name;
    check(api_.hipDeviceGetAttribute(&cus_, kHipAttrMultiprocessorCount, ordinal),
          "hipDeviceGetAttribute");
    arch_ = kfd_arch(visible_gpu(ordinal));
  }

  std::string name() const override { return "hip:" + std::to_string(ordinal_); }
  std::string product() const override { return product_; }
  std::string arch() const override { return arch_; }
  int multiprocessors() const override { return cus_; }
  BlasLibrary blas() const override { return BlasLibrary::kRocblas; }
  void make_current() const override { check(api_.hipSetDevice(ordinal_), "hipSetDevice"); }

  MemoryInfo memory_info() const override {
    make_current();
    size_t free = 0, total = 0;
    check(api_.hipMemGetInfo(&free, &total), "hipMemGetInfo");
    return {static_cast<int64_t>(total), static_cast<int64_t>(free)};
  }
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    check(api_.hipMalloc(&p, bytes), name() + " hipMalloc(" + std::to_string(bytes) + " bytes)");
    return p;
  }
  void free(void* p) override { check(api_.hipFree(p), "hipFree"); }
  void* allocate_host(size_t bytes) override {
    void* p = nullptr;
    check(api_.hipHostMalloc(&p, bytes, 0), "hipHostMalloc(" + std::to_string(bytes) + " bytes)");
    return p;
  }
  void free_host(void* p) override { check(api_.hipHostFree(p), "hipHostFree"); }
  void copy(void* dst, const void* src, size_t bytes, CopyKind kind, Stream s) override {
    const int k = kind == CopyKind::kHostToDevice   ? kHipMemcpyHostToDevice
                  : kind == CopyKind::kDeviceToHost ? kHipMemcpyDeviceToHost
                                                    : kHipMemcpyDeviceToDevice;
    check(api_.hipMemcpyAsync(dst, src, bytes, k, stream(s)), "hipMemcpyAsync");
  }
  void zero(void* p, size_t bytes, Stream s) override {
    check(api_.hipMemsetAsync(p, 0, bytes, stream(s)), "hipMemsetAsync");
  }

  Stream create_stream() override {
    hipStream_t s = nullptr;
    check(api_.hipStreamCreateWithFlags(&s, kHipStreamNonBlocking), "hipStreamCreateWithFlags");
    return s;
  }
  void destroy_stream(Stream s) override {
    check(api_.hipStreamDestroy(stream(s)), "hipStreamDestroy");
  }
  void synchronize(Stream s) override {
    check(api_.hipStreamSynchronize(stream(s)), "hipStreamSynchronize");
  }
  Event create_event() override {
    hipEvent_t e = nullptr;
    check(api_.hipEventCreateWithFlags(&e, kHipEventDisableTiming), "hipEventCreateWithFlags");
    return e;
  }
  void destroy_event(Event e) override { check(api_.hipEventDestroy(event(e)), "hipEventDestroy"); }
  void record(Event e, Stream s) override {
    check(api_.hipEventRecord(event(e), stream(s)), "hipEventRecord");
  }
  void wait(Stream s, Event e) override {
    check(api_.hipStreamWaitEvent(stream(s), event(e), 0), "hipStreamWaitEvent");
  }

  Module load_module(const std::string& image) override {
    hipModule_t m = nullptr;
    check(api_.hipModuleLoadData(&m, image.data()), "hipModuleLoadData");
    return m;
  }
  void unload_module(Module m) override {
    check(api_.hipModuleUnload(static_cast<hipModule_t>(m)), "hipModuleUnload");
  }
  Function function(Module m, const std::string& fn) override {
    hipFunction_t f = nullptr;
    check(api_.hipModuleGetFunction(&f, static_cast<hipModule_t>(m), fn.c_str()),
          "hipModuleGetFunction(" + fn + ")");
    return f;
  }
  void launch(Function f, const LaunchShape& sh, Stream s, void** params) override {
    check(api_.hipModuleLaunchKernel(static_cast<hipFunction_t>(f), sh.grid, 1, 1, sh.block, 1, 1,
                                     sh.shared_bytes, stream(s), params, nullptr),
          "hipModuleLaunchKernel(grid " + std::to_string(sh.grid) + ", block " +
              std::to_string(sh.block) + ")");
  }

 private:
  static hipStream_t stream(Stream s) { return static_cast<hipStream_t>(s); }
  static hipEvent_t event(Event e) { return static_cast<hipEvent_t>(e); }
  void check(hipError_t e, const std::string& what) const { hip::check(api_, e, what); }
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

  const HipApi& api_;
  int ordinal_;
  std::string product_, arch_;
  int cus_ = 0;
};

// The devices the HIP runtime sees; throws when it is not there.
int count_devices() {
  const HipApi& api = hip_api();
  int n = 0;
  check(api, api.hipGetDeviceCount(&n), "hipGetDeviceCount");
  return n;
}

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
  return device_count_or_zero(count_devices, "the HIP runtime sees no GPU", why);
}

std::unique_ptr<GpuDevice> make_hip_device(int ordinal, int host_threads) {
  check_ordinal("hip", ordinal, count_devices());
  return std::make_unique<GpuDevice>(std::make_unique<HipRuntime>(ordinal), host_threads);
}

}  // namespace disc::devices::hip
