#include "memory/caching_allocator.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace disc::memory {

CachingAllocator::CachingAllocator(devices::Device& device, int64_t cap_bytes)
    : device_(device), cap_(cap_bytes) {
  if (cap_bytes < 0)
    throw InvalidArgument("memory cap must be >= 0, got " + std::to_string(cap_bytes));
}

CachingAllocator::~CachingAllocator() {
  release_cache();
}

// The cached block to serve `size` bytes (see the header), or end: the smallest of at most twice
// that; under a cap that can give back slack, else the smallest larger one whose pages are there
// already. (Giving back the largest blocks to map a fresh one made a capped llama step map and
// zero 1.2 GiB at B=8: 2-3% of its time.)
CachingAllocator::CacheIt CachingAllocator::find_cached(size_t size) {
  const bool slack = cap_ == 0 || device_.can_decommit(size);
  const auto it = cache_.lower_bound(size);
  if (it != cache_.end() && it->first <= (slack ? 2 * size : size)) return it;
  if (cap_ == 0 || !slack) return cache_.end();
  return std::find_if(it, cache_.end(), [&](const auto& c) { return c.second.committed >= size; });
}

// Under a cap, makes the block hold at least `size` bytes, counting the pages it takes again
// (making room first); pages past `size` that it holds stay, as slack that make_room may give
// back. Throws OutOfMemory, changing nothing.
void CachingAllocator::fit(Block& b, size_t size) {
  b.used = size;
  if (cap_ == 0 || b.committed >= size) return;
  make_room(size - b.committed);
  stats_.reserved_bytes += static_cast<int64_t>(size - b.committed);
  b.committed = size;
}

// Until `bytes` more fit under the cap, gives back the slack of live blocks, then cached blocks,
// largest first (the fewest system calls); throws OutOfMemory (live bytes, the request and the
// cap) when they cannot. Both gone, reserved bytes are live bytes.
void CachingAllocator::make_room(size_t bytes) {
  const auto need = static_cast<int64_t>(bytes);
  auto over = [&] { return cap_ > 0 && stats_.reserved_bytes + need > cap_; };
  if (!over()) return;
  std::vector<std::pair<size_t, void*>> slack;
  for (const auto& [p, b] : blocks_) {
    if (b.committed > b.used) slack.emplace_back(b.committed - b.used, p);
  }
  std::sort(slack.rbegin(), slack.rend());
  for (size_t i = 0; i < slack.size() && over(); ++i) {
    Block& b = blocks_.at(slack[i].second);
    device_.decommit(slack[i].second, b.used, b.committed);
    stats_.reserved_bytes -= static_cast<int64_t>(b.committed - b.used);
    b.committed = b.used;
  }
  while (over() && !cache_.empty()) release(std::prev(cache_.end()));
  if (over()) {
    throw OutOfMemory("memory cap: " + std::to_string(stats_.live_bytes) + " bytes are live and " +
                      std::to_string(need) + " more were asked for, past the cap of " +
                      std::to_string(cap_) +
                      " bytes: raise the memory cap (memory.cap) or lower the batch size");
  }
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t size = devices::allocation_size(bytes);
  if (size == 0)
    throw OutOfMemory("cannot allocate " + std::to_string(bytes) + " bytes: the size overflows");
  ++stats_.allocations;
  void* p = nullptr;
  Block b{size, size, size};
  if (auto it = find_cached(size); it != cache_.end()) {
    p = it->second.p;
    b = {it->first, it->second.committed, size};
    cache_.erase(it);
    try {
      fit(b, size);
    } catch (const OutOfMemory&) {
      cache_.insert({b.size, {p, b.committed, 0}});
      throw;
    }
  } else {
    make_room(size);
    p = device_.allocate(bytes);
    stats_.reserved_bytes += static_cast<int64_t>(size);
  }
  blocks_.emplace(p, b);
  stats_.live_bytes += static_cast<int64_t>(size);
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.live_bytes);
  stats_.reserved_peak_bytes = std::max(stats_.reserved_peak_bytes, stats_.reserved_bytes);
  return p;
}

void CachingAllocator::deallocate(void* p, size_t bytes) {
  const size_t size = devices::allocation_size(bytes);
  auto it = blocks_.find(p);
  const Block b = it == blocks_.end() ? Block{size, size, size}
                                      : it->second;  // a caller's bug: not ours to abort on
  if (it != blocks_.end()) blocks_.erase(it);
  stats_.live_bytes -= static_cast<int64_t>(size);
  cache_.insert({b.size, {p, b.committed, 0}});
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

void CachingAllocator::release(CacheIt it) {
  device_.deallocate(it->second.p, it->first);
  stats_.reserved_bytes -= static_cast<int64_t>(it->second.committed);
  cache_.erase(it);
}

}  // namespace disc::memory
