// Test helpers shared by the reference-kernel tests (nn_kernels_test.cc, conv_kernels_test.cc):
// a tensor that owns its storage, running an op's reference kernel the way the executor does, and
// checking a gradient kernel against central finite differences of its forward kernel.
//
//   Tensor x = random_tensor({7, 13}, /*seed=*/1), dy = random_tensor({7, 13}, 2);
//   Tensor dx = run("gelu_grad", {}, {&x, &dy})[0];
//   expect_gradient("gelu", {}, {x}, 0, dy, dx);
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "ir/op_registry.h"
#include "ir/ops/kernels.h"

namespace disc::ir::testing {

// A tensor owning its storage: one double per element holds any dtype of up to 8 bytes.
struct Tensor {
  DType dtype = DType::kF64;
  std::vector<int64_t> shape;
  std::vector<double> storage;

  explicit Tensor(std::vector<int64_t> s, DType t = DType::kF64)
      : dtype(t), shape(std::move(s)), storage(std::max<int64_t>(product_of(shape), 1)) {}
  Tensor(std::vector<int64_t> s, const std::vector<double>& values, DType t = DType::kF64)
      : Tensor(std::move(s), t) {
    for (size_t i = 0; i < values.size(); ++i) set(i, values[i]);
  }
  int64_t numel() const { return product_of(shape); }
  TensorRef ref() const { return {dtype, shape, const_cast<double*>(storage.data())}; }
  double get(int64_t i) const {
    switch (dtype) {
      case DType::kF32:
        return ref().as<float>()[i];
      case DType::kI32:
        return ref().as<int32_t>()[i];
      case DType::kI64:
        return static_cast<double>(ref().as<int64_t>()[i]);
      default:
        return storage[i];
    }
  }
  void set(int64_t i, double v) {
    switch (dtype) {
      case DType::kF32:
        ref().as<float>()[i] = static_cast<float>(v);
        return;
      case DType::kI32:
        ref().as<int32_t>()[i] = static_cast<int32_t>(v);
        return;
      case DType::kI64:
        ref().as<int64_t>()[i] = static_cast<int64_t>(v);
        return;
      default:
        storage[i] = v;
    }
  }
};

// Uniform in [lo, hi), reproducible from `seed`.
inline Tensor random_tensor(std::vector<int64_t> shape, uint64_t seed, DType t = DType::kF64,
                            double lo = -2, double hi = 2) {
  Tensor x(std::move(shape), t);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, u(rng));
  return x;
}

// Runs `op`'s reference kernel; result shapes come from the op's shape rule, as in the executor.
inline std::vector<Tensor> run(const std::string& op, Attributes attrs,
                               std::vector<const Tensor*> in) {
  const OpDef& def = OpRegistry::instance().get(op);
  std::string problem = apply_attr_schema(attrs, def.attrs);
  if (!problem.empty()) throw InvalidArgument(problem);
  std::vector<TensorType> types;
  for (const Tensor* t : in) types.push_back({t->dtype, {t->shape.begin(), t->shape.end()}});
  std::vector<const TensorType*> type_ptrs;
  for (const auto& t : types) type_ptrs.push_back(&t);
  ShapeGraph shapes;
  std::vector<Tensor> out;
  for (const auto& t : infer_types(def, type_ptrs, attrs, shapes)) {
    std::vector<int64_t> dims;
    for (const auto& d : t.shape) dims.push_back(*d.constant());
    out.emplace_back(dims, t.dtype);
  }
  Bindings bindings;
  KernelArgs args{.op = op, .attrs = &attrs, .bindings = &bindings};
  for (const Tensor* t : in) args.in.push_back(t->ref());
  for (const Tensor& t : out) args.out.push_back(t.ref());
  def.reference(args);
  return out;
}

// Compares `grad` with central differences of L = sum(dy * forward(inputs)[0]) with respect to
// inputs[which], element by element: h = 1e-6, relative tolerance 1e-6 (absolute below 1e-2).
inline void expect_gradient(const std::string& forward, const Attributes& attrs,
                            std::vector<Tensor> inputs, int which, const Tensor& dy,
                            const Tensor& grad) {
  const double h = 1e-6;
  Tensor& x = inputs[which];
  ASSERT_EQ(grad.shape, x.shape);
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) ptrs.push_back(&t);
  for (int64_t k = 0; k < x.numel(); ++k) {
    double saved = x.get(k);
    x.set(k, saved + h);
    Tensor plus = run(forward, attrs, ptrs)[0];
    x.set(k, saved - h);
    Tensor minus = run(forward, attrs, ptrs)[0];
    x.set(k, saved);
    double numeric = 0;  // differences first: elements k does not reach cancel exactly
    for (int64_t i = 0; i < dy.numel(); ++i) numeric += dy.get(i) * (plus.get(i) - minus.get(i));
    numeric /= 2 * h;
    ASSERT_NEAR(grad.get(k), numeric, 1e-6 * std::max(std::abs(numeric), 1e-2))
        << forward << ": operand " << which << ", element " << k;
  }
}

}  // namespace disc::ir::testing
