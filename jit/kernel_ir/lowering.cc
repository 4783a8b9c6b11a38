#include "jit/kernel_ir/lowering.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>

#include "base/error.h"

namespace disc::jit {
namespace {

using ir::DimExpr;

const std::set<std::string, std::less<>> kRowOps = {
    "softmax",  "log_softmax",   "softmax_grad", "log_softmax_grad",
    "rms_norm", "rms_norm_grad", "layer_norm"};

// gelu and its gradient in the tanh form (GPT-2's); the erf form has no lowering (no erf op).
bool is_tanh_gelu(const ir::Node& n) {
  const std::string& op = n.op().name;
  return (op == "gelu" || op == "gelu_grad") && n.attrs().get_string("approximate") == "tanh";
}

bool computes_in_f32(DType t) {
  return t == DType::kF32 || is_half_float(t);
}

// A cast between f32, bf16 and f16.
bool is_float_cast(const ir::Node& n) {
  return n.op().name == "cast" && computes_in_f32(n.operand(0)->dtype()) &&
         computes_in_f32(n.result()->dtype());
}

bool is_elementwise(const ir::Node& n, KOp& k) {
  return n.op().category == ir::OpCategory::kElementwise && kop_from_name(n.op().name, k) &&
         k >= KOp::kNeg && k <= KOp::kSelect;
}

// The axis attribute of a row op, as a non-negative index.
int64_t axis_of(const ir::Node& n) {
  int64_t a = n.attrs().get_int("axis");
  return a < 0 ? a + n.operand(0)->rank() : a;
}

// A reduction over every axis of its operand (of rank 1 or more) to a scalar.
bool reduces_every_axis(const ir::Node& n) {
  std::vector<int64_t> axes = n.attrs().get_ints("axes");
  const int64_t rank = n.operand(0)->rank();
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  std::sort(axes.begin(), axes.end());
  if (rank == 0 || static_cast<int64_t>(axes.size()) != rank) return false;
  for (int64_t i = 0; i < rank; ++i)
    if (axes[i] != i) return false;
  return true;
}

std::vector<DimExpr> rows_of(const std::vector<DimExpr>& s) {
  return {s.begin(), s.end() - (s.empty() ? 0 : 1)};
}

}  // namespace

bool lowerable(const ir::Node& n) {
  KOp k;
  const std::string& op = n.op().name;
  return is_elementwise(n, k) || op == "broadcast" || op == "full" || op == "constant" ||
         is_float_cast(n) || op == "reduce_sum" || op == "reduce_max" || op == "adamw_update" ||
         op == "causal_mask" || kRowOps.contains(op) || op == "cross_entropy" ||
         op == "cross_entropy_grad" || is_tanh_gelu(n);
}

std::vector<DimExpr> natural_space(const ir::Node& n) {
  const std::string& op = n.op().name;
  if (op == "reduce_sum" || op == "reduce_max" || kRowOps.contains(op) || op == "cross_entropy" ||
      op == "cross_entropy_grad")
    return n.operand(0)->shape();
  return n.result()->shape();
}

KernelBuilder::KernelBuilder(std::vector<DimExpr> space, const ir::ShapeGraph& shapes)
    : space_(std::move(space)), shapes_(shapes) {}

bool KernelBuilder::same(const std::vector<DimExpr>& a, const std::vector<DimExpr>& b) const {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)  // most dims are spelled alike: canonical() is dear
    if (!(a[i] == b[i]) && !(shapes_.canonical(a[i]) == shapes_.canonical(b[i]))) return false;
  return true;
}

KernelBuilder::Fit KernelBuilder::fit_of(const std::vector<DimExpr>& shape) const {
  if (same(shape, space_)) return Fit::kFull;
  if (std::all_of(shape.begin(), shape.end(), [](const DimExpr& d) { return d.constant() == 1; }))
    return Fit::kScalar;
  if (!space_.empty() && same(shape, rows_of(space_))) return Fit::kRow;
  return Fit::kNone;
}

