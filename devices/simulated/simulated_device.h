// A device with memory of its own, simulated in host memory: kernels run on the CPU, but its
// bytes count as a separate pool of fixed capacity and every copy between it and the host is
// counted. Tests exercise offload (copy to host, free, copy back) with it, without a GPU, and,
// with memory the host cannot address, the engine's GPU paths.
//
//   auto dev = devices::make_simulated_device(/*threads=*/2, /*capacity=*/1 << 30);
//   ... run a Trainer on it with memory.offload ...
//   dev->copy_stats().device_to_host_bytes;
#pragma once

#include <memory>

#include "devices/device.h"

namespace disc::devices {

struct CopyStats {
  int64_t host_to_device_bytes = 0;
  int64_t device_to_host_bytes = 0;
  int64_t copies = 0;
};

class SimulatedDevice : public Device {
 public:
  virtual const CopyStats& copy_stats() const = 0;
};

// capacity_bytes: the simulated device memory; allocations beyond it throw OutOfMemory.
// With `addressable` false the device poses as a GPU: its pointers are tagged so that the host
// cannot read them (any access faults), is_host() is false, and the engine must reach its memory
// through copies, as it must a GPU's. Tests run the GPU paths of the engine on it. bf16_dot: as
// make_cpu_device's.
std::unique_ptr<SimulatedDevice> make_simulated_device(int threads, int64_t capacity_bytes,
                                                       bool addressable = true,
                                                       bool bf16_dot = true);

}  // namespace disc::devices
