#include "memory/allocator.h"

#include <algorithm>

namespace disc::memory {

void* DeviceAllocator::allocate(size_t bytes) {
  // Zero-byte tensors (an empty batch) still get a distinct, valid pointer (the device rounds up).
  void* p = device_.allocate(bytes);
  stats_.live_bytes += static_cast<int64_t>(devices::allocation_size(bytes));
  stats_.reserved_bytes = stats_.live_bytes;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.live_bytes);
  stats_.reserved_peak_bytes = stats_.peak_bytes;
  ++stats_.allocations;
  return p;
}

void DeviceAllocator::deallocate(void* p, size_t bytes) {
  device_.deallocate(p, bytes);
  stats_.live_bytes -= static_cast<int64_t>(devices::allocation_size(bytes));
  stats_.reserved_bytes = stats_.live_bytes;
}

}  // namespace disc::memory