bool KernelBuilder::fits(const ir::Node& n) const {
  if (!lowerable(n)) return false;
  for (const ir::Value* o : n.operands())
    if (sums_.contains(o)) return false;  // a sum over rows is only whole after every row
  const std::string& op = n.op().name;
  // Kernels compute in f32: loads widen bf16 and f16, stores round to them.
  auto real = [](const ir::Value* v) { return computes_in_f32(v->dtype()); };
  KOp k;
  if (is_float_cast(n)) return fit_of(n.result()->shape()) != Fit::kNone;
  if (is_elementwise(n, k)) {
    if (fit_of(n.result()->shape()) == Fit::kNone) return false;
    if (!is_compare(k) && !real(n.result())) return false;
    for (size_t i = 0; i < n.operands().size(); ++i)
      if (!(k == KOp::kSelect && i == 0) && !real(n.operand(i))) return false;
    return true;
  }
  if (op == "full" || op == "constant")
    return real(n.result()) && fit_of(n.result()->shape()) != Fit::kNone;
  if (is_tanh_gelu(n)) {
    for (const ir::Value* o : n.operands())
      if (!real(o) || !same(o->shape(), n.result()->shape())) return false;
    return real(n.result()) && fit_of(n.result()->shape()) != Fit::kNone;
  }
  if (op == "broadcast") {
    const ir::Value& x = *n.operand(0);
    const Fit out = fit_of(n.result()->shape());
    if (!real(n.result()) || out == Fit::kNone) return false;
    if (x.rank() == 0 || same(x.shape(), n.result()->shape())) return true;
    const auto& dims = n.attrs().get_ints("dims");
    const int r = static_cast<int>(space_.size());
    if (out != Fit::kFull || r == 0) return false;
    if (dims.size() == 1 && dims[0] == r - 1 && same(x.shape(), {space_.back()}))
      return true;  // by column
    std::vector<int64_t> leading(r - 1);
    for (int i = 0; i < r - 1; ++i) leading[i] = i;
    return dims == leading && same(x.shape(), rows_of(space_));  // by row
  }
  if (!real(n.operand(0)) || !same(n.operand(0)->shape(), space_) || space_.empty()) return false;
  const int64_t last = static_cast<int64_t>(space_.size()) - 1;
  if (op == "reduce_sum" || op == "reduce_max") {
    const auto& axes = n.attrs().get_ints("axes");
    if (op == "reduce_sum" && reduces_every_axis(n))  // a row sum, summed over rows in f32
      return n.result()->dtype() == DType::kF32;
    return axes.size() == 1 && (axes[0] == last || axes[0] == -1) &&
           !n.attrs().get_bool("keepdims");
  }
  // Their sums over rows (a norm weight's gradient, a mean loss) are stored in f32 only.
  if ((op == "rms_norm_grad" && n.result(1)->dtype() != DType::kF32) ||
      (op == "cross_entropy" && n.result()->dtype() != DType::kF32))
    return false;
  if (op == "rms_norm" || op == "rms_norm_grad" || op == "layer_norm") {
    return space_.back().constant().has_value() && real(n.operand(1)) &&
           (op == "rms_norm" ||
            (real(n.operand(2)) && (op == "layer_norm" || same(n.operand(2)->shape(), space_))));
  }
  if (op == "cross_entropy" || op == "cross_entropy_grad") {  // over a static vocabulary
    const ir::Value& labels = *n.operand(1);
    if (!space_.back().constant() || fit_of(labels.shape()) != Fit::kRow) return false;
    if (labels.dtype() != DType::kI32 && labels.dtype() != DType::kI64) return false;
    return op == "cross_entropy" || (n.operand(2)->rank() == 0 && real(n.operand(2)));
  }
  // Square tiles only (self-attention, S queries by S keys): the query is then row % cols.
  if (op == "causal_mask") return space_.size() >= 2 && same({space_[last - 1]}, {space_[last]});
  if (op == "adamw_update") {
    for (int i = 1; i < 4; ++i)
      if (!real(n.operand(i)) || !same(n.operand(i)->shape(), space_)) return false;
    return n.operand(4)->rank() == 0 && real(n.operand(4)) && n.operand(5)->rank() == 0;
  }
  for (const ir::Value* o : n.operands())
    if (!real(o) || !same(o->shape(), space_)) return false;
  return axis_of(n) == last;  // softmax and friends over the last axis
}

int KernelBuilder::emit(KOp op, std::vector<int> args) {
  k_.code.push_back(Instr{.op = op, .args = std::move(args)});
  return static_cast<int>(k_.code.size()) - 1;
}

