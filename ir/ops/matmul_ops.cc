// Matrix products: [..., M, K] x [..., K, N] -> [..., M, N], optionally with either operand's
// last two dims transposed. A rank-2 right operand is shared by every batch entry (the weight of
// a linear layer applied to [B, S, D] activations).
#include "ir/op_registry.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

std::vector<TensorType> infer_matmul(InferContext& ctx) {
  ctx.require_float(0);
  same_dtype(ctx, 0, 1);
  const auto &a = ctx.in(0).shape, &b = ctx.in(1).shape;
  int ra = static_cast<int>(a.size()), rb = static_cast<int>(b.size());
  ctx.require(ra >= 2 && rb >= 2, "operands need rank >= 2, got " + std::to_string(ra) + " and " +
                                      std::to_string(rb));
  ctx.require(rb == 2 || rb == ra, "operand 1 has rank " + std::to_string(rb) +
                                       "; it must be rank 2 or match operand 0's rank " +
                                       std::to_string(ra));
  bool ta = ctx.attrs().get_bool("transpose_a"), tb = ctx.attrs().get_bool("transpose_b");
  DimExpr m = a[ra - (ta ? 1 : 2)], ka = a[ra - (ta ? 2 : 1)];
  DimExpr kb = b[rb - (tb ? 1 : 2)], n = b[rb - (tb ? 2 : 1)];
  ctx.unify(ka, kb, "contraction dims must be equal (operand 0 gives " + ka.str() +
                        ", operand 1 gives " + kb.str() + ")");
  std::vector<DimExpr> out(a.begin(), a.end() - 2);
  for (int i = 0; rb == ra && i < ra - 2; ++i) {
    ctx.unify(a[i], b[i], "batch dim " + std::to_string(i) + " must be equal in both operands");
  }
  out.push_back(m);
  out.push_back(n);
  return {TensorType{ctx.in(0).dtype, out}};
}

OpCost matmul_cost(const std::vector<TensorType>& in, const std::vector<TensorType>& out,
                   const Attributes& attrs) {
  OpCost c = input_proportional_cost(in, out, 0);  // bytes of operands and result
  const auto& a = in[0].shape;
  DimExpr k = a[a.size() - (attrs.get_bool("transpose_a") ? 2 : 1)];
  c.flops = out[0].numel() * k * 2;
  return c;
}

}  // namespace

void register_matmul_ops(OpRegistry& r) {
  OpDef matmul{.name = "matmul", .category = OpCategory::kMatmul,
               .summary = "batched matrix product with optional transposes"};
  matmul.min_operands = matmul.max_operands = 2;
  matmul.attrs = {{"transpose_a", AttrKind::kBool, false, {}},
                  {"transpose_b", AttrKind::kBool, false, {}}};
  matmul.infer = infer_matmul;
  matmul.cost = matmul_cost;
  r.add(std::move(matmul));
}

}  // namespace disc::ir
