// 2-D convolution and pooling over NCHW tensors, for small CNNs.
#include "ir/autodiff.h"
#include "ir/op_registry.h"
#include "ir/ops/kernels.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

// Output extent (in + 2*pad - dilation*(k - 1) - 1) / stride + 1. A symbolic extent needs the
// division to be exact, since floor division has no polynomial form.
DimExpr window_out(InferContext& ctx, const DimExpr& in, int64_t k, int64_t stride, int64_t pad,
                   int64_t dilation, const std::string& dim) {
  ctx.require(k >= 1 && stride >= 1 && pad >= 0 && dilation >= 1,
              "kernel, stride and dilation must be >= 1 and padding >= 0");
  DimExpr span = in + 2 * pad - (dilation * (k - 1) + 1);
  ctx.require(ctx.shapes().compare(span, 0) != Ordering::kLT,
              "the window (" + std::to_string(dilation * (k - 1) + 1) + ") is larger than padded " +
                  dim + " (" + (in + 2 * pad).str() + ")");
  if (auto c = span.constant()) return *c / stride + 1;
  auto q = span.divide_exact(stride);
  ctx.require(q.has_value(), dim + " is symbolic (" + in.str() + ") and stride " +
                                 std::to_string(stride) + " does not divide " + span.str() +
                                 " exactly; use stride 1 or a static " + dim);
  return *q + 1;
}

std::vector<int64_t> pair_attr(const InferContext& ctx, const std::string& name) {
  const auto& v = ctx.attrs().get_ints(name);
  ctx.require(v.size() == 2, "`" + name + "` needs 2 entries [h, w]");
  return v;
}

std::vector<TensorType> infer_conv2d(InferContext& ctx) {
  ctx.require_float(0);
  same_dtype(ctx, 0, 1);
  require_rank(ctx, 0, 4, "N, C, H, W");
  require_rank(ctx, 1, 4, "O, C, KH, KW");
  const auto &x = ctx.in(0).shape, &w = ctx.in(1).shape;
  ctx.unify(x[1], w[1],
            "input channels (" + x[1].str() + ") must equal the weight's (" + w[1].str() + ")");
  auto kh = w[2].constant(), kw = w[3].constant();
  ctx.require(kh && kw, "kernel sizes must be static");
  auto s = pair_attr(ctx, "stride"), p = pair_attr(ctx, "padding"), d = pair_attr(ctx, "dilation");
  return {TensorType{ctx.in(0).dtype,
                     {x[0], w[0], window_out(ctx, x[2], *kh, s[0], p[0], d[0], "H"),
                      window_out(ctx, x[3], *kw, s[1], p[1], d[1], "W")}}};
}

std::vector<TensorType> infer_pool2d(InferContext& ctx) {
  ctx.require_float(0);
  require_rank(ctx, 0, 4, "N, C, H, W");
  const auto& x = ctx.in(0).shape;
  auto k = pair_attr(ctx, "kernel"), s = pair_attr(ctx, "stride"), p = pair_attr(ctx, "padding");
  ctx.require(p[0] * 2 <= k[0] && p[1] * 2 <= k[1], "padding may be at most half the kernel");
  return {TensorType{ctx.in(0).dtype,
                     {x[0], x[1], window_out(ctx, x[2], k[0], s[0], p[0], 1, "H"),
                      window_out(ctx, x[3], k[1], s[1], p[1], 1, "W")}}};
}

OpDef pool(const std::string& name, const std::string& summary) {
  OpDef d{.name = name, .category = OpCategory::kConvolution, .summary = summary};
  d.attrs = {{"kernel", AttrKind::kInts, std::nullopt, {}},
             {"stride", AttrKind::kInts, std::nullopt, {}},
             {"padding", AttrKind::kInts, std::vector<int64_t>{0, 0}, {}}};
  d.infer = infer_pool2d;
  d.grad = [name](GradContext& c) {
    return std::vector<Value*>{c.add(name + "_grad", {c.x(0), c.dy[0]}, c.node.attrs())};
  };
  d.reference = name == "max_pool2d" ? ReferenceKernel(max_pool2d_kernel) : avg_pool2d_kernel;
  d.cost = [](const auto& in, const auto& out, const Attributes& a) {
    const auto& k = a.get_ints("kernel");
    OpCost c = input_proportional_cost(in, out, 0);
    c.flops = out[0].numel() * (k[0] * k[1]);
    return c;
  };
  return d;
}

}  // namespace

void register_conv_ops(OpRegistry& r) {
  OpDef conv{.name = "conv2d",
             .category = OpCategory::kConvolution,
             .summary = "2-D cross-correlation, x [N, C, H, W] with w [O, C, KH, KW]"};
  conv.min_operands = conv.max_operands = 2;
  conv.attrs = {{"stride", AttrKind::kInts, std::vector<int64_t>{1, 1}, {}},
                {"padding", AttrKind::kInts, std::vector<int64_t>{0, 0}, {}},
                {"dilation", AttrKind::kInts, std::vector<int64_t>{1, 1}, {}}};
  conv.infer = infer_conv2d;
  conv.grad = [](GradContext& c) {
    const Attributes& a = c.node.attrs();
    return std::vector<Value*>{c.add("conv2d_grad_input", {c.x(0), c.x(1), c.dy[0]}, a),
                               c.add("conv2d_grad_weight", {c.x(0), c.x(1), c.dy[0]}, a)};
  };
  conv.reference = conv2d_kernel;
  conv.cost = [](const auto& in, const auto& out, const Attributes&) {
    OpCost c = input_proportional_cost(in, out, 0);
    const auto& w = in[1].shape;
    c.flops = out[0].numel() * w[1] * w[2] * w[3] * 2;
    return c;
  };
  r.add(std::move(conv));
  r.add(pool("max_pool2d", "maximum over each window of x [N, C, H, W]"));
  r.add(pool("avg_pool2d", "mean over each window (padding excluded) of x [N, C, H, W]"));
}

}  // namespace disc::ir
