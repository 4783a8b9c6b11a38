// Composite neural-network ops: softmax, norms, loss, rotary embedding, causal mask, dropout.
// Each is one op here so that graphs stay readable and the fusion planner can stitch its
// reduction with the elementwise work around it.
#include <limits>

#include "ir/autodiff.h"
#include "ir/op_registry.h"
#include "ir/ops/kernels.h"
#include "ir/ops/lowerings.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

// The forward node's attributes, for gradient ops that take the same ones.
Attributes same_attrs(const GradContext& c) {
  return c.node.attrs();
}

std::vector<Value*> softmax_grad(GradContext& c) {
  return {c.add(c.node.op().name + "_grad", {c.y(), c.dy[0]}, same_attrs(c))};
}

std::vector<Value*> norm_grad(GradContext& c) {
  // (dx, dweight) or (dx, dweight, dbias)
  return c.add_all(c.node.op().name + "_grad", {c.x(0), c.x(1), c.dy[0]}, same_attrs(c));
}

// Over the last axis: exp(x - max) / sum, or x - max - log(sum), each reduction a pass over the
// row.
Lowering softmax_lowering(bool log) {
  Lowering l{.kind = FusionKind::kRow};
  l.fits = fits_over_last_axis;
  l.lower = [log](KernelWriter& w, const Node& n) {
    const int x = w.value(n.operand(0));
    const int shifted = w.emit(KOp::kSub, {x, w.emit(KOp::kReduceMax, {x})});
    const int e = w.emit(KOp::kExp, {shifted});
    const int sum = w.emit(KOp::kReduceSum, {e});
    w.set(n.result(), log ? w.emit(KOp::kSub, {shifted, w.emit(KOp::kLog, {sum})})
                          : w.emit(KOp::kDiv, {e, sum}));
  };
  return l;
}

OpDef softmax_like(const std::string& name, const std::string& summary) {
  OpDef d{.name = name, .category = OpCategory::kNormalization, .summary = summary};
  d.flops_per_element = 5;
  d.attrs = {{"axis", AttrKind::kInt, int64_t{-1}, {}}};
  d.infer = [](InferContext& ctx) {
    ctx.require_float(0);
    ctx.axis(ctx.attrs().get_int("axis"), ctx.in(0).rank(), "axis");
    return std::vector{ctx.in(0)};
  };
  d.grad = softmax_grad;
  d.reference = name == "softmax" ? ReferenceKernel(softmax_kernel) : log_softmax_kernel;
  d.overwritable = {0};  // each row is read whole (max, sum) before it is written
  d.lowering = softmax_lowering(name == "log_softmax");
  d.precision = Precision::kF32;
  return d;
}

// Operand i is a vector matching the last dim of operand 0 (a norm's weight or bias).
void require_feature_vector(InferContext& ctx, int i) {
  same_dtype(ctx, 0, i);
  const auto& x = ctx.in(0).shape;
  ctx.require(ctx.in(i).rank() == 1, "operand " + std::to_string(i) + " must have rank 1 [D]");
  ctx.unify(ctx.in(i).shape[0], x.back(),
            "operand " + std::to_string(i) + "'s size must equal the last dim of operand 0");
}

// (x - mean) * (var + eps)^(-1/2) * w + b over a row of a static width, the variance in a second
// pass.
Lowering layer_norm_lowering() {
  Lowering l{.kind = FusionKind::kNorm};
  l.fits = [](const KernelWriter& w, const Node& n) {
    return reads_the_space(w, n) && w.space().back().constant().has_value() &&
           computes_in_f32(n.operand(1)) && computes_in_f32(n.operand(2));
  };
  l.lower = [](KernelWriter& w, const Node& n) {
    const int x = w.value(n.operand(0));
    const int inv_cols = w.constant(1.0 / static_cast<double>(*w.space().back().constant()));
    const int centred =
        w.emit(KOp::kSub, {x, w.emit(KOp::kMul, {w.emit(KOp::kReduceSum, {x}), inv_cols})});
    const int var = w.emit(
        KOp::kMul, {w.emit(KOp::kReduceSum, {w.emit(KOp::kMul, {centred, centred})}), inv_cols});
    const int rstd =
        w.emit(KOp::kRsqrt, {w.emit(KOp::kAdd, {var, w.constant(n.attrs().get_float("eps"))})});
    const int scaled = w.emit(
        KOp::kMul, {w.emit(KOp::kMul, {centred, rstd}), w.value(n.operand(1), Access::kCol)});
    w.set(n.result(), w.emit(KOp::kAdd, {scaled, w.value(n.operand(2), Access::kCol)}));
  };
  return l;
}

