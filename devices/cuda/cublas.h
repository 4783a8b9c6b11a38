// cuBLAS, loaded at run time (libcublas.so.13 or .12, beside the CUDA runtime it was built with),
// for the CUDA device's GEMMs: f32 and f64, batched with strides, row-major through
// devices/blas_gemm.h. Math mode is cuBLAS's default, which does not use TF32 for f32: results
// agree with the CPU's within f32 rounding.
#pragma once

#include <memory>

#include "devices/cuda/driver_api.h"
#include "devices/device.h"

namespace disc::devices::cuda {

class Cublas {
 public:
  // A handle whose work goes to `stream`; the device's context must be current. Throws
  // DeviceError when cuBLAS is not found or does not start.
  explicit Cublas(CUstream stream);
  ~Cublas();
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  void gemm(const GemmArgs& g);

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  void* handle_ = nullptr;
};

}  // namespace disc::devices::cuda
