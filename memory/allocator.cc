#include "memory/allocator.h"

#include <algorithm>

namespace disc::memory {

void* DeviceAllocator::allocate(size_t bytes) {
  // Zero-byte tensors (an empty batch) still get a distinct, valid pointer.
  void* p = device_.allocate(std::max<size_t>(bytes, 1));
  stats_.live_bytes += static_cast<int64_t>(bytes);
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.live_bytes);
  ++stats_.allocations;
  return p;
}

void DeviceAllocator::deallocate(void* p, size_t bytes) {
  device_.deallocate(p, std::max<size_t>(bytes, 1));
  stats_.live_bytes -= static_cast<int64_t>(bytes);
}

}  // namespace disc::memory