int KernelBuilder::load_at(int buffer, int col) {
  k_.code.push_back(
      Instr{.op = KOp::kLoadAt, .args = {col}, .buffer = buffer, .access = Access::kFull});
  return static_cast<int>(k_.code.size()) - 1;
}

int KernelBuilder::constant(double v) {
  k_.code.push_back(Instr{.op = KOp::kConst, .value = v});
  return static_cast<int>(k_.code.size()) - 1;
}

int KernelBuilder::value(const ir::Value* v, std::optional<Access> access) {
  if (auto it = instr_.find(v); it != instr_.end()) return it->second;
  if (!access) {
    const Fit f = fit_of(v->shape());
    if (f == Fit::kNone)
      throw InvalidArgument("fusion: %" + v->name() + " does not fit the kernel's space");
    access = f == Fit::kFull ? Access::kFull : f == Fit::kRow ? Access::kRow : Access::kScalar;
  }
  const int buffer = static_cast<int>(inputs_.size());
  inputs_.push_back(v);
  k_.types.push_back(v->dtype());
  k_.code.push_back(Instr{.op = KOp::kLoad, .buffer = buffer, .access = *access});
  return instr_[v] = static_cast<int>(k_.code.size()) - 1;
}

void KernelBuilder::add(const ir::Node& n) {
  lower(n);
  for (const ir::Value* r : n.results()) round_to_dtype(r);
}

void KernelBuilder::round_to_dtype(const ir::Value* v) {
  const auto it = instr_.find(v);
  if (!is_half_float(v->dtype()) || it == instr_.end()) return;
  const KOp round = v->dtype() == DType::kBF16 ? KOp::kRoundBf16 : KOp::kRoundF16;
  const Instr& in = k_.code[it->second];
  if (in.op == round || (in.op == KOp::kLoad && k_.types[in.buffer] == v->dtype())) return;
  it->second = emit(round, {it->second});
}

void KernelBuilder::lower(const ir::Node& n) {
  const std::string& op = n.op().name;
  KOp k;
  if (op == "broadcast") {
    const ir::Value* x = n.operand(0);
    std::optional<Access> a;
    if (x->rank() == 0) a = Access::kScalar;
    // By column only when the one dim kept is the last: [R] kept along dim 0 is a row value.
    else if (n.attrs().get_ints("dims") ==
                 std::vector<int64_t>{static_cast<int64_t>(space_.size()) - 1} &&
             space_.size() > 1)
      a = Access::kCol;
    instr_[n.result()] = value(x, a);
  } else if (op == "full" || op == "constant") {
    instr_[n.result()] = constant(n.attrs().get_float("value"));
  } else if (is_float_cast(n)) {  // the f32 value, rounded by add() when the cast is to 16 bits
    instr_[n.result()] = value(n.operand(0));
  } else if (op == "reduce_sum" && reduces_every_axis(n)) {  // a gradient norm's sum of squares
    sums_[n.result()] = {emit(KOp::kReduceSum, {value(n.operand(0))}), Access::kScalar};
  } else if (op == "reduce_sum" || op == "reduce_max") {
    instr_[n.result()] =
        emit(op == "reduce_sum" ? KOp::kReduceSum : KOp::kReduceMax, {value(n.operand(0))});
  } else if (op == "adamw_update") {
    lower_adamw(n);
  } else if (op == "cross_entropy" || op == "cross_entropy_grad") {
    lower_cross_entropy(n);
  } else if (is_tanh_gelu(n)) {
    lower_gelu(n);
  } else if (op == "causal_mask") {  // keys after the query's own position get `value`
    const int after = emit(KOp::kGt, {emit(KOp::kColIndex, {}), emit(KOp::kRowModCols, {})});
    instr_[n.result()] =
        emit(KOp::kSelect, {after, constant(n.attrs().get_float("value")), value(n.operand(0))});
  } else if (kRowOps.contains(op)) {
    lower_norm_or_softmax(n);
  } else if (is_elementwise(n, k)) {
    std::vector<int> args;
    for (const ir::Value* o : n.operands()) args.push_back(value(o));
    instr_[n.result()] = emit(k, std::move(args));
  } else {
    throw InvalidArgument("fusion: no lowering for `" + op + "`");
  }
}

