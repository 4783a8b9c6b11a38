#include "jit/kernel_ir/lowering.h"

#include <algorithm>

#include "base/error.h"
#include "ir/ops/lowerings.h"

namespace disc::jit {

using ir::DimExpr;

bool lowerable(const ir::Node& n) {
  return n.op().lowering.lowers(n);
}

std::vector<DimExpr> natural_space(const ir::Node& n) {
  switch (n.op().lowering.kind) {
    case ir::FusionKind::kReduction:
    case ir::FusionKind::kRow:
    case ir::FusionKind::kNorm:
      return n.operand(0)->shape();
    case ir::FusionKind::kNone:
    case ir::FusionKind::kElementwise:
      break;
  }
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
  if (!space_.empty() && same(shape, ir::rows_of(space_))) return Fit::kRow;
  return Fit::kNone;
}

bool KernelBuilder::fits(const ir::Node& n) const {
  if (!lowerable(n)) return false;
  for (const ir::Value* o : n.operands())
    if (sums_.contains(o)) return false;  // a sum over rows is only whole after every row
  return n.op().lowering.fits(*this, n);
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

std::optional<int> KernelBuilder::loaded_buffer(int instr) const {
  const Instr& in = k_.code.at(instr);
  if (in.op != KOp::kLoad) return std::nullopt;
  return in.buffer;
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
  if (!lowerable(n)) throw InvalidArgument("fusion: no lowering for `" + n.op().name + "`");
  n.op().lowering.lower(*this, n);
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
    if (!ir::computes_in_f32(v->dtype()) || f == Fit::kNone)
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
