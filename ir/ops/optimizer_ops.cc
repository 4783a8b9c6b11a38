// Optimizer updates as ops. Each returns the new parameter and optimizer state; the training step
// marks them as updates of the parameter and state arguments, which the executor applies in
// place (each op writes its results over the arguments when nothing reads them later). The
// learning rate is a scalar operand so schedules live outside the graph.
#include "ir/op_registry.h"
#include "ir/ops/kernels.h"
#include "ir/ops/lowerings.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"
#include "ir/ops/state_codec.h"

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

// AdamW as adamw_update_kernel computes it, param, grad and the moments of the space's shape;
// the bias corrections are scalar-level (once per call).
Lowering adamw_lowering() {
  Lowering l{.kind = FusionKind::kElementwise};
  l.fits = [](const KernelWriter& w, const Node& n) {
    if (!reads_the_space(w, n)) return false;
    for (int i = 1; i < 4; ++i)
      if (!computes_in_f32(n.operand(i)) || !w.same(n.operand(i)->shape(), w.space())) return false;
    return n.operand(4)->rank() == 0 && computes_in_f32(n.operand(4)) && n.operand(5)->rank() == 0;
  };
  l.lower = [](KernelWriter& w, const Node& n) {
    const double b1 = n.attrs().get_float("beta1"), b2 = n.attrs().get_float("beta2");
    const int p = w.value(n.operand(0)), g = w.value(n.operand(1)), m = w.value(n.operand(2)),
              v = w.value(n.operand(3));
    const int lr = w.value(n.operand(4)), step = w.value(n.operand(5));
    const int one = w.constant(1);
    const int decay = w.emit(
        KOp::kSub, {one, w.emit(KOp::kMul, {lr, w.constant(n.attrs().get_float("weight_decay"))})});
    const int step_size = w.emit(
        KOp::kDiv, {lr, w.emit(KOp::kSub, {one, w.emit(KOp::kPow, {w.constant(b1), step})})});
    const int bc2_sqrt =
        w.emit(KOp::kSqrt, {w.emit(KOp::kSub, {one, w.emit(KOp::kPow, {w.constant(b2), step})})});
    const int m1 = w.emit(KOp::kAdd, {w.emit(KOp::kMul, {m, w.constant(b1)}),
                                      w.emit(KOp::kMul, {g, w.constant(1 - b1)})});
    const int v1 =
        w.emit(KOp::kAdd, {w.emit(KOp::kMul, {v, w.constant(b2)}),
                           w.emit(KOp::kMul, {w.emit(KOp::kMul, {w.constant(1 - b2), g}), g})});
    const int denom = w.emit(KOp::kAdd, {w.emit(KOp::kDiv, {w.emit(KOp::kSqrt, {v1}), bc2_sqrt}),
                                         w.constant(n.attrs().get_float("eps"))});
    w.set(n.result(0),
          w.emit(KOp::kSub, {w.emit(KOp::kMul, {p, decay}),
                             w.emit(KOp::kMul, {step_size, w.emit(KOp::kDiv, {m1, denom})})}));
    w.set(n.result(1), m1);
    w.set(n.result(2), v1);
  };
  return l;
}

// The tensors one moment is held in: bf16 values of the parameter's shape, or (int8) its u8 codes
// and an f32 scale per block.
std::vector<TensorType> held_types(const std::string& state, const TensorType& param) {
  if (state == "bf16") return {{DType::kBF16, param.shape}};
  const int64_t n = *param.numel().constant();
  return {{DType::kU8, param.shape}, {DType::kF32, {state_codec::blocks_of(n)}}};
}

