// Elementwise ops: unary math, binary arithmetic, comparisons, select and cast. Operands of a
// binary op have equal shapes (broadcasting is an explicit `broadcast` node), which is what lets
// the fusion planner treat every elementwise op alike.
#include "ir/op_registry.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

OpDef unary(const std::string& name, const std::string& summary, int flops, bool allow_int) {
  OpDef d{.name = name, .category = OpCategory::kElementwise, .summary = summary};
  d.flops_per_element = flops;
  d.infer = [allow_int](InferContext& ctx) {
    ctx.require_float(0, allow_int);
    return std::vector{ctx.in(0)};
  };
  return d;
}

OpDef binary(const std::string& name, const std::string& summary, bool comparison) {
  OpDef d{.name = name, .category = OpCategory::kElementwise, .summary = summary};
  d.min_operands = d.max_operands = 2;
  d.infer = [comparison](InferContext& ctx) {
    ctx.require_float(0, /*allow_int=*/true);
    same_dtype(ctx, 0, 1);
    auto shape = unify_shapes(ctx, 0, 1);
    return std::vector{TensorType{comparison ? DType::kBool : ctx.in(0).dtype, shape}};
  };
  return d;
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  r.add(unary("neg", "-x", 1, true));
  r.add(unary("abs", "|x|", 1, true));
  r.add(unary("relu", "max(x, 0)", 1, true));
  r.add(unary("exp", "e^x", 4, false));
  r.add(unary("log", "natural logarithm", 4, false));
  r.add(unary("sqrt", "square root", 4, false));
  r.add(unary("rsqrt", "1 / sqrt(x)", 4, false));
  r.add(unary("tanh", "hyperbolic tangent", 4, false));
  r.add(unary("sigmoid", "1 / (1 + e^-x)", 4, false));
  r.add(unary("silu", "x * sigmoid(x)", 5, false));
  r.add(unary("sin", "sine", 4, false));
  r.add(unary("cos", "cosine", 4, false));
  OpDef gelu = unary("gelu", "x * Phi(x); `approximate` picks the erf form or the tanh form", 8,
                     false);
  gelu.attrs = {{"approximate", AttrKind::kString, std::string("none"), {"none", "tanh"}}};
  r.add(std::move(gelu));

  r.add(binary("add", "a + b", false));
  r.add(binary("sub", "a - b", false));
  r.add(binary("mul", "a * b", false));
  r.add(binary("div", "a / b", false));
  r.add(binary("pow", "a ^ b", false));
  r.add(binary("max", "elementwise maximum", false));
  r.add(binary("min", "elementwise minimum", false));
  for (const char* cmp : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    r.add(binary(cmp, std::string("a ") + cmp + " b, as bool", true));
  }

  OpDef select{.name = "select", .category = OpCategory::kElementwise,
                .summary = "cond ? a : b, elementwise"};
  select.min_operands = select.max_operands = 3;
  select.infer = [](InferContext& ctx) {
    ctx.require(ctx.in(0).dtype == DType::kBool, "operand 0 (the condition) must be bool");
    same_dtype(ctx, 1, 2);
    unify_shapes(ctx, 0, 1);
    return std::vector{TensorType{ctx.in(1).dtype, unify_shapes(ctx, 1, 2)}};
  };
  r.add(std::move(select));

  OpDef cast{.name = "cast", .category = OpCategory::kElementwise,
             .summary = "converts to `dtype` (round to nearest even; bool is x != 0)"};
  cast.attrs = {{"dtype", AttrKind::kDType, std::nullopt, {}}};
  cast.infer = [](InferContext& ctx) {
    return std::vector{TensorType{ctx.attrs().get_dtype("dtype"), ctx.in(0).shape}};
  };
  r.add(std::move(cast));
}

}  // namespace disc::ir
