// cuBLAS or rocBLAS, loaded at run time, for the GPU devices' GEMMs: f32 and f64, batched with
// strides, row-major through devices/gpu/blas_gemm.h. The two libraries have the same
// strided-batched calls under different names and operation codes. cuBLAS's default math mode does
// not use TF32 for f32, so results agree with the CPU's within f32 rounding. Debian 12 packages
// neither rocBLAS nor hipBLAS: on AMD GPUs rocBLAS comes from a ROCm install.
#pragma once

#include <memory>

#include "devices/device.h"
#include "devices/gpu/gpu_runtime.h"

namespace disc::devices {

class GpuBlas {
 public:
  // A handle whose work goes to `stream`; the device's context must be current. Throws
  // DeviceError when the library is not found or does not start.
  GpuBlas(BlasLibrary library, GpuRuntime::Stream stream);
  ~GpuBlas();
  GpuBlas(const GpuBlas&) = delete;
  GpuBlas& operator=(const GpuBlas&) = delete;

  void gemm(const GemmArgs& g);

  struct Api;

 private:
  std::unique_ptr<Api> api_;
  void* handle_ = nullptr;
};

}  // namespace disc::devices
