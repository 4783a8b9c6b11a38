#include "engine/tensor.h"

#include "base/finite.h"
#include "base/half.h"

namespace disc::engine {

Tensor Tensor::empty(DType dtype, std::vector<int64_t> shape, memory::Allocator& alloc) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  for (int64_t d : t.shape_) {
    if (d < 0) throw InvalidArgument("tensor shape " + t.describe() + " has a negative dim");
  }
  size_t bytes = static_cast<size_t>(t.bytes());
  t.storage_ = std::make_shared<Storage>(alloc, bytes);
  return t;
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  if (t.numel() != numel()) {
    throw InvalidArgument("tensor " + describe() + " cannot be read as " + t.describe() +
                          ": the element counts differ");
  }
  return t;
}

void Tensor::upload(const void* host) const {
  if (bytes() > 0)
    storage_->alloc->device().copy(raw(), host, static_cast<size_t>(bytes()),
                                   devices::CopyKind::kHostToDevice);
}

void Tensor::download(void* host) const {
  if (bytes() == 0) return;
  devices::Device& d = storage_->alloc->device();
  d.copy(host, raw(), static_cast<size_t>(bytes()), devices::CopyKind::kDeviceToHost);
  d.synchronize();
}

void Tensor::copy_from(const Tensor& other) const {
  if (other.bytes() != bytes())
    throw InvalidArgument("cannot copy " + other.describe() + " into " + describe() +
                          ": the sizes differ");
  if (bytes() == 0 || raw() == other.raw()) return;
  devices::Device &to = storage_->alloc->device(), &from = other.storage_->alloc->device();
  const auto n = static_cast<size_t>(bytes());
  if (&to == &from) {
    to.copy(raw(), other.raw(), n, devices::CopyKind::kDeviceToDevice);
  } else if (from.is_host()) {  // e.g. a checkpoint's tensor read on the host into a GPU's
    to.copy(raw(), other.raw(), n, devices::CopyKind::kHostToDevice);
  } else if (to.is_host()) {
    from.copy(raw(), other.raw(), n, devices::CopyKind::kDeviceToHost);
  } else {
    throw InvalidArgument("cannot copy " + other.describe() + " on " + from.name() + " into " +
                          describe() + " on " + to.name() + ": copy it through the host");
  }
}

void Tensor::zero() const {
  const std::vector<std::byte> zeros(static_cast<size_t>(bytes()));
  upload(zeros.data());
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

std::string Tensor::describe() const {
  std::string s(dtype_name(dtype_));
  s += '[';
  for (size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + ']';
}

int64_t Tensor::count_nonfinite() const {
  if (!is_float(dtype_) || numel() == 0) return 0;
  std::vector<std::byte> host(static_cast<size_t>(bytes()));
  download(host.data());
  return non_finite(dtype_, host).count;
}

Tensor as_dtype(const Tensor& t, DType to, memory::Allocator& alloc) {
  if (t.dtype() == to) return t;
  auto floating = [](DType d) { return d == DType::kF32 || is_half_float(d); };
  if (!floating(t.dtype()) || !floating(to))
    throw InvalidArgument("as_dtype: " + t.describe() + " as " + std::string(dtype_name(to)) +
                          ": only f32, bf16 and f16 convert");
  std::vector<float> wide(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kF32) {
    t.download(wide.data());
  } else {
    std::vector<uint16_t> bits(wide.size());
    t.download(bits.data());
    half_to_f32(t.dtype(), bits.data(), wide.data(), t.numel());
  }
  Tensor out = Tensor::empty(to, t.shape(), alloc);
  if (to == DType::kF32) {
    out.upload(wide.data());
  } else {
    std::vector<uint16_t> bits(wide.size());
    f32_to_half(to, wide.data(), bits.data(), t.numel());
    out.upload(bits.data());
  }
  return out;
}

}  // namespace disc::engine