// Operands: param and grad (f32), each moment's held tensors, lr (f32 scalar), step (i64 scalar),
// and optionally a guard (f32 scalar). Results: param', then each moment's held tensors anew.
ShapeRule compact_rule(int moments) {
  return [moments](InferContext& ctx) {
    const TensorType& param = ctx.in(0);
    ctx.require(param.dtype == DType::kF32,
                "operand 0 (param) must be f32: a compact optimizer state updates f32 weights");
    same_dtype(ctx, 0, 1);
    unify_shapes(ctx, 0, 1);
    const std::string state = ctx.attrs().get_string("state");
    ctx.require(state == "bf16" || param.numel().constant().has_value(),
                "operand 0 (param) must have a static shape for an int8 state, not " + param.str());
    const std::vector<TensorType> held = held_types(state, param);
    const int n_held = moments * static_cast<int>(held.size());
    ctx.require(ctx.num_operands() == 4 + n_held || ctx.num_operands() == 5 + n_held,
                "with state " + state + " it takes " + std::to_string(4 + n_held) +
                    " operands: param, grad, " + std::to_string(n_held) +
                    " state tensors, lr, step (and a guard: " + std::to_string(5 + n_held) + ")");
    std::vector<TensorType> results = {param};
    for (int i = 0; i < n_held; ++i) {
      const TensorType& want = held[i % held.size()];
      ctx.require(ctx.in(2 + i) == want, "operand " + std::to_string(2 + i) + " is " +
                                             ctx.in(2 + i).str() + "; state " + state +
                                             " holds it as " + want.str());
      results.push_back(want);
    }
    ctx.require(ctx.in(2 + n_held).rank() == 0 && ctx.in(2 + n_held).dtype == DType::kF32,
                "operand " + std::to_string(2 + n_held) + " (lr) must be an f32 scalar");
    ctx.require(ctx.in(3 + n_held).rank() == 0 && ctx.in(3 + n_held).dtype == DType::kI64,
                "operand " + std::to_string(3 + n_held) +
                    " (step) must be an i64 scalar (1 at the first step)");
    ctx.require(ctx.num_operands() == 4 + n_held ||
                    (ctx.in(4 + n_held).rank() == 0 && ctx.in(4 + n_held).dtype == DType::kF32),
                "operand " + std::to_string(4 + n_held) + " (guard) must be an f32 scalar");
    return results;
  };
}

// param' over param, and each held tensor anew over the one it replaces (operand 1 + result).
std::vector<std::vector<int>> compact_overwrites(const Attributes&, int results) {
  std::vector<std::vector<int>> over = {{0}};
  for (int r = 1; r < results; ++r) over.push_back({r + 1});
  return over;
}

// `moments` held in bf16 (one tensor each) or int8 (two): param, grad, the held tensors, lr, step,
// and optionally a guard: the update lands where it is 0; any other value, NaN included, keeps
// every value as it was (a step skipped for loss scaling's overflow, or one that must not apply).
// A select after the update would do the same, but over tensors that no kernel fuses (u8 codes).
OpDef compact_update(const std::string& name, const std::string& held, int moments, int flops,
                     std::vector<AttrSpec> attrs, ReferenceKernel kernel) {
  const std::string plain = name.substr(0, name.size() - std::string("_compact").size());
  OpDef def{.name = name,
            .category = OpCategory::kElementwise,
            .summary = plain + " with " + held +
                       " held in bf16 or 8-bit codes (`state`), rounded stochastically by "
                       "(`salt`, step, element); with a guard operand, only where it is 0"};
  def.min_operands = 4 + moments;
  def.max_operands = 5 + 2 * moments;
  def.num_results = -1;
  def.flops_per_element = flops;
  attrs.push_back({"state", AttrKind::kString, std::string("bf16"), {"bf16", "int8"}});
  attrs.push_back({"salt", AttrKind::kInt, int64_t{0}, {}});  // the dither's (state_codec.h)
  def.attrs = std::move(attrs);
  def.infer = compact_rule(moments);
  def.reference = std::move(kernel);
  def.reference_takes_half = true;
  def.overwritable_of = compact_overwrites;
  return def;
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
  const std::vector<AttrSpec> sgd_attrs = {{"momentum", AttrKind::kFloat, 0.9, {}},
                                           {"weight_decay", AttrKind::kFloat, 0.0, {}},
                                           {"nesterov", AttrKind::kBool, false, {}}};
  sgd.attrs = sgd_attrs;
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
  const std::vector<AttrSpec> adamw_attrs = {{"beta1", AttrKind::kFloat, 0.9, {}},
                                             {"beta2", AttrKind::kFloat, 0.999, {}},
                                             {"eps", AttrKind::kFloat, 1e-8, {}},
                                             {"weight_decay", AttrKind::kFloat, 0.01, {}}};
  adamw.attrs = adamw_attrs;
  adamw.infer = update_rule(4, true, 3);
  adamw.reference = adamw_update_kernel;
  adamw.overwritable_of = per_result({{0}, {2}, {3}});  // param', m', v' over param, m, v
  adamw.lowering = adamw_lowering();
  r.add(std::move(adamw));

  // The same updates with the state held compactly (ir/ops/state_codec.h): the kernels widen each
  // block of it to f32, update it as above, and round it back.
  r.add(compact_update("sgd_update_compact", "the momentum", 1, 30, sgd_attrs,
                       sgd_update_compact_kernel));
  r.add(compact_update("adamw_update_compact", "m and v", 2, 40, adamw_attrs,
                       adamw_update_compact_kernel));
}

}  // namespace disc::ir
