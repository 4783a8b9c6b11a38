// The simulated device; see simulated_device.h. It forwards to a CPU device and keeps the books.
#include "devices/simulated/simulated_device.h"

#include <cstdint>

namespace disc::devices {
namespace {

// Tagged pointers of an unaddressable device: a bit above the 48-bit address space makes them
// non-canonical, so that a host access faults instead of reading the memory behind them.
constexpr uintptr_t kTag = uintptr_t{1} << 62;
void* tag(void* p) {
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) | kTag);
}
template <typename P>
P untag(P p) {
  return reinterpret_cast<P>(reinterpret_cast<uintptr_t>(p) & ~kTag);
}

class Simulated final : public SimulatedDevice {
 public:
  Simulated(int threads, int64_t capacity, bool addressable, bool bf16_dot)
      : cpu_(make_cpu_device(threads, bf16_dot)), capacity_(capacity), addressable_(addressable) {}

  std::string name() const override { return addressable_ ? "sim" : "sim-gpu"; }
  bool is_host() const override { return addressable_; }  // kernels may read its memory directly
  bool separate_memory() const override { return true; }
  MemoryInfo memory_info() const override { return {capacity_, capacity_ - used_}; }

  void* allocate(size_t bytes) override {
    const auto size = static_cast<int64_t>(allocation_size(bytes));
    if (size == 0 || size > capacity_ - used_) {
      throw OutOfMemory("sim: cannot allocate " + std::to_string(bytes) +
                        " bytes: " + std::to_string(capacity_ - used_) + " of " +
                        std::to_string(capacity_) + " bytes of simulated device memory are free");
    }
    void* p = cpu_->allocate(bytes);
    used_ += size;
    return addressable_ ? p : tag(p);
  }
  void deallocate(void* p, size_t bytes) override {
    cpu_->deallocate(untag(p), bytes);
    used_ -= static_cast<int64_t>(allocation_size(bytes));
  }
  void copy(void* dst, const void* src, size_t bytes, CopyKind kind) override {
    cpu_->copy(untag(dst), untag(src), bytes, kind);
    const auto n = static_cast<int64_t>(bytes);
    if (kind == CopyKind::kHostToDevice) stats_.host_to_device_bytes += n;
    if (kind == CopyKind::kDeviceToHost) stats_.device_to_host_bytes += n;
    ++stats_.copies;
  }
  void synchronize() override { cpu_->synchronize(); }
  void gemm(const GemmArgs& g) override {
    GemmArgs h = g;
    h.a = untag(g.a), h.b = untag(g.b), h.c = untag(g.c);
    cpu_->gemm(h);
  }
  int threads() const override { return cpu_->threads(); }
  // Its kernels are the CPU's, on the CPU's instructions: the same numbers as the CPU device.
  bool has_16bit_dot(DType type) const override { return cpu_->has_16bit_dot(type); }
  const CopyStats& copy_stats() const override { return stats_; }

 private:
  std::unique_ptr<Device> cpu_;
  int64_t capacity_;
  bool addressable_;
  int64_t used_ = 0;
  CopyStats stats_;
};

}  // namespace

std::unique_ptr<SimulatedDevice> make_simulated_device(int threads, int64_t capacity_bytes,
                                                       bool addressable, bool bf16_dot) {
  if (capacity_bytes <= 0) {
    throw InvalidArgument("sim: capacity must be positive, got " + std::to_string(capacity_bytes));
  }
  return std::make_unique<Simulated>(threads, capacity_bytes, addressable, bf16_dot);
}

}  // namespace disc::devices
