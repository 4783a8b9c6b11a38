#include "devices/hip/hip_api.h"

#include "base/error.h"
#include "devices/shared_library.h"

namespace disc::devices::hip {
namespace {

struct LoadedRuntime {
  SharedLibrary lib;
  HipApi api;
  std::string error;  // empty when the runtime is usable
};

LoadedRuntime load() {
  LoadedRuntime d;
  d.lib = SharedLibrary::open({"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"});
  if (!d.lib) {
    d.error = "no HIP runtime: " + d.lib.error() +
              ": install Debian's libamdhip64-5 (on a machine with an AMD GPU)";
    return d;
  }
#define DISC_HIP_LOAD(member, exported, ret, params)                                  \
  d.api.member = d.lib.symbol<ret(*) params>(exported);                               \
  if (d.api.member == nullptr) {                                                      \
    d.error = "the HIP runtime in " + d.lib.name() + " has no " exported ": too old"; \
    return d;                                                                         \
  }
  DISC_HIP_FUNCTIONS(DISC_HIP_LOAD)
#undef DISC_HIP_LOAD
  if (const hipError_t e = d.api.hipInit(0); e != kHipSuccess)
    d.error = "the HIP runtime did not start: hipInit: " + std::string(d.api.hipGetErrorName(e)) +
              " (no AMD GPU visible: no /dev/kfd, or no permission to it; see rocminfo)";
  return d;
}

}  // namespace

const HipApi& hip_api() {
  static const LoadedRuntime loaded = load();
  if (!loaded.error.empty()) throw DeviceError(loaded.error);
  return loaded.api;
}

void check(const HipApi& api, hipError_t e, const std::string& what) {
  if (e == kHipSuccess) return;
  const std::string m =
      "hip: " + what + " failed: " + api.hipGetErrorName(e) + " (" + api.hipGetErrorString(e) + ")";
  if (e == kHipErrorOutOfMemory) throw OutOfMemory(m);
  throw DeviceError(m);
}

}  // namespace disc::devices::hip
