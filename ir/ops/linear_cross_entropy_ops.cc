// A linear layer followed by cross-entropy (a language model's head) as one op that also gives
// the loss's gradients. As matmul and cross_entropy, the [..., classes] logits and their gradient
// exist whole; as one op a device computes them a chunk of rows at a time
// (devices/cpu/linear_cross_entropy.h). The `linear_cross_entropy` pass makes it.
//
//   %loss, %dh, %dw = linear_cross_entropy(%h, %w, %labels) {ignore_index = -100}
//     h f32[..., D], w f32[D, V] (f32[V, D] with transpose_w), labels i64[...]:
//     loss f32[] (cross_entropy's mean), dh like h, dw like w (its gradients for dloss = 1)
// h and w may be bf16 or f16 (as the precision stage makes the head's operands): the loss is then
// f32, computed from f32 logits, and dh and dw are summed in f32 and rounded once.
//
// The forward pass computes dh and dw because they cost no GEMM beyond the logits' own products
// and spare the backward pass the logits; the gradient rule scales them by dloss.
#include "ir/autodiff.h"
#include "ir/op_registry.h"
#include "ir/ops/kernels.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

std::vector<TensorType> infer_linear_cross_entropy(InferContext& ctx) {
  ctx.require_float(0);
  same_dtype(ctx, 0, 1);
  ctx.require_integer(2);
  const auto &h = ctx.in(0).shape, &w = ctx.in(1).shape;
  const bool tw = ctx.attrs().get_bool("transpose_w");
  ctx.require(!h.empty(), "h needs rank >= 1 [..., D]");
  require_rank(ctx, 1, 2, tw ? "[classes, D]" : "[D, classes]");
  ctx.unify(w[tw ? 1 : 0], h.back(),
            std::string("w's ") + (tw ? "second" : "first") + " dim must equal h's last (D)");
  require_label_shape(ctx, 2, 0, "h", "its last dim");
  const DType loss = is_half_float(ctx.in(0).dtype) ? DType::kF32 : ctx.in(0).dtype;
  return {TensorType{loss, {}}, ctx.in(0), ctx.in(1)};
}

// Per row and class: the logit's product over D, dh's and dw's (two flops per multiply-add),
// and a softmax's few flops.
OpCost linear_cross_entropy_cost(const std::vector<TensorType>& in,
                                 const std::vector<TensorType>& out, const Attributes& attrs) {
  const auto &h = in[0].shape, &w = in[1].shape;
  const DimExpr classes = w[attrs.get_bool("transpose_w") ? 0 : 1];
  const DimExpr logits = product({h.begin(), h.end() - 1}) * classes;
  return {logits * (DimExpr(6) * h.back() + DimExpr(5)), io_bytes(in, out)};
}

std::vector<Value*> linear_cross_entropy_grad(GradContext& c) {
  if (c.dy[1] || c.dy[2]) {
    throw InvalidArgument(
        "linear_cross_entropy: its results dh and dw are gradients; nothing may differentiate "
        "through them (no second derivatives): build the loss from its first result only");
  }
  if (!c.dy[0]) return {nullptr, nullptr, nullptr};
  // The product in the loss's dtype (f32 for 16-bit h and w: a loss scale such as 2^16 is past
  // f16's range), rounded once to the gradient's.
  auto scaled = [&](Value* d) {
    auto as = [&](Value* v, DType t) {
      return v->dtype() == t ? v : c.add("cast", {v}, {{"dtype", t}});
    };
    Value* dloss =
        c.add("broadcast", {c.dy[0]}, {{"shape", d->shape()}, {"dims", std::vector<int64_t>{}}});
    return as(c.add("mul", {as(d, dloss->dtype()), dloss}), d->dtype());
  };
  return {scaled(c.y(1)), scaled(c.y(2)), nullptr};
}

// In double, one row at a time: the logits, the loss term and G = (softmax - onehot) / count,
// then dh's row and the row's share of dw.
void linear_cross_entropy_kernel(const KernelArgs& a) {
  const bool tw = a.a().get_bool("transpose_w");
  const int64_t d = a.in[0].shape.back(), v = a.in[1].shape[tw ? 0 : 1], rows = a.in[2].numel();
  const int64_t ignore = a.a().get_int("ignore_index");
  const int64_t count = count_labels(a.op, a.in[2], v, ignore);
  dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
    using T = decltype(t);
    const T *h = a.in[0].as<T>(), *w = a.in[1].as<T>();
    auto weight = [&](int64_t k, int64_t j) {
      return static_cast<double>(tw ? w[j * d + k] : w[k * v + j]);
    };
    std::vector<double> dw(d * v, 0.0), logits(v), dh(d);
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t label = index_at(a.in[2], r);
      std::fill(dh.begin(), dh.end(), 0.0);
      if (label != ignore) {
        for (int64_t j = 0; j < v; ++j) {
          logits[j] = 0;
          for (int64_t k = 0; k < d; ++k)
            logits[j] += static_cast<double>(h[r * d + k]) * weight(k, j);
        }
        const RowExpSum<double> e = row_exp_sum(logits.data(), v);
        total += std::log(e.sum) + e.max - logits[label];
        for (int64_t j = 0; j < v; ++j) {
          const double g = (std::exp(logits[j] - e.max) / e.sum - (j == label ? 1.0 : 0.0)) /
                           static_cast<double>(count);
          for (int64_t k = 0; k < d; ++k) {
            dh[k] += g * weight(k, j);
            dw[tw ? j * d + k : k * v + j] += static_cast<double>(h[r * d + k]) * g;
          }
        }
      }
      std::copy(dh.begin(), dh.end(), a.out[1].as<T>() + r * d);
    }
    a.out[0].as<T>()[0] = static_cast<T>(count == 0 ? 0.0 : total / static_cast<double>(count));
    for (int64_t i = 0; i < d * v; ++i) a.out[2].as<T>()[i] = static_cast<T>(dw[i]);
  });
}

}  // namespace

void register_linear_cross_entropy_ops(OpRegistry& r) {
  OpDef d{
      .name = "linear_cross_entropy",
      .category = OpCategory::kMatmul,
      .summary = "cross_entropy(matmul(h, w), labels) and its gradients dh, dw (for dloss = 1)"};
  d.min_operands = d.max_operands = 3;
  d.num_results = 3;
  d.attrs = {{"ignore_index", AttrKind::kInt, int64_t{-100}, {}},
             {"transpose_w", AttrKind::kBool, false, {}}};
  d.infer = infer_linear_cross_entropy;
  d.cost = linear_cross_entropy_cost;
  d.grad = linear_cross_entropy_grad;
  d.reference = linear_cross_entropy_kernel;
  d.precision = Precision::kLowInBf16;  // logits, softmax and loss in f32 either way
  r.add(std::move(d));
}

}  // namespace disc::ir
