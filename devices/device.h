// The Device interface: what the engine, the memory governor and the JIT need from a piece of
// hardware. A device allocates and frees, copies, synchronizes and runs library GEMMs; it knows
// no graph. Loading and launching compiled kernels join this interface with jit/.
//
//   auto dev = devices::make_cpu_device(/*threads=*/0);      // 0: every hardware thread
//   float* a = static_cast<float*>(dev->allocate(m * k * sizeof(float)));
//   ...
//   devices::GemmArgs g{.dtype = DType::kF32, .batch = 1, .m = m, .n = n, .k = k,
//                       .a = a, .b = b, .c = c};
//   dev->gemm(g);                                           // C = A * B
//   dev->synchronize();
//   dev->deallocate(a, m * k * sizeof(float));
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "base/dtype.h"
#include "base/error.h"

namespace disc::devices {

// Every allocation is aligned to this, so kernels may use full-width aligned vector loads.
inline constexpr size_t kAllocAlignment = 64;
// Blocks of at least this size are whole pages (a CPU maps them on their own).
inline constexpr size_t kPageBlockMin = size_t{64} << 10;
inline constexpr size_t kPageSize = 4096;

// The bytes an allocation of `bytes` really occupies: a multiple of kAllocAlignment (at least one),
// or of kPageSize from kPageBlockMin on. Every allocator counts these, so that a plan's
// arithmetic and the bytes reserved from the system agree. 0 when rounding up overflows.
constexpr size_t allocation_size(size_t bytes) {
  const size_t unit = bytes >= kPageBlockMin ? kPageSize : kAllocAlignment;
  if (bytes > SIZE_MAX - unit) return 0;
  return bytes == 0 ? kAllocAlignment : (bytes + unit - 1) / unit * unit;
}

struct MemoryInfo {
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;  // what can still be allocated without swapping
};

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };

// C = op(A) * op(B) for `batch` independent products, in row-major storage:
//   A: [batch, m, k], or [batch, k, m] when transpose_a
//   B: [batch, k, n], or [batch, n, k] when transpose_b
//   C: [batch, m, n], overwritten (beta = 0), or added to with `accumulate` (beta = 1)
// Batch strides are in elements; batch_stride_b == 0 means one B shared by every batch entry
// (a weight matrix applied to a batch of activations). Rows are dense unless a leading dim
// (lda, ldb, ldc: elements from one stored row to the next) says otherwise, which addresses a
// block of a larger matrix (devices/cpu/tril_gemm.h multiplies triangles that way).
struct GemmArgs {
  DType dtype = DType::kF32;  // f32, f64, bf16 or f16 (A, B and C; 16-bit types sum in f32)
  int64_t batch = 1;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  bool transpose_a = false;
  bool transpose_b = false;
  bool accumulate = false;  // C += op(A) op(B): sums a contraction split over several calls
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  int64_t batch_stride_a = 0;
  int64_t batch_stride_b = 0;
  int64_t batch_stride_c = 0;
  int64_t lda = 0;  // 0: dense rows, that is k (m when transpose_a)
  int64_t ldb = 0;  // 0: n (k when transpose_b)
  int64_t ldc = 0;  // 0: n
  // With bf16 or f16 A and B: C is f32, its sums never rounded to 16 bits (a head's logits, and a
  // sum over several calls that is rounded once at its end).
  bool c_f32 = false;
};

// The leading dims with 0 resolved to dense rows.
inline int64_t lead_a(const GemmArgs& g) {
  return g.lda ? g.lda : g.transpose_a ? g.m : g.k;
}
inline int64_t lead_b(const GemmArgs& g) {
  return g.ldb ? g.ldb : g.transpose_b ? g.k : g.n;
}
inline int64_t lead_c(const GemmArgs& g) {
  return g.ldc ? g.ldc : g.n;
}

// Throws InvalidArgument when `g` cannot describe a product (negative sizes, a missing pointer,
// overlapping C entries, a dtype other than f32/f64). Backends call it before dispatching.
void check_gemm_args(const GemmArgs& g);

class Device {
 public:
  virtual ~Device() = default;

  virtual std::string name() const = 0;  // "cpu", "cuda:0"
  // True when the device's memory is directly addressable by the CPU (no copies needed).
  virtual bool is_host() const = 0;
  // True when the device's memory is a pool apart from host memory, so that copying a tensor to
  // the host and freeing it gives device bytes back (offload). GPUs, and the simulated device.
  virtual bool separate_memory() const { return !is_host(); }
  virtual MemoryInfo memory_info() const = 0;

  // kAllocAlignment-aligned; throws OutOfMemory naming the size when it cannot be had.
  virtual void* allocate(size_t bytes) = 0;
  // `bytes` is the size passed to allocate (devices with sized pools need it).
  virtual void deallocate(void* p, size_t bytes) = 0;
  // True when the device can give back the pages of part of a block of allocation_size(bytes)
  // and keep the rest: then decommit(p, from, to) gives back bytes [from, to) of block p
  // (multiples of kPageSize); touched again, they are new zero pages. A capped allocator uses it to
  // serve a request from a larger block and give the slack back when the cap needs room (CPU:
  // mapped blocks).
  virtual bool can_decommit(size_t /*bytes*/) const { return false; }
  virtual void decommit(void* p, size_t from, size_t to);
  // dst and src must not overlap. May be asynchronous where the device has streams: host memory
  // a copy writes is read only after synchronize(); host memory from allocate_host that a copy
  // reads stays allocated until then (other host memory may be reused once copy() returns).
  virtual void copy(void* dst, const void* src, size_t bytes, CopyKind kind) = 0;
  // Waits until every copy and kernel issued so far has finished.
  virtual void synchronize() = 0;
  // Host memory for copies to and from the device: page-locked on a GPU, so that such a copy runs
  // asynchronously beside the kernels; plain (kAllocAlignment-aligned) memory elsewhere.
  virtual void* allocate_host(size_t bytes);
  virtual void deallocate_host(void* p, size_t bytes);

  virtual void gemm(const GemmArgs& g) = 0;
  // True when gemm on 16-bit operands of `type` runs on the device's own 16-bit dot products with
  // f32 sums, rather than on f32 copies of them: kernels then hand it their 16-bit panels as they
  // are instead of widening everything themselves (devices/cpu/block_attention.h).
  virtual bool has_16bit_dot(DType /*type*/) const { return false; }
  // Host threads the device's kernels may use (CPU: TBB and oneDNN's OpenMP pool).
  virtual int threads() const = 0;
};

// Host memory from a device's allocate_host, given back when the buffer goes (after the copies
// that use it have finished: see Device::copy).
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(Device& dev, size_t bytes)
      : dev_(&dev), data_(dev.allocate_host(bytes)), bytes_(bytes) {}
  HostBuffer(HostBuffer&& o) noexcept : dev_(o.dev_), data_(o.data_), bytes_(o.bytes_) {
    o.data_ = nullptr;
  }
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    std::swap(dev_, o.dev_), std::swap(data_, o.data_), std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~HostBuffer() {
    if (data_) dev_->deallocate_host(data_, bytes_);
  }
  void* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  Device* dev_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// The CPU device. threads <= 0 means every hardware thread. bf16_dot false: bf16 attention and
// heads widen to f32 even where the CPU has bf16 dot products, so that they compute what they
// compute on CPUs without them.
std::unique_ptr<Device> make_cpu_device(int threads, bool bf16_dot = true);

}  // namespace disc::devices
