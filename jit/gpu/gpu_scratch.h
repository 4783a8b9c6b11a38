// Device memory that a GPU kernel keeps across runs (label totals, row statistics, a panel of
// logits), grown as needed and freed with its owner. It is not tensors' memory: the governor's cap
// does not count it.
#pragma once

#include <cstddef>

#include "devices/device.h"

namespace disc::jit {

class GpuScratch {
 public:
  explicit GpuScratch(devices::Device& dev) : dev_(dev) {}
  ~GpuScratch() { release(); }
  GpuScratch(const GpuScratch&) = delete;
  GpuScratch& operator=(const GpuScratch&) = delete;

  // At least `bytes`; what an earlier call returned is gone if this one grew it.
  void* get(size_t bytes) {
    if (bytes > bytes_) {
      release();
      p_ = dev_.allocate(bytes);
      bytes_ = bytes;
    }
    return p_;
  }

 private:
  void release() {
    if (p_) dev_.deallocate(p_, bytes_);
    p_ = nullptr;
    bytes_ = 0;
  }

  devices::Device& dev_;
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace disc::jit
