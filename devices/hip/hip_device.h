// AMD GPUs: the GPU device (gpu_device.h) over the HIP runtime (hip_api.h), both loaded at run
// time, with rocBLAS for GEMMs (from a ROCm install: Debian 12 has none) and hiprtc's code
// objects for kernels.
//
//   std::unique_ptr<devices::GpuDevice> gpu = devices::hip::make_hip_device(0);
#pragma once

#include <memory>
#include <string>

#include "devices/gpu/gpu_device.h"

namespace disc::devices::hip {

// GPU `ordinal` (hip:N). Throws DeviceError saying why there is none: no runtime, no GPU, an
// ordinal past the device count.
std::unique_ptr<GpuDevice> make_hip_device(int ordinal, int host_threads = 0);

// The number of HIP devices, 0 when there is no runtime or no GPU (never throws); `why` gets the
// reason when it is 0.
int hip_device_count(std::string* why = nullptr);

// The architecture (gfxNNN, what hiprtc compiles for) of the `gpu`-th GPU node of the kernel
// driver's topology under `nodes` (a folder of numbered nodes with a `properties` file each;
// CPU nodes have gfx_target_version 0). HIP has no stable call for it across ROCm versions: the
// kernel driver is what rocminfo reads too. Throws DeviceError when there is no such GPU.
std::string kfd_arch(int gpu, const std::string& nodes = "/sys/class/kfd/kfd/topology/nodes");

}  // namespace disc::devices::hip