// The row ops, written out as the reference kernels compute them (ir/ops/nn_kernels.cc,
// grad_kernels.cc): each reduction becomes one pass over the row.
void KernelBuilder::lower_norm_or_softmax(const ir::Node& n) {
  const std::string& op = n.op().name;
  const int x = value(n.operand(0));
  int y = -1;
  if (op == "softmax" || op == "log_softmax") {
    const int shifted = emit(KOp::kSub, {x, emit(KOp::kReduceMax, {x})});
    const int e = emit(KOp::kExp, {shifted});
    const int sum = emit(KOp::kReduceSum, {e});
    y = op == "softmax" ? emit(KOp::kDiv, {e, sum})
                        : emit(KOp::kSub, {shifted, emit(KOp::kLog, {sum})});
  } else if (op == "softmax_grad") {  // y * (dy - sum(dy * y))
    const int dy = value(n.operand(1));
    y = emit(KOp::kMul,
             {x, emit(KOp::kSub, {dy, emit(KOp::kReduceSum, {emit(KOp::kMul, {dy, x})})})});
  } else if (op == "log_softmax_grad") {  // dy - exp(y) * sum(dy)
    const int dy = value(n.operand(1));
    y = emit(KOp::kSub, {dy, emit(KOp::kMul, {emit(KOp::kExp, {x}), emit(KOp::kReduceSum, {dy})})});
  } else if (op == "layer_norm") {  // (x - mean) * (var + eps)^(-1/2) * w + b, the variance in a
                                    // second pass
    const int inv_cols = constant(1.0 / static_cast<double>(*space_.back().constant()));
    const int centred =
        emit(KOp::kSub, {x, emit(KOp::kMul, {emit(KOp::kReduceSum, {x}), inv_cols})});
    const int var =
        emit(KOp::kMul, {emit(KOp::kReduceSum, {emit(KOp::kMul, {centred, centred})}), inv_cols});
    const int rstd =
        emit(KOp::kRsqrt, {emit(KOp::kAdd, {var, constant(n.attrs().get_float("eps"))})});
    const int scaled =
        emit(KOp::kMul, {emit(KOp::kMul, {centred, rstd}), value(n.operand(1), Access::kCol)});
    y = emit(KOp::kAdd, {scaled, value(n.operand(2), Access::kCol)});
  } else {  // the RMS norms: inv = (mean(x^2) + eps)^(-1/2)
    const double cols = static_cast<double>(*space_.back().constant());
    const int mean =
        emit(KOp::kMul, {emit(KOp::kReduceSum, {emit(KOp::kMul, {x, x})}), constant(1.0 / cols)});
    const int inv =
        emit(KOp::kRsqrt, {emit(KOp::kAdd, {mean, constant(n.attrs().get_float("eps"))})});
    const int w = value(n.operand(1), Access::kCol);
    if (op == "rms_norm_grad") return lower_rms_norm_grad(n, x, w, inv, 1.0 / cols);
    y = emit(KOp::kMul, {emit(KOp::kMul, {x, inv}), w});  // rms_norm: x * inv * w
  }
  instr_[n.result()] = y;
}

// dx = inv * w * dy - inv^3 / D * sum(dy * w * x) * x; dw = the column sum of dy * x * inv.
void KernelBuilder::lower_rms_norm_grad(const ir::Node& n, int x, int w, int inv, double inv_cols) {
  const int dy = value(n.operand(2));
  const int dyw = emit(KOp::kMul, {dy, w});
  const int dot = emit(KOp::kReduceSum, {emit(KOp::kMul, {dyw, x})});
  const int inv3 = emit(KOp::kMul, {emit(KOp::kMul, {inv, inv}), inv});
  const int c = emit(KOp::kMul, {emit(KOp::kMul, {inv3, constant(inv_cols)}), dot});
  instr_[n.result(0)] = emit(KOp::kSub, {emit(KOp::kMul, {dyw, inv}), emit(KOp::kMul, {c, x})});
  sums_[n.result(1)] = {emit(KOp::kMul, {emit(KOp::kMul, {dy, x}), inv}), Access::kCol};
}

