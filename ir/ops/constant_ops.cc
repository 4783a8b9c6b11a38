// Ops that make tensors from nothing: scalars, filled tensors and index ramps. Their results have
// the role `constant`.
#include "ir/op_registry.h"
#include "ir/ops/index_math.h"
#include "ir/ops/lowerings.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

void require_nonnegative_dims(InferContext& ctx, const std::vector<DimExpr>& dims) {
  for (const auto& d : dims) {
    ctx.require(ctx.shapes().compare(d, 0) != Ordering::kLT,
                "`shape` has a negative dim " + d.str());
  }
}

// Fills out[0] with f(i) for every flat index i, in its dtype.
template <typename F>
void fill(const KernelArgs& a, F f) {
  dispatch_number(a.out[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    T* out = a.out[0].as<T>();
    for (int64_t i = 0, n = a.out[0].numel(); i < n; ++i) out[i] = static_cast<T>(f(i));
  });
}

void constant_kernel(const KernelArgs& a) {
  double v = a.a().get_float("value");
  fill(a, [v](int64_t) { return v; });
}

void iota_kernel(const KernelArgs& a) {
  int axis = static_cast<int>(a.a().get_int("axis"));
  if (axis < 0) axis += a.out[0].rank();
  AxisSplit s = split_at(a.out[0].shape, axis);
  fill(a, [s](int64_t i) { return (i / s.inner) % s.extent; });
}

// One value everywhere: an instruction of the kernel.
Lowering constant_lowering() {
  return {
      .kind = FusionKind::kElementwise,
      .fits =
          [](const KernelWriter& w, const Node& n) {
            return computes_in_f32(n.result()) && w.fit_of(n.result()->shape()) != Fit::kNone;
          },
      .lower = [](KernelWriter& w,
                  const Node& n) { w.set(n.result(), w.constant(n.attrs().get_float("value"))); }};
}

}  // namespace

void register_constant_ops(OpRegistry& r) {
  OpDef constant{
      .name = "constant", .category = OpCategory::kConstant, .summary = "a scalar holding `value`"};
  constant.min_operands = constant.max_operands = 0;
  constant.flops_per_element = 0;
  constant.attrs = {{"value", AttrKind::kFloat, std::nullopt, {}},
                    {"dtype", AttrKind::kDType, DType::kF32, {}}};
  constant.infer = [](InferContext& ctx) {
    return std::vector{TensorType{ctx.attrs().get_dtype("dtype"), {}}};
  };
  constant.reference = constant_kernel;
  constant.lowering = constant_lowering();
  constant.makes_constant = true;
  r.add(std::move(constant));

  OpDef full{.name = "full",
             .category = OpCategory::kConstant,
             .summary = "a tensor of `shape` filled with `value`"};
  full.min_operands = full.max_operands = 0;
  full.flops_per_element = 0;
  full.attrs = {{"value", AttrKind::kFloat, std::nullopt, {}},
                {"shape", AttrKind::kDims, std::nullopt, {}},
                {"dtype", AttrKind::kDType, DType::kF32, {}}};
  full.infer = [](InferContext& ctx) {
    const auto& shape = ctx.attrs().get_dims("shape");
    require_nonnegative_dims(ctx, shape);
    return std::vector{TensorType{ctx.attrs().get_dtype("dtype"), shape}};
  };
  full.reference = constant_kernel;
  full.lowering = constant_lowering();
  full.makes_constant = true;
  r.add(std::move(full));

  OpDef iota{.name = "iota",
             .category = OpCategory::kConstant,
             .summary = "a tensor of `shape` whose element is its index along `axis`"};
  iota.min_operands = iota.max_operands = 0;
  iota.flops_per_element = 0;
  iota.attrs = {{"shape", AttrKind::kDims, std::nullopt, {}},
                {"axis", AttrKind::kInt, int64_t{0}, {}},
                {"dtype", AttrKind::kDType, DType::kI64, {}}};
  iota.infer = [](InferContext& ctx) {
    const auto& shape = ctx.attrs().get_dims("shape");
    require_nonnegative_dims(ctx, shape);
    ctx.axis(ctx.attrs().get_int("axis"), static_cast<int>(shape.size()), "axis");
    DType t = ctx.attrs().get_dtype("dtype");
    ctx.require(t != DType::kBool, "`dtype` must be a number type");
    return std::vector{TensorType{t, shape}};
  };
  iota.reference = iota_kernel;
  r.add(std::move(iota));

  OpDef dim_value{.name = "dim_value",
                  .category = OpCategory::kConstant,
                  .summary = "a scalar holding the run-time value of the dim expression `dim`"};
  dim_value.min_operands = dim_value.max_operands = 0;
  dim_value.flops_per_element = 0;
  dim_value.attrs = {{"dim", AttrKind::kDim, std::nullopt, {}},
                     {"dtype", AttrKind::kDType, DType::kF32, {}}};
  dim_value.infer = [](InferContext& ctx) {
    return std::vector{TensorType{ctx.attrs().get_dtype("dtype"), {}}};
  };
  dim_value.reference = [](const KernelArgs& a) {
    int64_t v = a.dim_attr("dim");
    fill(a, [v](int64_t) { return static_cast<double>(v); });
  };
  r.add(std::move(dim_value));
}

}  // namespace disc::ir
