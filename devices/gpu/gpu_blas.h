// cuBLAS or rocBLAS, loaded at run time, for the GPU devices' GEMMs: f32, f64, bf16 and f16,
// batched with strides, row-major through devices/gpu/blas_gemm.h. The two libraries have the same
// strided-batched calls under different names and operation codes. bf16 and f16 run on the tensor
// cores through the libraries' `ex` calls, summing in f32 and rounding C once, as the CPU's widened
// GEMM does. f32 does not use TF32 unless gemm's caller asks for it, so results agree with the
// CPU's within f32 rounding. Debian 12 packages neither rocBLAS nor hipBLAS: on AMD GPUs rocBLAS
// comes from a ROCm install.
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

  // tf32: f32 GEMMs on the tensor cores in TF32 (products of 10-bit mantissas, sums in f32;
  // cuBLAS only: rocBLAS computes in f32).
  void gemm(const GemmArgs& g, bool tf32 = false);

  struct Api;

 private:
  std::unique_ptr<Api> api_;
  void* handle_ = nullptr;
};

}  // namespace disc::devices
