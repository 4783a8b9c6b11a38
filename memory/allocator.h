// The one path by which tensor memory is allocated. Every byte a step holds is counted here. The
// CachingAllocator (caching_allocator.h) implements this interface and enforces the memory cap as
// a hard limit on reserved bytes; the governor (governor.h) plans each step so that it is kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "devices/device.h"

namespace disc::memory {

// Bytes are counted as devices::allocation_size rounds them: what the system really hands out.
struct AllocatorStats {
  int64_t live_bytes = 0;           // held by tensors now
  int64_t peak_bytes = 0;           // the most held at once since the last reset_peak()
  int64_t reserved_bytes = 0;       // taken from the device now: live plus cached free blocks
  int64_t reserved_peak_bytes = 0;  // the most reserved at once since the last reset_peak()
  int64_t allocations = 0;          // calls to allocate since construction
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Throws OutOfMemory when the bytes cannot be had.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p, size_t bytes) = 0;
  virtual const AllocatorStats& stats() const = 0;
  virtual void reset_peak() = 0;
  virtual devices::Device& device() = 0;

  // What each tensor made here holds on to, so that the allocator and its device outlive it (the
  // Trainer owns both and hands tensors to callers who may keep them longer): set by the owner;
  // empty where the caller keeps the allocator alive itself.
  std::shared_ptr<void> keep_alive() const { return owner_.lock(); }
  void set_owner(std::weak_ptr<void> owner) { owner_ = std::move(owner); }

 private:
  std::weak_ptr<void> owner_;
};

// Allocates straight from a device and counts live and peak bytes (reserved equals live).
class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(devices::Device& device) : device_(device) {}
  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) override;
  const AllocatorStats& stats() const override { return stats_; }
  void reset_peak() override { stats_.peak_bytes = stats_.reserved_peak_bytes = stats_.live_bytes; }
  devices::Device& device() override { return device_; }

 private:
  devices::Device& device_;
  AllocatorStats stats_;
};

}  // namespace disc::memory
