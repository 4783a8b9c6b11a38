#include "devices/cuda/driver_api.h"

#include "base/error.h"
#include "devices/shared_library.h"

namespace disc::devices::cuda {
namespace {

struct LoadedDriver {
  SharedLibrary lib;
  DriverApi api;
  std::string error;  // empty when the driver is usable
};

LoadedDriver load() {
  LoadedDriver d;
  d.lib = SharedLibrary::open({"libcuda.so.1"});
  if (!d.lib) {
    d.error = "no CUDA driver: " + d.lib.error() +
              ": install the NVIDIA driver (on a machine with an NVIDIA GPU)";
    return d;
  }
#define DISC_CUDA_LOAD(member, exported, ret, params)                                       \
  d.api.member = d.lib.symbol<ret(*) params>(exported);                                     \
  if (d.api.member == nullptr) {                                                            \
    d.error = "the CUDA driver in " + d.lib.name() +                                        \
              " has no " exported                                                           \
              ": it is older than disc needs (CUDA 12 or later); update the NVIDIA driver"; \
    return d;                                                                               \
  }
  DISC_CUDA_DRIVER_FUNCTIONS(DISC_CUDA_LOAD)
#undef DISC_CUDA_LOAD
  if (const CUresult e = d.api.cuInit(0); e != kCudaSuccess)
    d.error = "the CUDA driver did not start: cuInit: " + error_text(d.api, e) +
              " (no GPU visible, or the driver and its kernel module disagree: see nvidia-smi)";
  return d;
}

}  // namespace

const DriverApi& driver() {
  static const LoadedDriver loaded = load();
  if (!loaded.error.empty()) throw DeviceError(loaded.error);
  return loaded.api;
}

std::string error_text(const DriverApi& api, CUresult e) {
  const char* name = nullptr;
  const char* text = nullptr;
  api.cuGetErrorName(e, &name);
  api.cuGetErrorString(e, &text);
  return std::string(name ? name : "CUDA error " + std::to_string(e)) +
         (text ? " (" + std::string(text) + ")" : "");
}

void check(const DriverApi& api, CUresult e, const std::string& what) {
  if (e == kCudaSuccess) return;
  const std::string m = "cuda: " + what + " failed: " + error_text(api, e);
  if (e == kCudaErrorOutOfMemory) throw OutOfMemory(m);
  throw DeviceError(m);
}

}  // namespace disc::devices::cuda
