// Matrix products: [..., M, K] x [..., K, N] -> [..., M, N], optionally with either operand's
// last two dims transposed. A rank-2 right operand is shared by every batch entry (the weight of
// a linear layer applied to [B, S, D] activations).
//
// With sum_batch, the products are summed over the batch dims: [..., K, M]^T x [..., K, N] ->
// [M, N]. This is a linear layer's weight gradient: the batch dims join the contraction, so one
// GEMM over B*S rows computes it without a [B, M, N] temporary.
#include <algorithm>

#include "ir/autodiff.h"
#include "ir/op_registry.h"
#include "ir/ops/matmul_dims.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

std::vector<TensorType> infer_matmul(InferContext& ctx) {
  ctx.require_float(0);
  same_dtype(ctx, 0, 1);
  const auto &a = ctx.in(0).shape, &b = ctx.in(1).shape;
  int ra = static_cast<int>(a.size()), rb = static_cast<int>(b.size());
  ctx.require(ra >= 2 && rb >= 2,
              "operands need rank >= 2, got " + std::to_string(ra) + " and " + std::to_string(rb));
  ctx.require(rb == 2 || rb == ra, "operand 1 has rank " + std::to_string(rb) +
                                       "; it must be rank 2 or match operand 0's rank " +
                                       std::to_string(ra));
  bool ta = ctx.attrs().get_bool("transpose_a"), tb = ctx.attrs().get_bool("transpose_b");
  bool sum_batch = ctx.attrs().get_bool("sum_batch");
  ctx.require(
      !sum_batch || (ta && !tb && ra == rb && ra > 2),
      "sum_batch needs transpose_a = true, transpose_b = false and two operands of the same "
      "rank above 2, got ranks " +
          std::to_string(ra) + " and " + std::to_string(rb));
  ctx.require(!ctx.attrs().get_bool("tril_a") ||
                  (!sum_batch && ctx.shapes().compare(a[ra - 2], a[ra - 1]) == Ordering::kEQ),
              "tril_a needs a square operand 0 and no sum_batch, got operand 0 " + dims_str(a) +
                  (sum_batch ? " with sum_batch" : ""));
  DimExpr m = a[ra - (ta ? 1 : 2)], ka = a[ra - (ta ? 2 : 1)];
  DimExpr kb = b[rb - (tb ? 1 : 2)], n = b[rb - (tb ? 2 : 1)];
  ctx.unify(ka, kb,
            "contraction dims must be equal (operand 0 gives " + ka.str() + ", operand 1 gives " +
                kb.str() + ")");
  for (int i = 0; rb == ra && i < ra - 2; ++i) {
    ctx.unify(a[i], b[i], "batch dim " + std::to_string(i) + " must be equal in both operands");
  }
  std::vector<DimExpr> out(a.begin(), sum_batch ? a.begin() : a.end() - 2);
  out.push_back(m);
  out.push_back(n);
  return {TensorType{ctx.in(0).dtype, out}};
}

OpCost matmul_cost(const std::vector<TensorType>& in, const std::vector<TensorType>& out,
                   const Attributes& attrs) {
  OpCost c = input_proportional_cost(in, out, 0);  // bytes of operands and result
  const auto& a = in[0].shape;
  DimExpr k = a[a.size() - (attrs.get_bool("transpose_a") ? 2 : 1)];
  if (attrs.get_bool("sum_batch"))
    k = product({a.begin(), a.end() - 1});  // the batch dims contract too
  c.flops = out[0].numel() * k * 2;
  if (attrs.get_bool("tril_a")) c.flops = out[0].numel() * (k + 1);  // half of A, diagonal included
  return c;
}

}  // namespace

MatmulDims matmul_dims(const TensorRef& a, const TensorRef& c, const Attributes& attrs) {
  MatmulDims d{.m = c.dim(-2), .n = c.dim(-1)};
  d.batch = d.m * d.n == 0 ? 0 : c.numel() / (d.m * d.n);
  if (attrs.get_bool("sum_batch"))
    d.k = d.m == 0 ? 0 : a.numel() / d.m;
  else
    d.k = a.dim(attrs.get_bool("transpose_a") ? -2 : -1);
  return d;
}

namespace {

// C[b] = op(A[b]) x op(B[b]) with plain loops, accumulating in double. Devices use a library GEMM;
// this is the oracle they are tested against. With sum_batch, A and B are read as one matrix
// each, their batch dims stacked into the contraction's rows; with tril_a, the terms whose
// stored A entry lies above the diagonal are skipped.
void matmul_kernel(const KernelArgs& a) {
  const TensorRef &ta = a.in[0], &tb = a.in[1], &tc = a.out[0];
  bool tra = a.a().get_bool("transpose_a"), trb = a.a().get_bool("transpose_b");
  bool tril = a.a().get_bool("tril_a");
  const auto [batch, m, n, k] = matmul_dims(ta, tc, a.a());
  bool shared_b = tb.rank() == 2;
  dispatch_float(ta.dtype, a.op, [&](auto t) {
    using T = decltype(t);
    for (int64_t b = 0; b < batch; ++b) {
      const T* A = ta.as<T>() + b * m * k;                   // (m, k) or (k, m)
      const T* B = tb.as<T>() + (shared_b ? 0 : b * k * n);  // (k, n) or (n, k)
      T* C = tc.as<T>() + b * m * n;                         // (m, n)
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p) {
            if (tril && (tra ? i > p : p > i)) continue;  // stored (row, col) with col > row
            acc += static_cast<double>(tra ? A[p * m + i] : A[i * k + p]) *
                   static_cast<double>(trb ? B[j * k + p] : B[p * n + j]);
          }
          C[i * n + j] = static_cast<T>(acc);
        }
      }
    }
  });
}

