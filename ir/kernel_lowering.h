// How an op lowers into a fused kernel: the instruction set of the kernel IR (jit/kernel_ir owns
// the IR itself, its checks and its text), the interface a lowering writes through, and the rule
// each OpDef carries. An op's lowering sits beside its shape rule and reference kernel, so that
// jit/ never compares op names; jit::KernelBuilder implements KernelWriter.
//
//   // exp: one instruction over the operand, loaded as the kernel's space asks
//   def.lowering = elementwise_lowering(KOp::kExp);      // ir/ops/lowerings.h
//   // a row op writes its passes over the row:
//   def.lowering.lower = [](KernelWriter& w, const Node& n) {
//     const int x = w.value(n.operand(0));
//     w.set(n.result(), w.emit(KOp::kSub, {x, w.emit(KOp::kReduceMax, {x})}));
//   };
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "ir/dim_expr.h"

namespace disc::ir {

class Node;
class Value;

// How a load or store indexes its buffer at (row, col) (jit/kernel_ir/kernel_ir.h): the space's
// shape, one value per row, one per column, one value.
enum class Access : uint8_t { kFull, kRow, kCol, kScalar };

// What an instruction does (the kernel IR's instruction set; jit/kernel_ir/kernel_ir.h says what
// each computes). Loads convert any numeric buffer type to float; stores write f32, or round to
// their bf16 or f16 buffer.
enum class KOp : uint8_t {
  kLoad,
  kStore,
  kConst,
  kLoadAt,      // load_at B full %c: buffer B (full access) at the row's column %c, clamped to
                // [0, cols) (row level): a cross-entropy's logit at the label
  kColIndex,    // the column index, as a float (element level): one-hot compares against labels
  kRowModCols,  // the row index modulo max(cols, 1), as a float (row level): the query's position
                // in a square [.., S, S] attention tile (the causal mask)
  // unary
  kNeg,
  kAbs,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kTanh,
  kSigmoid,
  kSilu,
  kRelu,
  // x rounded to bf16 (f16) and widened back: the value a 16-bit node of the fused group holds,
  // so that a fused kernel computes what the group's nodes compute one by one
  kRoundBf16,
  kRoundF16,
  // binary
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMax,
  kMin,
  kPow,
  // compares (bool) and select(cond, a, b)
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kSelect,
  // row reductions over the columns: element -> row. reduce_logsumexp is log(sum(exp(x))) in one
  // pass (a running max and a sum rescaled to it, per lane): a cross-entropy's normaliser
  kReduceSum,
  kReduceMax,
  kReduceLogSumExp,
  // totals over every row, before the rows run: row -> scalar; and their check
  kSumRows,
  kCheckLabels,
};

// How a value of some shape sits in a kernel's space: the space itself, its rows, a scalar, or
// none of these (then it cannot be loaded or stored).
enum class Fit { kNone, kFull, kRow, kScalar };

// What a lowering writes a node's kernel IR through: one fused group's kernel under construction,
// over an iteration space (a shape; its last dim the columns, the rest the rows). Instructions are
// indices; a value from outside the group becomes a load.
class KernelWriter {
 public:
  virtual ~KernelWriter() = default;

  virtual const std::vector<DimExpr>& space() const = 0;
  // Whether two shapes are equal dim by dim (under the shape graph's equalities).
  virtual bool same(const std::vector<DimExpr>& a, const std::vector<DimExpr>& b) const = 0;
  virtual Fit fit_of(const std::vector<DimExpr>& shape) const = 0;

  // The instruction holding v: made by a node lowered before, or a load of it with `access`
  // (without one, as its shape fits the space).
  virtual int value(const Value* v, std::optional<Access> access = std::nullopt) = 0;
  virtual int emit(KOp op, std::vector<int> args) = 0;
  virtual int constant(double v) = 0;
  // load_at: the row's element at column `col` of input buffer `buffer` (full access).
  virtual int load_at(int buffer, int col) = 0;
  // The input buffer instruction `instr` loads, if it is a load.
  virtual std::optional<int> loaded_buffer(int instr) const = 0;

  // Result v is instruction `instr` (rounded to v's dtype by the writer when that is 16-bit).
  virtual void set(const Value* v, int instr) = 0;
  // Result v is the sum over rows of `instr`, stored with `access` (col: a column sum; scalar: a
  // row value summed into one). Nothing in the kernel may read v.
  virtual void set_sum(const Value* v, int instr, Access access) = 0;
};

// How the fusion planner (jit/fusion) treats an op, as TVM's op patterns do.
enum class FusionKind {
  kNone,         // not fusible: runs a kernel of its own (or the device's library)
  kElementwise,  // one pass over its result's shape, no reduction: elementwise ops, broadcasts,
                 // constants, casts, optimizer updates
  kReduction,    // reduce_sum, reduce_max: its operand's last axis (or every axis) to row values
  kRow,          // reads whole rows of its operand: softmax, cross-entropy, their gradients
  kNorm,         // a row op that normalises its operand (RMSNorm, LayerNorm): it starts a kernel
                 // of its own when other nodes read that operand too (jit/fusion/fusion.cc)
};

// An op's lowering to kernel IR. Empty `lower`: the op has none and is never fused.
struct Lowering {
  FusionKind kind = FusionKind::kNone;
  // For ops that lower only for some attributes or dtypes (gelu's tanh form, float casts): whether
  // this node lowers at all. Empty: every node of the op does.
  std::function<bool(const Node&)> accepts;
  // Whether the node lowers into the writer's space (its operands' and results' shapes and dtypes
  // fit). Called only for nodes `accepts` takes.
  std::function<bool(const KernelWriter&, const Node&)> fits;
  std::function<void(KernelWriter&, const Node&)> lower;
  // The one instruction the op lowers to, for ops that are exactly one (the planner's cheap
  // arithmetic: jit/fusion/fusion.cc).
  std::optional<KOp> single;

  bool lowers(const Node& n) const { return lower && (!accepts || accepts(n)); }
};

}  // namespace disc::ir
