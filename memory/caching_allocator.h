// The governor's allocator: keeps freed blocks for reuse (a training step frees and allocates the
// same sizes over and over) and enforces a cap on the bytes it has reserved from the device,
// cached free blocks included, so that fragmentation counts against the cap as it does in the
// process's memory.
//
//   memory::CachingAllocator alloc(*device, /*cap_bytes=*/1 << 30);
//   void* p = alloc.allocate(n);   // reuses a cached block that fits, or asks the device
//   alloc.deallocate(p, n);        // back to the cache, still reserved
//
// Which cached block fits: without a cap, the smallest of at least n bytes and at most twice that.
// Batch shapes change every step, so exact sizes rarely repeat, and mapping fresh pages (and
// faulting them in) for every tensor of every step cost a third of a llama step's time. With a
// cap, only a block of exactly n bytes: the governor plans for the cap with exact sizes, and the
// slack of larger blocks could make a plan that fits fail. live_bytes counts the bytes asked for;
// reserved_bytes counts whole blocks, slack included.
//   alloc.trim();                  // once per step: gives back blocks idle for kIdleTrims steps
#pragma once

#include <map>
#include <unordered_map>

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

  // Gives back cached blocks that no allocation reused over the last kIdleTrims trims (steps).
  // Giving back after one idle step made the next shapes map and fault in fresh pages: the
  // attention tiles and cross-entropy of a llama step ran at a third of their speed.
  static constexpr int kIdleTrims = 4;
  void trim();
  // Gives back every cached block.
  void release_cache();

 private:
  struct Cached {
    void* p;
    int idle_trims;  // trims since it was last given back by a deallocate
  };
  void release(std::multimap<size_t, Cached>::iterator it);

  devices::Device& device_;
  int64_t cap_;
  std::multimap<size_t, Cached> cache_;  // free blocks by allocation_size
  std::unordered_map<void*, size_t> blocks_;  // the block size of every live allocation
  AllocatorStats stats_;
};

}  // namespace disc::memory
