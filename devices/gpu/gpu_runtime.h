// The calls a GPU device makes, over either vendor's API: cuda/cuda_device.cc over the CUDA
// Driver API, hip/hip_device.cc over the HIP runtime (both loaded at run time). GpuDevice
// (gpu_device.h) is written once over this. Every call throws DeviceError naming the call and
// the vendor's error (OutOfMemory when an allocation fails).
#pragma once

#include <cstddef>
#include <string>

#include "devices/device.h"

namespace disc::devices {

struct LaunchShape {
  unsigned grid = 1;          // blocks (x only)
  unsigned block = 1;         // threads per block
  unsigned shared_bytes = 0;  // dynamic shared memory
};

enum class BlasLibrary { kCublas, kRocblas };

class GpuRuntime {
 public:
  using Stream = void*;
  using Event = void*;
  using Module = void*;
  using Function = void*;

  virtual ~GpuRuntime() = default;

  virtual std::string name() const = 0;     // "cuda:0", "hip:0"
  virtual std::string product() const = 0;  // "NVIDIA H100 80GB HBM3"
  virtual std::string arch() const = 0;     // "sm_90", "gfx90a"
  virtual int multiprocessors() const = 0;
  virtual BlasLibrary blas() const = 0;
  // The device's context is current on the calling thread (any thread may call the device).
  virtual void make_current() const = 0;

  virtual MemoryInfo memory_info() const = 0;
  virtual void* allocate(size_t bytes) = 0;
  virtual void free(void* p) = 0;
  virtual void* allocate_host(size_t bytes) = 0;  // page-locked
  virtual void free_host(void* p) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes, CopyKind kind, Stream s) = 0;
  virtual void zero(void* p, size_t bytes, Stream s) = 0;

  virtual Stream create_stream() = 0;  // non-blocking: no implicit order with the legacy stream
  virtual void destroy_stream(Stream s) = 0;
  virtual void synchronize(Stream s) = 0;
  virtual Event create_event() = 0;  // without timing
  virtual void destroy_event(Event e) = 0;
  virtual void record(Event e, Stream s) = 0;
  virtual void wait(Stream s, Event e) = 0;  // s waits for e's work

  virtual Module load_module(const std::string& image) = 0;
  virtual void unload_module(Module m) = 0;
  virtual Function function(Module m, const std::string& name) = 0;
  virtual void launch(Function f, const LaunchShape& shape, Stream s, void** params) = 0;
};

}  // namespace disc::devices
