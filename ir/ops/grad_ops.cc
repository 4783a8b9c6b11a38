// Gradient ops: the backward of composite ops whose gradient is clearer (and fuses better) as one
// op than as a chain of primitives. Each takes the forward operands it needs plus the incoming
// gradient `dy`, and returns gradients shaped like those operands.
#include "ir/op_registry.h"
#include "ir/ops/kernels.h"
#include "ir/ops/lowerings.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

// An op whose results have the types of the given operands, after checking that operand `dy`
// matches operand `like` (the forward output's shape).
OpDef grad_op(const std::string& name, const std::string& summary, int operands,
              std::vector<int> result_like, int dy, int like) {
  OpDef d{.name = name, .category = OpCategory::kNormalization, .summary = summary};
  d.min_operands = d.max_operands = operands;
  d.num_results = static_cast<int>(result_like.size());
  d.flops_per_element = 8;
  d.infer = [result_like, dy, like](InferContext& ctx) {
    ctx.require_float(0);
    same_dtype(ctx, like, dy);
    unify_shapes(ctx, like, dy);
    std::vector<TensorType> out;
    for (int i : result_like) out.push_back(ctx.in(i));
    return out;
  };
  return d;
}

std::vector<AttrSpec> window_attrs(bool conv) {
  if (conv) {
    return {{"stride", AttrKind::kInts, std::vector<int64_t>{1, 1}, {}},
            {"padding", AttrKind::kInts, std::vector<int64_t>{0, 0}, {}},
            {"dilation", AttrKind::kInts, std::vector<int64_t>{1, 1}, {}}};
  }
  return {{"kernel", AttrKind::kInts, std::nullopt, {}},
          {"stride", AttrKind::kInts, std::nullopt, {}},
          {"padding", AttrKind::kInts, std::vector<int64_t>{0, 0}, {}}};
}

// Checks that dy has the shape the forward op `forward` gives for the operands it shares.
ShapeRule window_grad_rule(const std::string& forward, int forward_operands, int result) {
  return [forward, forward_operands, result](InferContext& ctx) {
    std::vector<const TensorType*> in;
    for (int i = 0; i < forward_operands; ++i) in.push_back(&ctx.in(i));
    auto y = infer_types(OpRegistry::instance().get(forward), in, ctx.attrs(), ctx.shapes());
    same_dtype(ctx, 0, forward_operands);
    require_dy_shape(ctx, forward_operands, y[0].shape, "the forward result's");
    return std::vector{ctx.in(result)};
  };
}

// Over the last axis, given y and dy: y * (dy - sum(dy * y)), or dy - exp(y) * sum(dy).
Lowering softmax_grad_lowering(bool log) {
  Lowering l{.kind = FusionKind::kRow};
  l.fits = fits_over_last_axis;
  l.lower = [log](KernelWriter& w, const Node& n) {
    const int y = w.value(n.operand(0)), dy = w.value(n.operand(1));
    if (log) {
      w.set(
          n.result(),
          w.emit(KOp::kSub,
                 {dy, w.emit(KOp::kMul, {w.emit(KOp::kExp, {y}), w.emit(KOp::kReduceSum, {dy})})}));
      return;
    }
    w.set(n.result(),
          w.emit(
              KOp::kMul,
              {y, w.emit(KOp::kSub, {dy, w.emit(KOp::kReduceSum, {w.emit(KOp::kMul, {dy, y})})})}));
  };
  return l;
}

}  // namespace

