// Optimizer updates as ops. Each returns the new parameter and optimizer state; the training step
// marks them as updates of the parameter and state arguments, which the executor applies in
// place (each op writes its results over the arguments when nothing reads them later). The
// learning rate is a scalar operand so schedules live outside the graph.
#include "ir/op_registry.h"
#include "ir/ops/kernels.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

// Operands 0..n_like-1 share operand 0's type; then scalars (lr f-typed, step i64).
ShapeRule update_rule(int n_like, bool has_step, int results) {
  return [n_like, has_step, results](InferContext& ctx) {
    ctx.require_float(0);
    for (int i = 1; i < n_like; ++i) {
      same_dtype(ctx, 0, i);
      unify_shapes(ctx, 0, i);
    }
    const TensorType& lr = ctx.in(n_like);
    ctx.require(
        lr.rank() == 0 && lr.dtype == ctx.in(0).dtype,
        "operand " + std::to_string(n_like) + " (lr) must be a scalar of the parameter's dtype");
    if (has_step) {
      const TensorType& step = ctx.in(n_like + 1);
      ctx.require(step.rank() == 0 && step.dtype == DType::kI64,
                  "operand " + std::to_string(n_like + 1) +
                      " (step) must be an i64 scalar (1 at the first step)");
    }
    return std::vector<TensorType>(results, ctx.in(0));
  };
}

// The kernels read each element's inputs before writing its outputs (optimizer_kernels.cc), so
// each new value may take the buffer of the one it replaces: updates then run in place.
std::function<std::vector<std::vector<int>>(const Attributes&, int)> per_result(
    std::vector<std::vector<int>> operands) {
  return [operands = std::move(operands)](const Attributes&, int) { return operands; };
}

}  // namespace

void register_optimizer_ops(OpRegistry& r) {
  OpDef sgd{.name = "sgd_update",
            .category = OpCategory::kElementwise,
            .summary =
                "(param', buf') of SGD with momentum: g' = grad + weight_decay * param; "
                "buf' = momentum * buf + g'; param' = param - lr * (nesterov ? g' + momentum * "
                "buf' : buf')"};
  sgd.min_operands = sgd.max_operands = 4;  // param, grad, buf, lr
  sgd.num_results = 2;
  sgd.flops_per_element = 5;
  sgd.attrs = {{"momentum", AttrKind::kFloat, 0.9, {}},
               {"weight_decay", AttrKind::kFloat, 0.0, {}},
               {"nesterov", AttrKind::kBool, false, {}}};
  sgd.infer = update_rule(3, false, 2);
  sgd.reference = sgd_update_kernel;
  sgd.overwritable_of = per_result({{0}, {2}});  // param' over param, buf' over buf
  r.add(std::move(sgd));

  OpDef adamw{
      .name = "adamw_update",
      .category = OpCategory::kElementwise,
      .summary =
          "(param', m', v') of AdamW: m' = b1 m + (1-b1) g; v' = b2 v + (1-b2) g^2; "
          "param' = param - lr * (m'/(1-b1^t) / (sqrt(v'/(1-b2^t)) + eps) + weight_decay * param)"};
  adamw.min_operands = adamw.max_operands = 6;  // param, grad, m, v, lr, step
  adamw.num_results = 3;
  adamw.flops_per_element = 14;
  adamw.attrs = {{"beta1", AttrKind::kFloat, 0.9, {}},
                 {"beta2", AttrKind::kFloat, 0.999, {}},
                 {"eps", AttrKind::kFloat, 1e-8, {}},
                 {"weight_decay", AttrKind::kFloat, 0.01, {}}};
  adamw.infer = update_rule(4, true, 3);
  adamw.reference = adamw_update_kernel;
  adamw.overwritable_of = per_result({{0}, {2}, {3}});  // param', m', v' over param, m, v
  r.add(std::move(adamw));
}

}  // namespace disc::ir
