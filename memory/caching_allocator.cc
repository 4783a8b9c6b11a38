#include "memory/caching_allocator.h"

#include <algorithm>
#include <string>

#include "ir/error.h"

namespace disc::memory {

CachingAllocator::CachingAllocator(devices::Device& device, int64_t cap_bytes)
    : device_(device), cap_(cap_bytes) {
  if (cap_bytes < 0) throw InvalidArgument("memory cap must be >= 0, got " + std::to_string(cap_bytes));
}

CachingAllocator::~CachingAllocator() { release_cache(); }

void* CachingAllocator::allocate(size_t bytes) {
  const size_t size = devices::allocation_size(bytes);
  if (size == 0) throw OutOfMemory("cannot allocate " + std::to_string(bytes) + " bytes: the size overflows");
  ++stats_.allocations;
  void* p = nullptr;
  size_t block = size;
  const size_t largest_fit = cap_ > 0 ? size : 2 * size;  // see the header
  if (auto it = cache_.lower_bound(size); it != cache_.end() && it->first <= largest_fit) {
    p = it->second.p;
    block = it->first;
    cache_.erase(it);
  } else {
    const auto need = static_cast<int64_t>(size);
    // Largest cached blocks go first: the fewest system calls to make room.
    while (cap_ > 0 && stats_.reserved_bytes + need > cap_ && !cache_.empty()) release(std::prev(cache_.end()));
    if (cap_ > 0 && stats_.reserved_bytes + need > cap_) {
      throw OutOfMemory("memory cap: " + std::to_string(stats_.live_bytes) + " bytes are live and " +
                        std::to_string(need) + " more were asked for, past the cap of " +
                        std::to_string(cap_) + " bytes: raise memory.cap or lower the batch size");
    }
    p = device_.allocate(bytes);
    stats_.reserved_bytes += need;
  }
  blocks_.emplace(p, block);
  stats_.live_bytes += static_cast<int64_t>(size);
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.live_bytes);
  stats_.reserved_peak_bytes = std::max(stats_.reserved_peak_bytes, stats_.reserved_bytes);
  return p;
}

void CachingAllocator::deallocate(void* p, size_t bytes) {
  const size_t size = devices::allocation_size(bytes);
  auto it = blocks_.find(p);
  const size_t block = it == blocks_.end() ? size : it->second;  // a caller's bug: not ours to abort on
  if (it != blocks_.end()) blocks_.erase(it);
  stats_.live_bytes -= static_cast<int64_t>(size);
  cache_.insert({block, {p, 0}});
}

void CachingAllocator::reset_peak() {
  stats_.peak_bytes = stats_.live_bytes;
  stats_.reserved_peak_bytes = stats_.reserved_bytes;
}

void CachingAllocator::trim() {
  for (auto it = cache_.begin(); it != cache_.end();) {
    auto next = std::next(it);
    if (++it->second.idle_trims > kIdleTrims) release(it);
    it = next;
  }
}

void CachingAllocator::release_cache() {
  while (!cache_.empty()) release(cache_.begin());
}

void CachingAllocator::release(std::multimap<size_t, Cached>::iterator it) {
  device_.deallocate(it->second.p, it->first);
  stats_.reserved_bytes -= static_cast<int64_t>(it->first);
  cache_.erase(it);
}

}  // namespace disc::memory
