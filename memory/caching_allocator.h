// The governor's allocator: keeps freed blocks for reuse (a training step frees and allocates the
// same sizes over and over) and enforces a cap on the bytes it has reserved from the device,
// cached free blocks included, so that fragmentation counts against the cap as it does in the
// process's memory.
//
//   memory::CachingAllocator alloc(*device, /*cap_bytes=*/1 << 30);
//   void* p = alloc.allocate(n);   // reuses a cached block that fits, or asks the device
//   alloc.deallocate(p, n);        // back to the cache, still reserved
//
// Which cached block fits: the smallest of at least n bytes and at most twice that. Batch shapes
// change every step, so exact sizes rarely repeat, and mapping fresh pages (and faulting them in)
// for every tensor of every step cost a third of a llama step's time. live_bytes counts the bytes
// asked for; reserved_bytes counts the bytes each block holds from the system.
// Without a cap a block holds all its pages, slack included. With a cap the governor plans with
// exact sizes, so the slack must be possible to give back: a larger block serves n bytes only
// where the device can give back the pages past n (Device::decommit; the CPU's mapped blocks).
// There, when no block of at most 2n is cached, a larger one whose pages are there serves too:
// fresh pages cost time (the system zeroes each page when it is first touched). The block keeps
// its pages, counted, while the cap leaves room; when it does not, the slack of live blocks goes
// back first, then cached blocks. Reused at a larger size, a block counts the pages it takes
// again. Giving back slack and cache brings reserved_bytes down to live_bytes, so a plan that
// keeps live bytes under the cap never fails here. Elsewhere, only a block of exactly n bytes.
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
  // attention tiles and cross-entropy of a llama step ran at a third of their speed. After four,
  // the longest batch, which comes back every dozen steps or so, found its blocks given back each
  // time (smaller batches reuse the smaller blocks) and zeroed its pages afresh: that step took
  // twice as long in f32 (bench_step's S=512). Blocks sized for the longest batches are what the
  // process needs at its peak anyway; sixteen idle steps still give back a shape gone for good.
  static constexpr int kIdleTrims = 16;
  void trim();
  // Gives back every cached block.
  void release_cache();

 private:
  struct Block {
    size_t size;       // allocation_size of the request that mapped it
    size_t committed;  // the bytes of it that count as reserved (all of it without a cap)
    size_t used;       // allocation_size of the request it serves now
  };
  struct Cached {
    void* p;
    size_t committed;
    int idle_trims;  // trims since it was last given back by a deallocate
  };
  using CacheIt = std::multimap<size_t, Cached>::iterator;
  CacheIt find_cached(size_t size);
  void fit(Block& b, size_t size);
  void make_room(size_t bytes);
  void release(CacheIt it);

  devices::Device& device_;
  int64_t cap_;
  std::multimap<size_t, Cached> cache_;      // free blocks by size
  std::unordered_map<void*, Block> blocks_;  // every live allocation's block
  AllocatorStats stats_;
};

}  // namespace disc::memory
