// Reductions over a set of axes.
#include "ir/op_registry.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

OpDef reduce(const std::string& name, const std::string& summary, bool float_only) {
  OpDef d{.name = name, .category = OpCategory::kReduce, .summary = summary};
  d.attrs = {{"axes", AttrKind::kInts, std::nullopt, {}},
             {"keepdims", AttrKind::kBool, false, {}}};
  d.infer = [float_only](InferContext& ctx) {
    ctx.require_float(0, /*allow_int=*/!float_only);
    auto axes = axes_attr(ctx, "axes", ctx.in(0).rank());
    bool keep = ctx.attrs().get_bool("keepdims");
    std::vector<DimExpr> out;
    for (int d = 0; d < ctx.in(0).rank(); ++d) {
      bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
      if (!reduced) out.push_back(ctx.in(0).shape[d]);
      else if (keep) out.push_back(1);
    }
    return std::vector{TensorType{ctx.in(0).dtype, out}};
  };
  d.cost = [](const auto& in, const auto& out, const Attributes&) {
    return input_proportional_cost(in, out, 1);
  };
  return d;
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  r.add(reduce("reduce_sum", "sum over `axes`", false));
  r.add(reduce("reduce_max", "maximum over `axes`", false));
  r.add(reduce("reduce_mean", "mean over `axes`", true));
}

}  // namespace disc::ir
