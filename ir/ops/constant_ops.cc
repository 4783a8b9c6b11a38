// Ops that make tensors from nothing: scalars, filled tensors and index ramps. Their results have
// the role `constant`.
#include "ir/op_registry.h"
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

}  // namespace

void register_constant_ops(OpRegistry& r) {
  OpDef constant{.name = "constant", .category = OpCategory::kConstant,
                 .summary = "a scalar holding `value`"};
  constant.min_operands = constant.max_operands = 0;
  constant.flops_per_element = 0;
  constant.attrs = {{"value", AttrKind::kFloat, std::nullopt, {}},
                    {"dtype", AttrKind::kDType, DType::kF32, {}}};
  constant.infer = [](InferContext& ctx) {
    return std::vector{TensorType{ctx.attrs().get_dtype("dtype"), {}}};
  };
  r.add(std::move(constant));

  OpDef full{.name = "full", .category = OpCategory::kConstant,
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
  r.add(std::move(full));

  OpDef iota{.name = "iota", .category = OpCategory::kConstant,
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
  r.add(std::move(iota));
}

}  // namespace disc::ir