void register_grad_ops(OpRegistry& r) {
  OpDef gelu = grad_op("gelu_grad", "dy * gelu'(x)", 2, {0}, 1, 0);
  gelu.category = OpCategory::kElementwise;
  gelu.attrs = {{"approximate", AttrKind::kString, std::string("none"), {"none", "tanh"}}};
  gelu.reference = gelu_grad_kernel;
  gelu.lowering = tanh_gelu_lowering(/*grad=*/true);
  r.add(std::move(gelu));

  for (const char* name : {"softmax_grad", "log_softmax_grad"}) {
    OpDef d = grad_op(name,
                      std::string(name) == "softmax_grad"
                          ? "y * (dy - sum(dy * y, axis)) for y = softmax(x)"
                          : "dy - exp(y) * sum(dy, axis) for y = log_softmax(x)",
                      2, {0}, 1, 0);
    d.attrs = {{"axis", AttrKind::kInt, int64_t{-1}, {}}};
    d.reference = std::string(name) == "softmax_grad" ? ReferenceKernel(softmax_grad_kernel)
                                                      : log_softmax_grad_kernel;
    d.overwritable = {0, 1};  // the row's sum comes first, then each element from its own index
    d.lowering = softmax_grad_lowering(std::string(name) == "log_softmax_grad");
    r.add(std::move(d));
  }

  OpDef rms =
      grad_op("rms_norm_grad", "(dx, dweight) of rms_norm(x, weight) given dy", 3, {0, 1}, 2, 0);
  rms.attrs = {{"eps", AttrKind::kFloat, 1e-6, {}}};
  rms.reference = rms_norm_grad_kernel;
  rms.lowering = rms_norm_lowering(/*grad=*/true);
  r.add(std::move(rms));

  OpDef ln =
      grad_op("layer_norm_grad", "(dx, dweight, dbias) of layer_norm(x, weight, bias) given dy", 3,
              {0, 1, 1}, 2, 0);
  ln.attrs = {{"eps", AttrKind::kFloat, 1e-5, {}}};
  ln.reference = layer_norm_grad_kernel;
  r.add(std::move(ln));

  OpDef ce{.name = "cross_entropy_grad",
           .category = OpCategory::kLoss,
           .summary = "dlogits of cross_entropy(logits, labels) given the scalar dloss"};
  ce.min_operands = ce.max_operands = 3;
  ce.flops_per_element = 6;
  ce.attrs = {{"ignore_index", AttrKind::kInt, int64_t{-100}, {}}};
  ce.reference = cross_entropy_grad_kernel;
  ce.lowering = cross_entropy_lowering(/*grad=*/true);
  ce.overwritable = {0};  // each row's softmax sums come first: dlogits can take the logits' buffer
  ce.infer = [](InferContext& ctx) {
    auto loss = infer_types(OpRegistry::instance().get("cross_entropy"), {&ctx.in(0), &ctx.in(1)},
                            ctx.attrs(), ctx.shapes());
    ctx.require(ctx.in(2).rank() == 0 && ctx.in(2).dtype == ctx.in(0).dtype,
                "operand 2 (dloss) must be a scalar of the logits' dtype");
    return std::vector{ctx.in(0)};
  };
  r.add(std::move(ce));

  struct ConvGrad {
    const char* name;
    const char* summary;
    int result_like;  // the operand whose shape the gradient has
    ReferenceKernel kernel;
  };
  for (const auto& [name, summary, like, kernel] :
       {ConvGrad{"conv2d_grad_input", "dx of conv2d(x, w) given dy; x gives only the shape", 0,
                 conv2d_grad_input_kernel},
        ConvGrad{"conv2d_grad_weight", "dw of conv2d(x, w) given dy; w gives only the shape", 1,
                 conv2d_grad_weight_kernel}}) {
    OpDef d{.name = name, .category = OpCategory::kConvolution, .summary = summary};
    d.min_operands = d.max_operands = 3;
    d.attrs = window_attrs(true);
    d.infer = window_grad_rule("conv2d", 2, like);
    d.reference = kernel;
    r.add(std::move(d));
  }

  for (const char* name : {"max_pool2d_grad", "avg_pool2d_grad"}) {
    OpDef p{.name = name,
            .category = OpCategory::kConvolution,
            .summary = std::string("dx of ") +
                       std::string(name).substr(0, std::string(name).size() - 5) + "(x) given dy"};
    p.min_operands = p.max_operands = 2;
    p.attrs = window_attrs(false);
    p.reference = std::string(name) == "max_pool2d_grad" ? ReferenceKernel(max_pool2d_grad_kernel)
                                                         : avg_pool2d_grad_kernel;
    p.infer = window_grad_rule(std::string(name).substr(0, std::string(name).size() - 5), 1, 0);
    r.add(std::move(p));
  }
}

}  // namespace disc::ir
