// The HIP runtime, loaded at run time from libamdhip64.so (Debian 12's libamdhip64-5, or ROCm 6's),
// so that one binary runs with or without an AMD GPU. The types are the runtime's ABI, declared
// here so that a build needs no HIP headers.
//
//   const hip::HipApi& api = hip::hip_api();   // throws DeviceError: no runtime, no GPU
//   hip::check(api, api.hipMalloc(&p, bytes), "hipMalloc");
#pragma once

#include <cstddef>
#include <string>

namespace disc::devices::hip {

using hipError_t = int;
using hipStream_t = struct ihipStream_t*;
using hipEvent_t = struct ihipEvent_t*;
using hipModule_t = struct ihipModule_t*;
using hipFunction_t = struct ihipModuleSymbol_t*;

inline constexpr hipError_t kHipSuccess = 0;
inline constexpr hipError_t kHipErrorOutOfMemory = 2;
inline constexpr int kHipAttrMultiprocessorCount = 63;  // hipDeviceAttributeMultiprocessorCount
inline constexpr unsigned kHipStreamNonBlocking = 1;
inline constexpr unsigned kHipEventDisableTiming = 2;
inline constexpr int kHipMemcpyHostToDevice = 1, kHipMemcpyDeviceToHost = 2,
                     kHipMemcpyDeviceToDevice = 3;

// X(member, exported symbol, return type, parameters): the functions disc calls.
#define DISC_HIP_FUNCTIONS(X)                                                                      \
  X(hipInit, "hipInit", hipError_t, (unsigned flags))                                              \
  X(hipGetErrorName, "hipGetErrorName", const char*, (hipError_t e))                               \
  X(hipGetErrorString, "hipGetErrorString", const char*, (hipError_t e))                           \
  X(hipGetDeviceCount, "hipGetDeviceCount", hipError_t, (int* count))                              \
  X(hipSetDevice, "hipSetDevice", hipError_t, (int device))                                        \
  X(hipDeviceGetName, "hipDeviceGetName", hipError_t, (char* name, int len, int device))           \
  X(hipDeviceGetAttribute, "hipDeviceGetAttribute", hipError_t, (int* v, int attr, int device))    \
  X(hipMemGetInfo, "hipMemGetInfo", hipError_t, (size_t* free, size_t* total))                     \
  X(hipMalloc, "hipMalloc", hipError_t, (void** p, size_t bytes))                                  \
  X(hipFree, "hipFree", hipError_t, (void* p))                                                     \
  X(hipHostMalloc, "hipHostMalloc", hipError_t, (void** p, size_t bytes, unsigned flags))          \
  X(hipHostFree, "hipHostFree", hipError_t, (void* p))                                             \
  X(hipMemcpyAsync, "hipMemcpyAsync", hipError_t,                                                  \
    (void* dst, const void* src, size_t bytes, int kind, hipStream_t s))                           \
  X(hipMemsetAsync, "hipMemsetAsync", hipError_t, (void* dst, int v, size_t bytes, hipStream_t s)) \
  X(hipStreamCreateWithFlags, "hipStreamCreateWithFlags", hipError_t,                              \
    (hipStream_t * s, unsigned f))                                                                 \
  X(hipStreamDestroy, "hipStreamDestroy", hipError_t, (hipStream_t s))                             \
  X(hipStreamSynchronize, "hipStreamSynchronize", hipError_t, (hipStream_t s))                     \
  X(hipStreamWaitEvent, "hipStreamWaitEvent", hipError_t,                                          \
    (hipStream_t s, hipEvent_t e, unsigned f))                                                     \
  X(hipEventCreateWithFlags, "hipEventCreateWithFlags", hipError_t, (hipEvent_t * e, unsigned f))  \
  X(hipEventDestroy, "hipEventDestroy", hipError_t, (hipEvent_t e))                                \
  X(hipEventRecord, "hipEventRecord", hipError_t, (hipEvent_t e, hipStream_t s))                   \
  X(hipModuleLoadData, "hipModuleLoadData", hipError_t, (hipModule_t * m, const void* image))      \
  X(hipModuleUnload, "hipModuleUnload", hipError_t, (hipModule_t m))                               \
  X(hipModuleGetFunction, "hipModuleGetFunction", hipError_t,                                      \
    (hipFunction_t * f, hipModule_t m, const char* name))                                          \
  X(hipModuleLaunchKernel, "hipModuleLaunchKernel", hipError_t,                                    \
    (hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,             \
     unsigned bz, unsigned shared_bytes, hipStream_t s, void** params, void** extra))

struct HipApi {
#define DISC_HIP_MEMBER(member, exported, ret, params) ret(*member) params = nullptr;
  DISC_HIP_FUNCTIONS(DISC_HIP_MEMBER)
#undef DISC_HIP_MEMBER
};

// The runtime, loaded and initialised (hipInit) once per process. Throws DeviceError saying why
// there is none: libamdhip64 not found, a function missing, or hipInit's error (no GPU: no
// /dev/kfd, or no permission to it).
const HipApi& hip_api();

// Throws for e != success: OutOfMemory for hipErrorOutOfMemory, DeviceError otherwise, with
// `what` and the runtime's error.
void check(const HipApi& api, hipError_t e, const std::string& what);

}  // namespace disc::devices::hip
