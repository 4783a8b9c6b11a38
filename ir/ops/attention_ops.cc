// Scaled dot-product attention as one op, and its gradient as one op. As a chain of primitives
// (matmul, causal_mask, softmax, matmul) attention holds [..., S, S] scores, probabilities and
// their gradients in memory; as one op a device computes it by blocks of query rows and keeps
// only the output (devices/cpu/block_attention.h). The `attention` pass rewrites the chain into it.
//
//   %o = attention(%q, %k, %v) {causal = true, scale = 0.125} : f32[B, H, S, 64]
//   %dq, %dk, %dv = attention_grad(%q, %k, %v, %do) {causal = true, scale = 0.125}
//
// Packed sequences (flash-attention's varlen layout): with a last operand `offsets` i32[N+1]
// (0 = offsets[0] <= ... <= offsets[N] = T), rows [offsets[n], offsets[n+1]) of q, k and v are
// sequence n, and a query sees only the keys of its own sequence (up to its own row when causal).
//   %o = attention(%q, %k, %v, %offsets) {causal = true, scale = 0.125} : f32[H, T, 64]
#include "ir/autodiff.h"
#include "ir/op_registry.h"
#include "ir/ops/kernels.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

// q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv] -> [..., Sq, Dv].
// offsets_operand: where the optional sequence offsets sit (3 for attention, 4 for its gradient).
TensorType infer_attention_type(InferContext& ctx, int offsets_operand) {
  ctx.require_float(0);
  same_dtype(ctx, 0, 1);
  same_dtype(ctx, 0, 2);
  const auto &q = ctx.in(0).shape, &k = ctx.in(1).shape, &v = ctx.in(2).shape;
  const size_t r = q.size();
  ctx.require(r >= 2, "q needs rank >= 2 [..., S, D], got " + dims_str(q));
  ctx.require(k.size() == r && v.size() == r,
              "q " + dims_str(q) + ", k " + dims_str(k) + " and v " + dims_str(v) +
                  " must have the same rank (repeat or reshape the heads)");
  for (size_t i = 0; i + 2 < r; ++i) {
    ctx.unify(k[i], q[i], "k's batch dim " + std::to_string(i) + " must equal q's");
    ctx.unify(v[i], q[i], "v's batch dim " + std::to_string(i) + " must equal q's");
  }
  ctx.unify(k[r - 1], q[r - 1], "k's last dim (head size) must equal q's");
  ctx.unify(v[r - 2], k[r - 2],
            "v must have one row per key: its dim " + std::to_string(r - 2) + " must equal k's");
  if (ctx.attrs().get_bool("causal")) {
    ctx.unify(q[r - 2], k[r - 2],
              "causal attention needs as many queries as keys: q's dim " + std::to_string(r - 2) +
                  " must equal k's");
  }
  if (ctx.num_operands() == offsets_operand + 1) {
    ctx.require_integer(offsets_operand);
    ctx.require(ctx.in(offsets_operand).rank() == 1,
                "offsets (the last operand) need rank 1 [N+1], got " +
                    dims_str(ctx.in(offsets_operand).shape));
    ctx.unify(q[r - 2], k[r - 2], "packed sequences need as many queries as keys");
  }
  std::vector<DimExpr> out = q;
  out.back() = v.back();
  return {ctx.in(0).dtype, out};
}

// Per score (counted dense, also when causal), `d_products` products over the head size D and
// `dv_products` over Dv, two flops per multiply-add, and a softmax's few flops.
OpCost attention_cost(const std::vector<TensorType>& in, const std::vector<TensorType>& out,
                      int d_products, int dv_products) {
  const auto &q = in[0].shape, &v = in[2].shape;
  const DimExpr scores = product({q.begin(), q.end() - 1}) * in[1].shape[q.size() - 2];
  const DimExpr per_score =
      DimExpr(2 * d_products) * q.back() + DimExpr(2 * dv_products) * v.back() + DimExpr(5);
  return {scores * per_score, io_bytes(in, out)};
}

std::vector<AttrSpec> attention_attrs() {
  return {{"causal", AttrKind::kBool, true, {}}, {"scale", AttrKind::kFloat, 1.0, {}}};
}

std::vector<Value*> attention_grad(GradContext& c) {
  std::vector<Value*> in = {c.x(0), c.x(1), c.x(2), c.dy[0]};
  if (c.node.operands().size() == 4) in.push_back(c.x(3));
  std::vector<Value*> d = c.add_all("attention_grad", in, c.node.attrs());
  if (c.node.operands().size() == 4) d.push_back(nullptr);  // no gradient towards the offsets
  return d;
}

}  // namespace

void register_attention_ops(OpRegistry& r) {
  OpDef fwd{.name = "attention",
            .category = OpCategory::kMatmul,
            .summary = "softmax(scale * q k^T, causal: keys up to the query's row) v"};
  fwd.min_operands = 3;
  fwd.max_operands = 4;
  fwd.attrs = attention_attrs();
  fwd.infer = [](InferContext& ctx) { return std::vector{infer_attention_type(ctx, 3)}; };
  fwd.cost = [](const auto& in, const auto& out, const Attributes&) {
    return attention_cost(in, out, 1, 1);
  };
  fwd.grad = attention_grad;
  fwd.reference = attention_kernel;
  fwd.precision = Precision::kLow;  // the scores' softmax runs in f32 inside the kernel
  r.add(std::move(fwd));

  OpDef grad{.name = "attention_grad",
             .category = OpCategory::kMatmul,
             .summary = "(dq, dk, dv) of attention(q, k, v) given dy"};
  grad.min_operands = 4;
  grad.max_operands = 5;
  grad.num_results = 3;
  grad.attrs = attention_attrs();
  grad.infer = [](InferContext& ctx) {
    const TensorType y = infer_attention_type(ctx, 4);
    same_dtype(ctx, 0, 3);
    require_dy_shape(ctx, 3, y.shape, "the output's");
    return std::vector{ctx.in(0), ctx.in(1), ctx.in(2)};
  };
  // The scores again (over D), dP (Dv), dQ (D), dK (D) and dV (Dv).
  grad.cost = [](const auto& in, const auto& out, const Attributes&) {
    return attention_cost(in, out, 3, 2);
  };
  grad.reference = attention_grad_kernel;
  r.add(std::move(grad));
}

}  // namespace disc::ir
