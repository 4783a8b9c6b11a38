// The CUDA device: an NVIDIA GPU through the Driver API (driver_api.h, loaded at run time) and
// cuBLAS (cublas.h). Memory comes from cuMemAlloc (the governor's caching allocator keeps the
// blocks); kernels and GEMMs run in order on one compute stream; copies between host and device
// run on a second stream, ordered against the compute stream by events, so that an offload copy
// can overlap the kernels that follow it. Compiled kernels (cubin from jit/, made by NVRTC for
// arch()) are loaded with load_kernel and launched on the compute stream.
//
//   auto gpu = devices::cuda::make_cuda_device(0);      // throws DeviceError: no driver, no GPU
//   void* x = gpu->allocate(bytes);
//   gpu->copy(x, host, bytes, devices::CopyKind::kHostToDevice);
//   CUfunction f = gpu->load_kernel(cubin, "k0");
//   gpu->launch(f, {.grid = rows, .block = 256}, params);
#pragma once

#include <memory>
#include <string>

#include "devices/cuda/driver_api.h"
#include "devices/device.h"

namespace disc::devices::cuda {

struct LaunchShape {
  unsigned grid = 1;          // blocks (x only)
  unsigned block = 1;         // threads per block
  unsigned shared_bytes = 0;  // dynamic shared memory
};

class CudaDevice : public Device {
 public:
  // "NVIDIA H100 80GB HBM3"
  virtual std::string product() const = 0;
  // The compute capability as NVRTC's architecture: "sm_90".
  virtual std::string arch() const = 0;
  virtual int multiprocessors() const = 0;
  // Loads a cubin (or PTX) image and returns its function `name`; the module stays loaded as long
  // as the device. Throws DeviceError naming the function when the image or the name is bad.
  virtual CUfunction load_kernel(const std::string& image, const std::string& name) = 0;
  // cuLaunchKernel on the compute stream; params[i] points at the kernel's i-th argument.
  virtual void launch(CUfunction f, const LaunchShape& shape, void** params) = 0;
  // Sets every byte of [p, p + bytes) to 0, on the compute stream.
  virtual void zero(void* p, size_t bytes) = 0;
};

// GPU `ordinal` (cuda:N). Throws DeviceError saying why there is none: no driver, no GPU, an
// ordinal past the device count (naming the devices there are), cuBLAS missing.
std::unique_ptr<CudaDevice> make_cuda_device(int ordinal, int host_threads = 0);

// The number of CUDA devices, 0 when there is no driver or no GPU (never throws); `why` gets the
// reason when it is 0.
int cuda_device_count(std::string* why = nullptr);

}  // namespace disc::devices::cuda