// As cross_entropy(_grad)_kernel: the mean over counted rows (label != ignore_index) of
// log(sum(exp(x - max))) - (x[label] - max), 0 when none is counted; the gradient
// (softmax - one_hot(label)) * dloss / count on counted rows, 0 elsewhere. The count, and the
// count of labels outside [0, V) (which fails the run), are totals over rows taken first.
void KernelBuilder::lower_cross_entropy(const ir::Node& n) {
  const int x = value(n.operand(0)), label = value(n.operand(1), Access::kRow);
  const int zero = constant(0), one = constant(1);
  const int counted =
      emit(KOp::kNe, {label, constant(static_cast<double>(n.attrs().get_int("ignore_index")))});
  const int count = emit(KOp::kSumRows, {emit(KOp::kSelect, {counted, one, zero})});
  const int classes = constant(static_cast<double>(*space_.back().constant()));
  const int above = emit(KOp::kSelect, {emit(KOp::kGe, {label, classes}), one, zero});
  const int outside = emit(KOp::kSelect, {emit(KOp::kLt, {label, zero}), one, above});
  emit(KOp::kCheckLabels, {emit(KOp::kSumRows, {emit(KOp::kSelect, {counted, outside, zero})})});
  const int none = emit(KOp::kEq, {count, zero});
  auto is_label = [&] { return emit(KOp::kEq, {emit(KOp::kColIndex, {}), label}); };
  if (n.op().name == "cross_entropy") {
    // log(sum(exp(x))) - x[label]: with the logits in memory, one pass (the running logsumexp)
    // and a read at the label's column; else max, sum and pick passes.
    const Instr& xi = k_.code[x];
    int row_loss = -1;
    if (xi.op == KOp::kLoad) {
      row_loss = emit(KOp::kSub, {emit(KOp::kReduceLogSumExp, {x}), load_at(xi.buffer, label)});
    } else {
      const int shifted = emit(KOp::kSub, {x, emit(KOp::kReduceMax, {x})});
      const int picked = emit(KOp::kReduceSum, {emit(KOp::kSelect, {is_label(), shifted, zero})});
      row_loss =
          emit(KOp::kSub,
               {emit(KOp::kLog, {emit(KOp::kReduceSum, {emit(KOp::kExp, {shifted})})}), picked});
    }
    const int loss = emit(KOp::kSelect, {counted, row_loss, zero});
    const int inv_count = emit(KOp::kSelect, {none, zero, emit(KOp::kDiv, {one, count})});
    sums_[n.result()] = {emit(KOp::kMul, {loss, inv_count}), Access::kScalar};
    return;
  }
  const int e = emit(KOp::kExp, {emit(KOp::kSub, {x, emit(KOp::kReduceMax, {x})})});
  const int sum = emit(KOp::kReduceSum, {e});
  const int scale = emit(KOp::kSelect, {none, zero, emit(KOp::kDiv, {value(n.operand(2)), count})});
  const int grad =
      emit(KOp::kSub, {emit(KOp::kDiv, {e, sum}), emit(KOp::kSelect, {is_label(), one, zero})});
  instr_[n.result()] = emit(KOp::kSelect, {counted, emit(KOp::kMul, {grad, scale}), zero});
}

// gelu = x/2 (1 + th), th = tanh(k (x + c x^3)), k = sqrt(2 / pi), c = 0.044715; its gradient
// dy (1/2 (1 + th) + x/2 (1 - th^2) k (1 + 3 c x^2)), as the reference kernels write them.
void KernelBuilder::lower_gelu(const ir::Node& n) {
  const double k = std::sqrt(2.0 / std::numbers::pi), c = 0.044715;
  const int x = value(n.operand(0)), half = constant(0.5), one = constant(1);
  const int x2 = emit(KOp::kMul, {x, x});
  const int inner = emit(
      KOp::kMul, {constant(k),
                  emit(KOp::kAdd, {x, emit(KOp::kMul, {constant(c), emit(KOp::kMul, {x2, x})})})});
  const int th = emit(KOp::kTanh, {inner});
  const int half_x = emit(KOp::kMul, {half, x});
  if (n.op().name == "gelu") {
    instr_[n.result()] = emit(KOp::kMul, {half_x, emit(KOp::kAdd, {one, th})});
    return;
  }
  const int sech2 = emit(KOp::kSub, {one, emit(KOp::kMul, {th, th})});
  const int slope = emit(
      KOp::kMul, {constant(k), emit(KOp::kAdd, {one, emit(KOp::kMul, {constant(3 * c), x2})})});
  const int d = emit(KOp::kAdd, {emit(KOp::kMul, {half, emit(KOp::kAdd, {one, th})}),
                                 emit(KOp::kMul, {emit(KOp::kMul, {half_x, sech2}), slope})});
  instr_[n.result()] = emit(KOp::kMul, {value(n.operand(1)), d});
}

