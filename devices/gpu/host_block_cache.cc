#include "devices/gpu/host_block_cache.h"

#include <algorithm>
#include <bit>
#include <iterator>
#include <vector>

namespace disc::devices {

size_t HostBlockCache::size_class(size_t bytes) {
  constexpr size_t kSmallest = size_t{64} << 10;
  if (bytes <= kSmallest) return kSmallest;
  const size_t step = std::bit_floor(bytes) / 4;  // four classes per doubling
  return (bytes + step - 1) / step * step;
}

void* HostBlockCache::get(size_t bytes) {
  const size_t size = size_class(bytes);
  {
    std::lock_guard lock(mu_);
    in_use_ += size;
    peak_in_use_ = std::max(peak_in_use_, in_use_);
    // The most recently freed block of the class.
    auto it = std::find_if(blocks_.rbegin(), blocks_.rend(),
                           [&](const auto& b) { return b.first == size; });
    if (it != blocks_.rend()) {
      void* p = it->second;
      blocks_.erase(std::next(it).base());
      cached_ -= size;
      return p;
    }
  }
  try {
    return allocate_(size);
  } catch (...) {
    std::lock_guard lock(mu_);
    in_use_ -= size;
    throw;
  }
}

void HostBlockCache::put(void* p, size_t bytes) {
  if (!p) return;
  const size_t size = size_class(bytes);
  std::vector<void*> out;  // the oldest cached blocks, to make room within the bound
  {
    std::lock_guard lock(mu_);
    in_use_ -= size;
    if (size > peak_in_use_) {
      out.push_back(p);
    } else {
      while (cached_ + size > peak_in_use_) {
        out.push_back(blocks_.front().second);
        cached_ -= blocks_.front().first;
        blocks_.erase(blocks_.begin());
      }
      blocks_.emplace_back(size, p);
      cached_ += size;
    }
  }
  for (void* q : out) free_(q);
}

size_t HostBlockCache::cached_bytes() const {
  std::lock_guard lock(mu_);
  return cached_;
}

HostBlockCache::~HostBlockCache() {
  for (auto& [size, p] : blocks_) {
    try {
      free_(p);
    } catch (...) {  // a device that failed keeps its error for the call that saw it
    }
  }
}

}  // namespace disc::devices
