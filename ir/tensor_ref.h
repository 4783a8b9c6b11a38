// What reference kernels see: non-owning views of dense row-major tensors in host memory, with
// concrete shapes, plus the node's attributes and the step's symbol values (for dim attributes
// such as a slice's `limit = S - 1`).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "ir/attribute.h"
#include "ir/dim_expr.h"

namespace disc::ir {

struct TensorRef {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  void* data = nullptr;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int64_t bytes() const { return numel() * dtype_size(dtype); }
  int rank() const { return static_cast<int>(shape.size()); }
  int64_t dim(int i) const { return shape.at(i < 0 ? i + rank() : i); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

struct KernelArgs {
  std::string op;  // for messages
  std::vector<TensorRef> in;
  std::vector<TensorRef> out;
  const Attributes* attrs = nullptr;
  const Bindings* bindings = nullptr;

  const Attributes& a() const { return *attrs; }
  // A dim attribute evaluated under this step's bindings.
  int64_t dim_attr(const std::string& name) const {
    return attrs->get_dim(name).evaluate(*bindings);
  }
  std::vector<int64_t> dims_attr(const std::string& name) const {
    std::vector<int64_t> out_dims;
    for (const auto& d : attrs->get_dims(name)) out_dims.push_back(d.evaluate(*bindings));
    return out_dims;
  }
};

// Reads args.in, writes every args.out (already allocated with the inferred shapes).
using ReferenceKernel = std::function<void(const KernelArgs&)>;

// Calls f(T{}) with T the C++ type of `t`, for the float types reference kernels support.
template <typename F>
void dispatch_float(DType t, const std::string& op, F&& f) {
  switch (t) {
    case DType::kF32:
      return f(float{});
    case DType::kF64:
      return f(double{});
    default:
      throw InvalidArgument("reference kernel of `" + op + "` supports f32 and f64, not " +
                            std::string(dtype_name(t)));
  }
}

// As dispatch_float, also for i32 and i64.
template <typename F>
void dispatch_number(DType t, const std::string& op, F&& f) {
  switch (t) {
    case DType::kI32:
      return f(int32_t{});
    case DType::kI64:
      return f(int64_t{});
    default:
      return dispatch_float(t, op, f);
  }
}

// Reads an integer index tensor element as int64.
inline int64_t index_at(const TensorRef& t, int64_t i) {
  return t.dtype == DType::kI32 ? t.as<int32_t>()[i] : t.as<int64_t>()[i];
}

}  // namespace disc::ir
