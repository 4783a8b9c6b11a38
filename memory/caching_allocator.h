// The governor's allocator: keeps freed blocks for reuse (a training step frees and allocates the
// same sizes over and over) and enforces a cap on the bytes it has reserved from the device,
// cached free blocks included, so that fragmentation counts against the cap as it does in the
// process's memory.
//
//   memory::CachingAllocator alloc(*device, /*cap_bytes=*/1 << 30);
//   void* p = alloc.allocate(n);   // reuses a cached block of the same size, or asks the device
//   alloc.deallocate(p, n);        // back to the cache, still reserved
//   alloc.trim();                  // once per step: gives back blocks the last step did not reuse
#pragma once

#include <map>

#include "memory/allocator.h"

namespace disc::memory {

class CachingAllocator final : public Allocator {
 public:
  // cap_bytes 0: no cap.
  CachingAllocator(devices::Device& device, int64_t cap_bytes);
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // When the block would take reservations past the cap, cached blocks are given back first;
  // throws OutOfMemory (live bytes, the request and the cap) when that is not enough.
  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) override;
  const AllocatorStats& stats() const override { return stats_; }
  void reset_peak() override;
  devices::Device& device() override { return device_; }
  int64_t cap() const { return cap_; }

  // Gives back cached blocks that no allocation reused since the previous trim().
  void trim();
  // Gives back every cached block.
  void release_cache();

 private:
  struct Cached {
    void* p;
    bool reused_since_trim;
  };
  void release(std::multimap<size_t, Cached>::iterator it);

  devices::Device& device_;
  int64_t cap_;
  std::multimap<size_t, Cached> cache_;  // free blocks by allocation_size
  AllocatorStats stats_;
};

}  // namespace disc::memory
