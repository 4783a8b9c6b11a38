#include "ir/ops/lowerings.h"

#include <cmath>
#include <numbers>

namespace disc::ir {

bool computes_in_f32(DType t) {
  return t == DType::kF32 || is_half_float(t);
}
bool computes_in_f32(const Value* v) {
  return computes_in_f32(v->dtype());
}

std::vector<DimExpr> rows_of(const std::vector<DimExpr>& shape) {
  return {shape.begin(), shape.end() - (shape.empty() ? 0 : 1)};
}

bool reads_the_space(const KernelWriter& w, const Node& n) {
  return computes_in_f32(n.operand(0)) && w.same(n.operand(0)->shape(), w.space()) &&
         !w.space().empty();
}

bool all_of_the_space(const KernelWriter& w, const Node& n) {
  for (const Value* o : n.operands())
    if (!computes_in_f32(o) || !w.same(o->shape(), w.space())) return false;
  return true;
}

int64_t axis_of(const Node& n) {
  const int64_t a = n.attrs().get_int("axis");
  return a < 0 ? a + n.operand(0)->rank() : a;
}

int64_t last_of(const KernelWriter& w) {
  return static_cast<int64_t>(w.space().size()) - 1;
}

bool fits_over_last_axis(const KernelWriter& w, const Node& n) {
  return reads_the_space(w, n) && all_of_the_space(w, n) && axis_of(n) == last_of(w);
}

Lowering elementwise_lowering(KOp k) {
  const bool compare = k >= KOp::kEq && k <= KOp::kGe;
  return {.kind = FusionKind::kElementwise,
          .fits =
              [k, compare](const KernelWriter& w, const Node& n) {
                if (w.fit_of(n.result()->shape()) == Fit::kNone) return false;
                if (!compare && !computes_in_f32(n.result())) return false;
                for (int i = 0; i < static_cast<int>(n.operands().size()); ++i)
                  if (!(k == KOp::kSelect && i == 0) && !computes_in_f32(n.operand(i)))
                    return false;
                return true;
              },
          .lower =
              [k](KernelWriter& w, const Node& n) {
                std::vector<int> args;
                for (const Value* o : n.operands()) args.push_back(w.value(o));
                w.set(n.result(), w.emit(k, std::move(args)));
              },
          .single = k};
}

// gelu = x/2 (1 + th), th = tanh(k (x + c x^3)), k = sqrt(2 / pi), c = 0.044715; its gradient
// dy (1/2 (1 + th) + x/2 (1 - th^2) k (1 + 3 c x^2)), as the reference kernels write them. The erf
// form has no lowering (the kernel IR has no erf).
Lowering tanh_gelu_lowering(bool grad) {
  Lowering l{.kind = FusionKind::kElementwise};
  l.accepts = [](const Node& n) { return n.attrs().get_string("approximate") == "tanh"; };
  l.fits = [](const KernelWriter& w, const Node& n) {
    for (const Value* o : n.operands())
      if (!computes_in_f32(o) || !w.same(o->shape(), n.result()->shape())) return false;
    return computes_in_f32(n.result()) && w.fit_of(n.result()->shape()) != Fit::kNone;
  };
  l.lower = [grad](KernelWriter& w, const Node& n) {
    const double k = std::sqrt(2.0 / std::numbers::pi), c = 0.044715;
    const int x = w.value(n.operand(0)), half = w.constant(0.5), one = w.constant(1);
    const int x2 = w.emit(KOp::kMul, {x, x});
    const int inner = w.emit(
        KOp::kMul,
        {w.constant(k),
         w.emit(KOp::kAdd, {x, w.emit(KOp::kMul, {w.constant(c), w.emit(KOp::kMul, {x2, x})})})});
    const int th = w.emit(KOp::kTanh, {inner});
    const int half_x = w.emit(KOp::kMul, {half, x});
    if (!grad) return w.set(n.result(), w.emit(KOp::kMul, {half_x, w.emit(KOp::kAdd, {one, th})}));
    const int sech2 = w.emit(KOp::kSub, {one, w.emit(KOp::kMul, {th, th})});
    const int slope = w.emit(
        KOp::kMul,
        {w.constant(k), w.emit(KOp::kAdd, {one, w.emit(KOp::kMul, {w.constant(3 * c), x2})})});
    const int d =
        w.emit(KOp::kAdd, {w.emit(KOp::kMul, {half, w.emit(KOp::kAdd, {one, th})}),
                           w.emit(KOp::kMul, {w.emit(KOp::kMul, {half_x, sech2}), slope})});
    w.set(n.result(), w.emit(KOp::kMul, {w.value(n.operand(1)), d}));
  };
  return l;
}

namespace {

// dx = inv * w * dy - inv^3 / D * sum(dy * w * x) * x; dw = the column sum of dy * x * inv.
void lower_rms_norm_grad(KernelWriter& k, const Node& n, int x, int w, int inv, double inv_cols) {
  const int dy = k.value(n.operand(2));
  const int dyw = k.emit(KOp::kMul, {dy, w});
  const int dot = k.emit(KOp::kReduceSum, {k.emit(KOp::kMul, {dyw, x})});
  const int inv3 = k.emit(KOp::kMul, {k.emit(KOp::kMul, {inv, inv}), inv});
  const int c = k.emit(KOp::kMul, {k.emit(KOp::kMul, {inv3, k.constant(inv_cols)}), dot});
  k.set(n.result(0), k.emit(KOp::kSub, {k.emit(KOp::kMul, {dyw, inv}), k.emit(KOp::kMul, {c, x})}));
  k.set_sum(n.result(1), k.emit(KOp::kMul, {k.emit(KOp::kMul, {dy, x}), inv}), Access::kCol);
}

}  // namespace

// inv = (mean(x^2) + eps)^(-1/2) over a row of a static width; rms_norm is x * inv * w. The
// gradient's weight gradient is a sum over rows, stored in f32 only.
Lowering rms_norm_lowering(bool grad) {
  Lowering l{.kind = grad ? FusionKind::kRow : FusionKind::kNorm};
  l.fits = [grad](const KernelWriter& w, const Node& n) {
    if (!reads_the_space(w, n) || (grad && n.result(1)->dtype() != DType::kF32)) return false;
    return w.space().back().constant().has_value() && computes_in_f32(n.operand(1)) &&
           (!grad || (computes_in_f32(n.operand(2)) && w.same(n.operand(2)->shape(), w.space())));
  };
  l.lower = [grad](KernelWriter& k, const Node& n) {
    const int x = k.value(n.operand(0));
    const double cols = static_cast<double>(*k.space().back().constant());
    const int mean = k.emit(
        KOp::kMul, {k.emit(KOp::kReduceSum, {k.emit(KOp::kMul, {x, x})}), k.constant(1.0 / cols)});
    const int inv =
        k.emit(KOp::kRsqrt, {k.emit(KOp::kAdd, {mean, k.constant(n.attrs().get_float("eps"))})});
    const int w = k.value(n.operand(1), Access::kCol);
    if (grad) return lower_rms_norm_grad(k, n, x, w, inv, 1.0 / cols);
    k.set(n.result(), k.emit(KOp::kMul, {k.emit(KOp::kMul, {x, inv}), w}));
  };
  return l;
}

namespace {

// Whether the column is the row's label (a one-hot compare).
int is_label(KernelWriter& w, int label) {
  return w.emit(KOp::kEq, {w.emit(KOp::kColIndex, {}), label});
}

// The instructions both directions share: the logits, the row's label, whether it is counted,
// whether none is, their count, and the constants 0 and 1.
struct CrossEntropyRow {
  int x, label, counted, none, count, zero, one;
};

// The loss: log(sum(exp(x))) - x[label] per counted row, their mean a sum over rows. With the
// logits in memory, one pass (the running logsumexp) and a read at the label's column; else max,
// sum and pick passes.

void lower_cross_entropy_loss(KernelWriter& w, const Node& n, const CrossEntropyRow& r) {
  const auto [x, label, counted, none, count, zero, one] = r;
  int row_loss = -1;
  if (const std::optional<int> logits = w.loaded_buffer(x)) {
    row_loss = w.emit(KOp::kSub, {w.emit(KOp::kReduceLogSumExp, {x}), w.load_at(*logits, label)});
  } else {
    const int shifted = w.emit(KOp::kSub, {x, w.emit(KOp::kReduceMax, {x})});
    const int picked =
        w.emit(KOp::kReduceSum, {w.emit(KOp::kSelect, {is_label(w, label), shifted, zero})});
    row_loss = w.emit(
        KOp::kSub,
        {w.emit(KOp::kLog, {w.emit(KOp::kReduceSum, {w.emit(KOp::kExp, {shifted})})}), picked});
  }
  const int loss = w.emit(KOp::kSelect, {counted, row_loss, zero});
  const int inv_count = w.emit(KOp::kSelect, {none, zero, w.emit(KOp::kDiv, {one, count})});
  w.set_sum(n.result(), w.emit(KOp::kMul, {loss, inv_count}), Access::kScalar);
}

}  // namespace

// As cross_entropy(_grad)_kernel: the mean over counted rows (label != ignore_index) of
// log(sum(exp(x - max))) - (x[label] - max), 0 when none is counted; the gradient
// (softmax - one_hot(label)) * dloss / count on counted rows, 0 elsewhere. The count, and the
// count of labels outside [0, V) (which fails the run), are totals over rows taken first. Over a
// static vocabulary; the loss, a sum over rows, is stored in f32 only.
Lowering cross_entropy_lowering(bool grad) {
  Lowering l{.kind = FusionKind::kRow};
  l.fits = [grad](const KernelWriter& w, const Node& n) {
    if (!reads_the_space(w, n) || (!grad && n.result()->dtype() != DType::kF32)) return false;
    const Value& labels = *n.operand(1);
    if (!w.space().back().constant() || w.fit_of(labels.shape()) != Fit::kRow) return false;
    if (labels.dtype() != DType::kI32 && labels.dtype() != DType::kI64) return false;
    return !grad || (n.operand(2)->rank() == 0 && computes_in_f32(n.operand(2)));
  };
  l.lower = [grad](KernelWriter& w, const Node& n) {
    const int x = w.value(n.operand(0)), label = w.value(n.operand(1), Access::kRow);
    const int zero = w.constant(0), one = w.constant(1);
    const int counted = w.emit(
        KOp::kNe, {label, w.constant(static_cast<double>(n.attrs().get_int("ignore_index")))});
    const int count = w.emit(KOp::kSumRows, {w.emit(KOp::kSelect, {counted, one, zero})});
    const int classes = w.constant(static_cast<double>(*w.space().back().constant()));
    const int above = w.emit(KOp::kSelect, {w.emit(KOp::kGe, {label, classes}), one, zero});
    const int outside = w.emit(KOp::kSelect, {w.emit(KOp::kLt, {label, zero}), one, above});
    w.emit(KOp::kCheckLabels,
           {w.emit(KOp::kSumRows, {w.emit(KOp::kSelect, {counted, outside, zero})})});
    const int none = w.emit(KOp::kEq, {count, zero});
    if (!grad) return lower_cross_entropy_loss(w, n, {x, label, counted, none, count, zero, one});
    const int e = w.emit(KOp::kExp, {w.emit(KOp::kSub, {x, w.emit(KOp::kReduceMax, {x})})});
    const int sum = w.emit(KOp::kReduceSum, {e});
    const int scale =
        w.emit(KOp::kSelect, {none, zero, w.emit(KOp::kDiv, {w.value(n.operand(2)), count})});
    const int g = w.emit(KOp::kSub, {w.emit(KOp::kDiv, {e, sum}),
                                     w.emit(KOp::kSelect, {is_label(w, label), one, zero})});
    w.set(n.result(), w.emit(KOp::kSelect, {counted, w.emit(KOp::kMul, {g, scale}), zero}));
  };
  return l;
}

}  // namespace disc::ir