Value* mm(GradContext& c, Value* a, Value* b, bool ta, bool tb) {
  return c.add("matmul", {a, b}, {{"transpose_a", ta}, {"transpose_b", tb}});
}

Value* mm_sum_batch(GradContext& c, Value* a, Value* b) {
  return c.add("matmul", {a, b}, {{"transpose_a", true}, {"sum_batch", true}});
}

// For C = sum_b A[b]^T B[b]: dA[b] = B[b] dC^T and dB[b] = A[b] dC, dC shared by the batch.
std::vector<Value*> sum_batch_grad(GradContext& c) {
  Value *a = c.x(0), *b = c.x(1), *dc = c.dy[0];
  return {mm(c, b, dc, false, true), mm(c, a, dc, false, false)};
}

// For C = op(A) op(B): dA and dB from dC, by the four transpose cases. A rank-2 B shared by a
// batch gets the gradient summed over the batch dims: one GEMM with sum_batch when A is not
// transposed, else batched products and a reduce_sum.
std::vector<Value*> plain_grad(GradContext& c, Value* a) {
  bool ta = c.node.attrs().get_bool("transpose_a"), tb = c.node.attrs().get_bool("transpose_b");
  Value *b = c.x(1), *dc = c.dy[0];
  if (b->rank() == 2 && a->rank() > 2 && !ta) {
    // The weight's gradient first: it reads the layer's saved input, which can then die before
    // dA's buffer is allocated (llama 4x512 under a 725 MiB cap: 6% less to regenerate).
    Value* db = tb ? mm_sum_batch(c, dc, a) : mm_sum_batch(c, a, dc);
    return {tb ? mm(c, dc, b, false, false) : mm(c, dc, b, false, true), db};
  }
  Value* b_for_da = b;
  if (ta && b->rank() == 2 && a->rank() > 2) {
    // dA's product puts B first; a rank-2 first operand cannot be shared, so stretch it.
    std::vector<DimExpr> shape(a->shape().begin(), a->shape().end() - 2);
    shape.insert(shape.end(), b->shape().begin(), b->shape().end());
    int64_t r = static_cast<int64_t>(shape.size());
    b_for_da =
        c.add("broadcast", {b}, {{"shape", shape}, {"dims", std::vector<int64_t>{r - 2, r - 1}}});
  }
  Value* da = ta ? (tb ? mm(c, b_for_da, dc, true, true) : mm(c, b_for_da, dc, false, true))
                 : (tb ? mm(c, dc, b, false, false) : mm(c, dc, b, false, true));
  Value* db = tb ? (ta ? mm(c, dc, a, true, true) : mm(c, dc, a, true, false))
                 : (ta ? mm(c, a, dc, false, false) : mm(c, a, dc, true, false));
  if (b->rank() == 2 && db->rank() > 2) {
    std::vector<int64_t> batch_axes;
    for (int d = 0; d < db->rank() - 2; ++d) batch_axes.push_back(d);
    db = c.add("reduce_sum", {db}, {{"axes", batch_axes}});
  }
  return {da, db};
}

// tril(v) of a square v: its entries above the diagonal replaced by zero.
Value* tril(GradContext& c, Value* v) {
  return c.add("causal_mask", {v}, {{"value", 0.0}});
}

// With tril_a, C is the product of tril(A): B's gradient reads tril(A), and A's is the lower
// triangle of tril(A)'s.
std::vector<Value*> matmul_grad(GradContext& c) {
  if (c.node.attrs().get_bool("sum_batch")) return sum_batch_grad(c);
  if (!c.node.attrs().get_bool("tril_a")) return plain_grad(c, c.x(0));
  std::vector<Value*> grads = plain_grad(c, tril(c, c.x(0)));
  grads[0] = tril(c, grads[0]);
  return grads;
}

}  // namespace

void register_matmul_ops(OpRegistry& r) {
  OpDef matmul{.name = "matmul",
               .category = OpCategory::kMatmul,
               .summary = "batched matrix product with optional transposes"};
  matmul.min_operands = matmul.max_operands = 2;
  matmul.attrs = {{"transpose_a", AttrKind::kBool, false, {}},
                  {"transpose_b", AttrKind::kBool, false, {}},
                  {"sum_batch", AttrKind::kBool, false, {}},
                  {"tril_a", AttrKind::kBool, false, {}}};
  matmul.infer = infer_matmul;
  matmul.cost = matmul_cost;
  matmul.reference = matmul_kernel;
  matmul.grad = matmul_grad;
  matmul.precision = Precision::kLow;
  r.add(std::move(matmul));
}

}  // namespace disc::ir
