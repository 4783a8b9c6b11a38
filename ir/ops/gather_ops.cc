// Row gathers (embedding lookup) and their gradient, scatter-add.
#include "ir/op_registry.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

// gather(table [V, rest...], indices [idx...]) -> [idx..., rest...]
std::vector<TensorType> infer_gather(InferContext& ctx) {
  ctx.require(ctx.in(0).rank() >= 1, "operand 0 (the table) needs rank >= 1");
  ctx.require_integer(1);
  std::vector<DimExpr> out = ctx.in(1).shape;
  out.insert(out.end(), ctx.in(0).shape.begin() + 1, ctx.in(0).shape.end());
  return {TensorType{ctx.in(0).dtype, out}};
}

// scatter_add(base [V, rest...], indices [idx...], updates [idx..., rest...]) -> [V, rest...]
std::vector<TensorType> infer_scatter_add(InferContext& ctx) {
  ctx.require_float(0, /*allow_int=*/true);
  ctx.require(ctx.in(0).rank() >= 1, "operand 0 (the base) needs rank >= 1");
  ctx.require_integer(1);
  same_dtype(ctx, 0, 2);
  std::vector<DimExpr> want = ctx.in(1).shape;
  want.insert(want.end(), ctx.in(0).shape.begin() + 1, ctx.in(0).shape.end());
  const auto& upd = ctx.in(2).shape;
  ctx.require(upd.size() == want.size(), "operand 2 (updates) has shape " + dims_str(upd) +
                                             "; expected indices' shape then base's row shape " +
                                             dims_str(want));
  for (size_t i = 0; i < want.size(); ++i) {
    ctx.unify(upd[i], want[i], "updates dim " + std::to_string(i) + " must equal " + want[i].str());
  }
  return {ctx.in(0)};
}

}  // namespace

void register_gather_ops(OpRegistry& r) {
  OpDef gather{.name = "gather", .category = OpCategory::kGatherScatter,
               .summary = "rows of the table picked by integer indices (embedding lookup)"};
  gather.min_operands = gather.max_operands = 2;
  gather.flops_per_element = 0;
  gather.infer = infer_gather;
  r.add(std::move(gather));

  OpDef scatter{.name = "scatter_add", .category = OpCategory::kGatherScatter,
                .summary = "base plus each update row added at its index (gather's gradient)"};
  scatter.min_operands = scatter.max_operands = 3;
  scatter.infer = infer_scatter_add;
  r.add(std::move(scatter));
}

}  // namespace disc::ir