// AdamW as adamw_update_kernel computes it; the bias corrections are scalar-level (once per call).
void KernelBuilder::lower_adamw(const ir::Node& n) {
  const double b1 = n.attrs().get_float("beta1"), b2 = n.attrs().get_float("beta2");
  const int p = value(n.operand(0)), g = value(n.operand(1)), m = value(n.operand(2)),
            v = value(n.operand(3));
  const int lr = value(n.operand(4)), step = value(n.operand(5));
  const int one = constant(1);
  const int decay =
      emit(KOp::kSub, {one, emit(KOp::kMul, {lr, constant(n.attrs().get_float("weight_decay"))})});
  const int step_size =
      emit(KOp::kDiv, {lr, emit(KOp::kSub, {one, emit(KOp::kPow, {constant(b1), step})})});
  const int bc2_sqrt =
      emit(KOp::kSqrt, {emit(KOp::kSub, {one, emit(KOp::kPow, {constant(b2), step})})});
  const int m1 =
      emit(KOp::kAdd, {emit(KOp::kMul, {m, constant(b1)}), emit(KOp::kMul, {g, constant(1 - b1)})});
  const int v1 = emit(KOp::kAdd, {emit(KOp::kMul, {v, constant(b2)}),
                                  emit(KOp::kMul, {emit(KOp::kMul, {constant(1 - b2), g}), g})});
  const int denom = emit(KOp::kAdd, {emit(KOp::kDiv, {emit(KOp::kSqrt, {v1}), bc2_sqrt}),
                                     constant(n.attrs().get_float("eps"))});
  instr_[n.result(0)] = emit(
      KOp::kSub,
      {emit(KOp::kMul, {p, decay}), emit(KOp::kMul, {step_size, emit(KOp::kDiv, {m1, denom})})});
  instr_[n.result(1)] = m1;
  instr_[n.result(2)] = v1;
}

KernelIR KernelBuilder::finish(const std::vector<const ir::Value*>& outputs) {
  KernelIR k = k_;
  k.inputs = static_cast<int>(inputs_.size());
  k.outputs = static_cast<int>(outputs.size());
  k.space = -1;
  for (int i = 0; i < k.inputs && k.space < 0; ++i)
    if (same(inputs_[i]->shape(), space_)) k.space = i;
  const std::vector<Level> levels = k.levels();
  for (size_t o = 0; o < outputs.size(); ++o) {
    const ir::Value* v = outputs[o];
    if (auto it = sums_.find(v); it != sums_.end()) {
      k.types.push_back(DType::kF32);
      k.code.push_back(Instr{.op = KOp::kStore,
                             .args = {it->second.first},
                             .buffer = k.inputs + static_cast<int>(o),
                             .access = it->second.second});
      continue;
    }
    Fit f = fit_of(v->shape());
    // A reduction over a rank-1 space gives one row, which is also a scalar.
    if (f == Fit::kScalar && levels[instr_.at(v)] == Level::kRow) f = Fit::kRow;
    if (!computes_in_f32(v->dtype()) || f == Fit::kNone)
      throw InvalidArgument("fusion: output %" + v->name() +
                            " is not f32, bf16 or f16 in the space");
    if (f == Fit::kFull && k.space < 0) k.space = k.inputs + static_cast<int>(o);
    k.types.push_back(v->dtype());
    k.code.push_back(Instr{.op = KOp::kStore,
                           .args = {instr_.at(v)},
                           .buffer = k.inputs + static_cast<int>(o),
                           .access = f == Fit::kFull  ? Access::kFull
                                     : f == Fit::kRow ? Access::kRow
                                                      : Access::kScalar});
  }
  if (k.space < 0) throw InvalidArgument("fusion: no buffer has the kernel's space shape");
  k.check();
  return k;
}

}  // namespace disc::jit
