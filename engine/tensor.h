// A dense, row-major tensor whose storage comes from a memory::Allocator and returns to it when
// the last Tensor sharing it goes away. Copies of a Tensor share storage.
//
//   auto t = engine::Tensor::from<float>({2, 3}, {1, 2, 3, 4, 5, 6}, alloc);
//   float* p = t.data<float>();
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ir/tensor_ref.h"
#include "memory/allocator.h"

namespace disc::engine {

class Tensor {
 public:
  Tensor() = default;
  static Tensor empty(DType dtype, std::vector<int64_t> shape, memory::Allocator& alloc);
  template <typename T>
  static Tensor from(std::vector<int64_t> shape, const std::vector<T>& values,
                     memory::Allocator& alloc);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const;
  int64_t bytes() const { return numel() * dtype_size(dtype_); }
  void* raw() const { return storage_ ? storage_->data : nullptr; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw());
  }
  // A copy of the elements in host memory (through the device: a GPU's memory is not the host's).
  template <typename T>
  std::vector<T> to_vector() const {
    if (sizeof(T) != static_cast<size_t>(dtype_size(dtype_)))
      throw InvalidArgument("to_vector: tensor " + describe() + " has elements of " +
                            std::to_string(dtype_size(dtype_)) + " bytes, not " +
                            std::to_string(sizeof(T)));
    std::vector<T> v(static_cast<size_t>(numel()));
    download(v.data());
    return v;
  }
  // Bytes in and out of the tensor, through its device (memcpy on the CPU, copies to and from a
  // GPU): host code reads and writes a tensor only this way, never through raw(), which is the
  // device's address for its kernels.
  void upload(const void* host) const;  // bytes() bytes from host memory
  void download(void* host) const;      // bytes() bytes to host memory
  // The same number of bytes, from this device, the host, or (into a host tensor) another device.
  void copy_from(const Tensor& other) const;
  void zero() const;
  ir::TensorRef ref() const { return {dtype_, shape_, raw()}; }
  // The same storage read as `shape`, which must hold as many elements (InvalidArgument else).
  Tensor reshaped(std::vector<int64_t> shape) const;
  std::string describe() const;  // "f32[2, 3]"
  // Elements that are NaN or infinite (0 for tensors that are not floating point): a checkpoint
  // or a weight that holds one is not a state to train from.
  int64_t count_nonfinite() const;

 private:
  struct Storage {
    Storage(memory::Allocator& a, size_t n)
        : keep(a.keep_alive()), alloc(&a), data(a.allocate(n)), bytes(n) {}
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    ~Storage() { alloc->deallocate(data, bytes); }
    std::shared_ptr<void> keep;  // the allocator's owner, released after the deallocate
    memory::Allocator* alloc;
    void* data;
    size_t bytes;
  };
  DType dtype_ = DType::kF32;
  std::vector<int64_t> shape_;
  std::shared_ptr<Storage> storage_;
};

template <typename T>
Tensor Tensor::from(std::vector<int64_t> shape, const std::vector<T>& values,
                    memory::Allocator& alloc) {
  DType dt = std::is_same_v<T, float>     ? DType::kF32
             : std::is_same_v<T, double>  ? DType::kF64
             : std::is_same_v<T, int32_t> ? DType::kI32
             : std::is_same_v<T, int64_t> ? DType::kI64
             : std::is_same_v<T, uint8_t> ? DType::kU8
                                          : DType::kBool;
  Tensor t = empty(dt, std::move(shape), alloc);
  if (static_cast<int64_t>(values.size()) != t.numel()) {
    throw InvalidArgument("Tensor::from: " + std::to_string(values.size()) + " values for shape " +
                          t.describe() + " (" + std::to_string(t.numel()) + " elements)");
  }
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());  // vector<bool> packs bits
    t.upload(bytes.data());
  } else {
    t.upload(values.data());
  }
  return t;
}

// A float tensor (f32, bf16, f16) as `to`, in a new tensor on `alloc` (rounded to nearest even
// when narrower; `t` itself when it is of that dtype already). InvalidArgument for other dtypes.
Tensor as_dtype(const Tensor& t, DType to, memory::Allocator& alloc);

}  // namespace disc::engine