OpDef norm(const std::string& name, const std::string& summary, int operands, double eps) {
  OpDef d{.name = name, .category = OpCategory::kNormalization, .summary = summary};
  d.min_operands = d.max_operands = operands;
  d.flops_per_element = 6;
  d.attrs = {{"eps", AttrKind::kFloat, eps, {}}};
  d.infer = [operands](InferContext& ctx) {
    ctx.require_float(0);
    ctx.require(ctx.in(0).rank() >= 1, "operand 0 needs rank >= 1 [..., D]");
    ctx.require(ctx.attrs().get_float("eps") > 0, "`eps` must be positive");
    for (int i = 1; i < operands; ++i) require_feature_vector(ctx, i);
    return std::vector{ctx.in(0)};
  };
  d.grad = norm_grad;
  d.reference = name == "rms_norm" ? ReferenceKernel(rms_norm_kernel) : layer_norm_kernel;
  d.lowering = name == "rms_norm" ? rms_norm_lowering(/*grad=*/false) : layer_norm_lowering();
  d.precision = Precision::kF32;
  return d;
}

std::vector<TensorType> infer_cross_entropy(InferContext& ctx) {
  ctx.require_float(0);
  ctx.require_integer(1);
  require_label_shape(ctx, 1, 0, "logits", "its last (class) dim");
  return {TensorType{ctx.in(0).dtype, {}}};
}

std::vector<TensorType> infer_rope(InferContext& ctx) {
  ctx.require_float(0);
  const auto& x = ctx.in(0).shape;
  ctx.require(x.size() >= 2, "operand 0 needs rank >= 2 [..., S, ..., D]");
  int seq = ctx.axis(ctx.attrs().get_int("seq_axis"), ctx.in(0).rank(), "seq_axis");
  ctx.require(seq != ctx.in(0).rank() - 1, "`seq_axis` cannot be the last (feature) dim");
  auto half = x.back().divide_exact(2);
  ctx.require(half.has_value(), "the last dim (" + x.back().str() + ") must be even");
  ctx.require(ctx.attrs().get_float("theta") > 0, "`theta` must be positive");
  if (ctx.num_operands() == 2) {  // packed sequences: each token's position within its own
    ctx.require_integer(1);
    ctx.require(ctx.in(1).rank() == 1,
                "positions (operand 1) need rank 1 [S], got " + dims_str(ctx.in(1).shape));
    ctx.unify(ctx.in(1).shape[0], x[seq], "positions need one entry per index along seq_axis");
  }
  return {ctx.in(0)};
}

std::vector<TensorType> infer_causal_mask(InferContext& ctx) {
  ctx.require_float(0);
  const auto& x = ctx.in(0).shape;
  ctx.require(x.size() >= 2, "operand 0 needs rank >= 2 [..., S, T]");
  ctx.require(ctx.shapes().compare(x[x.size() - 2], x.back()) != Ordering::kGT,
              "query length " + x[x.size() - 2].str() + " exceeds key length " + x.back().str());
  return {ctx.in(0)};
}

std::vector<TensorType> infer_dropout(InferContext& ctx) {
  ctx.require_float(0);
  ctx.require(ctx.in(1).dtype == DType::kI64 && ctx.in(1).rank() == 0,
              "operand 1 (the seed) must be an i64 scalar");
  double rate = ctx.attrs().get_float("rate");
  ctx.require(rate >= 0 && rate < 1, "`rate` must be in [0, 1)");
  return {ctx.in(0)};
}

}  // namespace

