// The CUDA Driver API, loaded at run time from libcuda.so.1 (the driver installs it; the toolkit's
// stub libcuda.so is never linked), so that one binary runs with or without an NVIDIA GPU. The
// types below are the driver's ABI, declared here so that a build needs no CUDA headers.
//
//   const cuda::DriverApi& api = cuda::driver();   // throws DeviceError: no driver, no device
//   cuda::check(api, api.cuMemAlloc(&ptr, bytes), "cuMemAlloc");
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace disc::devices::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = uint64_t;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;

inline constexpr CUresult kCudaSuccess = 0;
inline constexpr CUresult kCudaErrorOutOfMemory = 2;
inline constexpr int kAttrMultiprocessorCount = 16;
inline constexpr int kAttrComputeCapabilityMajor = 75;
inline constexpr int kAttrComputeCapabilityMinor = 76;
inline constexpr unsigned kStreamNonBlocking = 1;
inline constexpr unsigned kEventDisableTiming = 2;

// X(member, exported symbol, return type, parameters): the functions disc calls. The exported
// names carry the driver's ABI version (_v2) where the plain name is the old 32-bit-size ABI.
#define DISC_CUDA_DRIVER_FUNCTIONS(X)                                                            \
  X(cuInit, "cuInit", CUresult, (unsigned flags))                                                \
  X(cuDriverGetVersion, "cuDriverGetVersion", CUresult, (int* version))                          \
  X(cuGetErrorName, "cuGetErrorName", CUresult, (CUresult e, const char** name))                 \
  X(cuGetErrorString, "cuGetErrorString", CUresult, (CUresult e, const char** text))             \
  X(cuDeviceGetCount, "cuDeviceGetCount", CUresult, (int* count))                                \
  X(cuDeviceGet, "cuDeviceGet", CUresult, (CUdevice * dev, int ordinal))                         \
  X(cuDeviceGetName, "cuDeviceGetName", CUresult, (char* name, int len, CUdevice dev))           \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult, (int* v, int attr, CUdevice dev))    \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult, (CUcontext * c, CUdevice d)) \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", CUresult, (CUdevice dev))         \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult, (CUcontext c))                                 \
  X(cuMemGetInfo, "cuMemGetInfo_v2", CUresult, (size_t* free, size_t* total))                    \
  X(cuMemAlloc, "cuMemAlloc_v2", CUresult, (CUdeviceptr * p, size_t bytes))                      \
  X(cuMemFree, "cuMemFree_v2", CUresult, (CUdeviceptr p))                                        \
  X(cuMemAllocHost, "cuMemAllocHost_v2", CUresult, (void** p, size_t bytes))                     \
  X(cuMemFreeHost, "cuMemFreeHost", CUresult, (void* p))                                         \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", CUresult,                                         \
    (CUdeviceptr dst, const void* src, size_t bytes, CUstream s))                                \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", CUresult,                                         \
    (void* dst, CUdeviceptr src, size_t bytes, CUstream s))                                      \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", CUresult,                                         \
    (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s))                                \
  X(cuMemsetD8Async, "cuMemsetD8Async", CUresult,                                                \
    (CUdeviceptr dst, unsigned char v, size_t n, CUstream s))                                    \
  X(cuStreamCreate, "cuStreamCreate", CUresult, (CUstream * s, unsigned flags))                  \
  X(cuStreamDestroy, "cuStreamDestroy_v2", CUresult, (CUstream s))                               \
  X(cuStreamSynchronize, "cuStreamSynchronize", CUresult, (CUstream s))                          \
  X(cuStreamWaitEvent, "cuStreamWaitEvent", CUresult, (CUstream s, CUevent e, unsigned flags))   \
  X(cuEventCreate, "cuEventCreate", CUresult, (CUevent * e, unsigned flags))                     \
  X(cuEventDestroy, "cuEventDestroy_v2", CUresult, (CUevent e))                                  \
  X(cuEventRecord, "cuEventRecord", CUresult, (CUevent e, CUstream s))                           \
  X(cuModuleLoadData, "cuModuleLoadData", CUresult, (CUmodule * m, const void* image))           \
  X(cuModuleUnload, "cuModuleUnload", CUresult, (CUmodule m))                                    \
  X(cuModuleGetFunction, "cuModuleGetFunction", CUresult,                                        \
    (CUfunction * f, CUmodule m, const char* name))                                              \
  X(cuLaunchKernel, "cuLaunchKernel", CUresult,                                                  \
    (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
     unsigned shared_bytes, CUstream s, void** params, void** extra))

struct DriverApi {
#define DISC_CUDA_MEMBER(member, exported, ret, params) ret(*member) params = nullptr;
  DISC_CUDA_DRIVER_FUNCTIONS(DISC_CUDA_MEMBER)
#undef DISC_CUDA_MEMBER
};

// The driver, loaded and initialised (cuInit) once per process. Throws DeviceError saying why
// there is none: libcuda.so.1 not found (no NVIDIA driver installed), a function missing (a driver
// older than disc needs), or cuInit's error (no device, a driver/kernel-module mismatch).
const DriverApi& driver();

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
std::string error_text(const DriverApi& api, CUresult e);
// Throws for e != success: OutOfMemory for CUDA_ERROR_OUT_OF_MEMORY, DeviceError otherwise, with
// `what` (the call and its arguments) and the driver's error.
void check(const DriverApi& api, CUresult e, const std::string& what);

}  // namespace disc::devices::cuda
