// Lowers graph nodes into the kernel IR of one fused group, each by its op's own rule
// (OpDef::lowering, ir/kernel_lowering.h). A KernelBuilder holds the group's iteration space (a
// shape) and maps the group's values to instructions; values from outside the group become loads
// whose access follows from their shape (the space's shape: full; without its last dim: row; a
// scalar: scalar; a norm weight or a broadcast over rows: col).
//
//   KernelBuilder b(space, g.shapes());
//   if (b.fits(*node)) b.add(*node);     // elementwise ops, broadcasts, row reductions, softmax,
//   KernelIR k = b.finish({outputs});    // rms_norm(_grad), adamw_update, ... (see lowerable())
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "jit/kernel_ir/kernel_ir.h"

namespace disc::jit {

// True when the node's op has a lowering that takes it (whether it fits a given space is fits()).
bool lowerable(const ir::Node& n);
// The iteration space a node would run over alone: its input's shape for reductions and row ops,
// else its first result's shape.
std::vector<ir::DimExpr> natural_space(const ir::Node& n);

class KernelBuilder final : public ir::KernelWriter {
 public:
  using Fit = ir::Fit;

  KernelBuilder(std::vector<ir::DimExpr> space, const ir::ShapeGraph& shapes);

  // True when n can be lowered into this space: its op's rule takes its operands' and results'
  // shapes (the space's shape, its rows, or a scalar; col only where the op reads a weight by
  // column) and dtypes, and no operand is a sum over rows made in this kernel.
  bool fits(const ir::Node& n) const;
  // Lowers n (after fits(n)); its operands are group values added before, or outside values.
  // Kernels compute in f32; each bf16 or f16 result is rounded to its dtype where it is made, so
  // that a value is the same in any kernel, fused or not, and in a recompute of it.
  void add(const ir::Node& n);
  // Stores `outputs` (values added before) and returns the kernel; inputs() are its input buffers.
  KernelIR finish(const std::vector<const ir::Value*>& outputs);
  const std::vector<const ir::Value*>& inputs() const { return inputs_; }

  // ir::KernelWriter, what the ops' rules write through.
  const std::vector<ir::DimExpr>& space() const override { return space_; }
  bool same(const std::vector<ir::DimExpr>& a, const std::vector<ir::DimExpr>& b) const override;
  Fit fit_of(const std::vector<ir::DimExpr>& shape) const override;
  int value(const ir::Value* v, std::optional<Access> access = std::nullopt) override;
  int emit(KOp op, std::vector<int> args) override;
  int constant(double v) override;
  int load_at(int buffer, int col) override;
  std::optional<int> loaded_buffer(int instr) const override;
  void set(const ir::Value* v, int instr) override { instr_[v] = instr; }
  void set_sum(const ir::Value* v, int instr, Access access) override {
    sums_[v] = {instr, access};
  }

 private:
  // v's instruction rounded to v's dtype when that is bf16 or f16 and the instruction does not
  // hold such a value already (a load of v's type, a rounding to it).
  void round_to_dtype(const ir::Value* v);

  std::vector<ir::DimExpr> space_;
  const ir::ShapeGraph& shapes_;
  KernelIR k_;
  std::vector<const ir::Value*> inputs_;
  std::map<const ir::Value*, int> instr_;
  // Values stored as sums over rows: the instruction summed and the store's access (col: a
  // column sum; scalar: a row value summed into one).
  std::map<const ir::Value*, std::pair<int, Access>> sums_;
};

}  // namespace disc::jit