void register_nn_ops(OpRegistry& r) {
  r.add(softmax_like("softmax", "exp(x - max) / sum(exp(x - max)) along `axis`"));
  r.add(softmax_like("log_softmax", "x - max - log(sum(exp(x - max))) along `axis`"));
  r.add(norm("rms_norm", "x / sqrt(mean(x^2, last dim) + eps) * weight", 2, 1e-6));
  r.add(norm("layer_norm", "(x - mean) / sqrt(var + eps) * weight + bias over the last dim", 3,
             1e-5));

  OpDef ce{.name = "cross_entropy",
           .category = OpCategory::kLoss,
           .summary = "mean over labels != ignore_index of -log_softmax(logits)[label]"};
  ce.min_operands = ce.max_operands = 2;
  ce.attrs = {{"ignore_index", AttrKind::kInt, int64_t{-100}, {}}};
  ce.infer = infer_cross_entropy;
  ce.grad = [](GradContext& c) {
    return std::vector<Value*>{
        c.add("cross_entropy_grad", {c.x(0), c.x(1), c.dy[0]}, same_attrs(c)), nullptr};
  };
  ce.reference = cross_entropy_kernel;
  ce.lowering = cross_entropy_lowering(/*grad=*/false);
  ce.precision = Precision::kF32;
  ce.cost = [](const auto& in, const auto& out, const Attributes&) {
    return input_proportional_cost(in, out, 5);
  };
  r.add(std::move(ce));

  OpDef rope{.name = "rope",
             .category = OpCategory::kElementwise,
             .summary =
                 "rotary position embedding: pairs (x[i], x[i + D/2]) of the last dim "
                 "rotated by position * theta^(-2i/D), position = index along seq_axis, or "
                 "positions[index] when given (packed sequences restart at 0)"};
  rope.flops_per_element = 6;
  rope.max_operands = 2;
  rope.attrs = {{"seq_axis", AttrKind::kInt, int64_t{1}, {}},
                {"theta", AttrKind::kFloat, 10000.0, {}},
                {"inverse", AttrKind::kBool, false, {}}};  // rotate by -angle: rope's gradient
  rope.infer = infer_rope;
  rope.grad = [](GradContext& c) {  // a rotation's transpose is the opposite rotation
    Attributes a = same_attrs(c);
    a.set("inverse", !a.get_bool("inverse"));
    if (c.node.operands().size() == 1) return std::vector<Value*>{c.add("rope", {c.dy[0]}, a)};
    return std::vector<Value*>{c.add("rope", {c.dy[0], c.x(1)}, a), nullptr};
  };
  rope.reference = rope_kernel;
  rope.overwritable = {0};  // each pair is read whole before either of its elements is written
  r.add(std::move(rope));

  OpDef mask{.name = "causal_mask",
             .category = OpCategory::kElementwise,
             .summary = "scores [..., S, T] with `value` where key j > query i + (T - S)"};
  mask.attrs = {{"value", AttrKind::kFloat, -std::numeric_limits<double>::infinity(), {}}};
  mask.infer = infer_causal_mask;
  mask.grad = [](GradContext& c) {  // masked positions are constants: no gradient reaches x
    return std::vector<Value*>{c.add("causal_mask", {c.dy[0]}, {{"value", 0.0}})};
  };
  mask.reference = causal_mask_kernel;
  mask.overwritable = {0};
  // Keys after the query's own position get `value`; square tiles only (self-attention, S queries
  // by S keys), where the query is row % cols.
  mask.lowering = {
      .kind = FusionKind::kElementwise,
      .fits =
          [](const KernelWriter& w, const Node& n) {
            const auto& s = w.space();
            return reads_the_space(w, n) && s.size() >= 2 && w.same({s[s.size() - 2]}, {s.back()});
          },
      .lower =
          [](KernelWriter& w, const Node& n) {
            const int after =
                w.emit(KOp::kGt, {w.emit(KOp::kColIndex, {}), w.emit(KOp::kRowModCols, {})});
            w.set(n.result(), w.emit(KOp::kSelect, {after, w.constant(n.attrs().get_float("value")),
                                                    w.value(n.operand(0))}));
          }};
  r.add(std::move(mask));

  OpDef dropout{.name = "dropout",
                .category = OpCategory::kRandom,
                .summary =
                    "x * keep / (1 - rate); keep is drawn from a counter-based RNG keyed "
                    "by (seed, stream, element index), so recomputing gives the same mask"};
  dropout.min_operands = dropout.max_operands = 2;
  dropout.flops_per_element = 4;
  dropout.attrs = {{"rate", AttrKind::kFloat, std::nullopt, {}},
                   {"stream", AttrKind::kInt, int64_t{0}, {}}};
  dropout.infer = infer_dropout;
  dropout.grad = [](GradContext& c) {  // the same (seed, stream) draws the same mask
    return std::vector<Value*>{c.add("dropout", {c.dy[0], c.x(1)}, same_attrs(c)), nullptr};
  };
  dropout.reference = dropout_kernel;
  r.add(std::move(dropout));
}

}  // namespace disc::ir
