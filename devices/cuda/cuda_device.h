// NVIDIA GPUs: the GPU device (gpu_device.h) over the CUDA Driver API (driver_api.h), both
// loaded at run time, with cuBLAS for GEMMs and NVRTC's cubins for kernels.
//
//   std::unique_ptr<devices::GpuDevice> gpu = devices::cuda::make_cuda_device(0);
#pragma once

#include <memory>
#include <string>

#include "devices/gpu/gpu_device.h"

namespace disc::devices::cuda {

// GPU `ordinal` (cuda:N). Throws DeviceError saying why there is none: no driver, no GPU, an
// ordinal past the device count (naming the devices there are).
std::unique_ptr<GpuDevice> make_cuda_device(int ordinal, int host_threads = 0);

// The number of CUDA devices, 0 when there is no driver or no GPU (never throws); `why` gets the
// reason when it is 0.
int cuda_device_count(std::string* why = nullptr);

}  // namespace disc::devices::cuda
