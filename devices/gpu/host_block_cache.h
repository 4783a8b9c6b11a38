// Page-locked host blocks kept for reuse. Pinning and unpinning memory take milliseconds (the
// driver locks every page, and freeing waits for the device), and a step that offloads under a
// cap asks for tens of blocks of tens of MiB: a GPU device hands out freed blocks again instead.
// Sizes are rounded up to classes, four per doubling (at most a quarter more than asked), and a
// freed block waits for the next request of its class. The cache keeps at most as many bytes as
// were ever in use at once: to take a freed block beyond that, it gives back its oldest ones
// (shapes change from step to step, and with them the classes asked for).
//
// Reusing a block is safe where every copy into or out of it runs on one stream, in order (the
// GPU device's copy stream): a copy issued later waits for the earlier copies of the old owner.
//
//   HostBlockCache cache([&](size_t n) { return rt.allocate_host(n); }, [&](void* p) {
//   rt.free_host(p); }); void* p = cache.get(bytes); cache.put(p, bytes);   // same bytes as asked
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace disc::devices {

class HostBlockCache {
 public:
  using Allocate = std::function<void*(size_t)>;
  using Free = std::function<void(void*)>;

  HostBlockCache(Allocate allocate, Free free)
      : allocate_(std::move(allocate)), free_(std::move(free)) {}
  ~HostBlockCache();  // frees the cached blocks (those still out are their owners' to put back)
  HostBlockCache(const HostBlockCache&) = delete;
  HostBlockCache& operator=(const HostBlockCache&) = delete;

  void* get(size_t bytes);
  void put(void* p, size_t bytes);

  // The size a request of `bytes` is served with.
  static size_t size_class(size_t bytes);
  size_t cached_bytes() const;

 private:
  Allocate allocate_;
  Free free_;
  mutable std::mutex mu_;
  std::vector<std::pair<size_t, void*>> blocks_;  // (size class, block), oldest first
  size_t cached_ = 0, in_use_ = 0, peak_in_use_ = 0;
};

}  // namespace disc::devices
