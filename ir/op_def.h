// One entry of the op registry: everything disc knows about an op, in one place. Adding an op
// means adding one OpDef (in ir/ops/) and its tests.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/kernel_lowering.h"
#include "ir/shape_graph.h"
#include "ir/tensor_ref.h"
#include "ir/tensor_type.h"

namespace disc::ir {

class Value;
struct GradContext;  // ir/autodiff.h

enum class OpCategory {
  kElementwise,
  kBroadcast,
  kReduce,
  kMatmul,
  kLayout,
  kGatherScatter,
  kNormalization,
  kConvolution,
  kConstant,
  kRandom,
  kLoss,
  // Across the ranks of a data-parallel run: never fused, and never recomputed by the memory
  // planner (a collective issued on one rank alone would wait for the others forever).
  kCollective,
  kFused,  // a group of memory-bound ops compiled as one kernel (jit/fusion/fused_op.h)
};
std::string_view category_name(OpCategory c);

// How the precision pass (ir/passes/autocast.cc) reads an op's float operands under bf16 or f16,
// as PyTorch's autocast lists and TVM's mixed-precision policies say.
enum class Precision {
  kFollow,     // promoted to the widest float dtype among them (elementwise, layout, gather)
  kLow,        // cast to the low dtype; the devices' kernels sum in f32 (matmul, attention)
  kLowInBf16,  // the low dtype under bf16, f32 under f16 (the head: its gradients are made for
               // dloss = 1, before the loss scale, and would underflow in f16)
  kF32,        // cast to f32 (norms, softmax, losses, reductions)
};

// What a shape rule sees: operand types, attributes (already checked against the schema and
// with defaults filled in) and the shape graph, where it records the dim equalities it implies.
class InferContext {
 public:
  InferContext(const std::vector<const TensorType*>& operands, const Attributes& attrs,
               ShapeGraph& shapes)
      : operands_(operands), attrs_(attrs), shapes_(shapes) {}

  int num_operands() const { return static_cast<int>(operands_.size()); }
  const TensorType& in(int i) const { return *operands_.at(i); }
  const Attributes& attrs() const { return attrs_; }
  ShapeGraph& shapes() { return shapes_; }

  // Throws VerifyError(what); the graph adds which node it is.
  [[noreturn]] void fail(const std::string& what) const;
  void require(bool ok, const std::string& what) const {
    if (!ok) fail(what);
  }
  // Records a == b (both dims); fails with `what` when they can never be equal.
  void unify(const DimExpr& a, const DimExpr& b, const std::string& what);
  // Normalises `axis` (negative counts from the end) for a tensor of `rank`; fails if outside.
  int axis(int64_t axis, int rank, const std::string& attr) const;
  // Fails unless operand i has a float (or, with allow_int, integer) dtype.
  void require_float(int i, bool allow_int = false) const;
  void require_integer(int i) const;

 private:
  const std::vector<const TensorType*>& operands_;
  const Attributes& attrs_;
  ShapeGraph& shapes_;
};

// Symbolic cost of one execution of a node.
struct OpCost {
  DimExpr flops;
  DimExpr bytes;  // read + written
};

// Bytes read and written by one execution: every operand and result once (the default cost's
// bytes).
DimExpr io_bytes(const std::vector<TensorType>& operands, const std::vector<TensorType>& results);

using ShapeRule = std::function<std::vector<TensorType>(InferContext&)>;
// Builds the gradient of each operand (nullptr: none) from the gradients of the results.
using GradRule = std::function<std::vector<Value*>(GradContext&)>;
using CostRule =
    std::function<OpCost(const std::vector<TensorType>& operands,
                         const std::vector<TensorType>& results, const Attributes& attrs)>;

struct OpDef {
  std::string name;
  OpCategory category = OpCategory::kElementwise;
  std::string summary;
  int min_operands = 1;
  int max_operands = 1;  // -1: any number
  int num_results = 1;   // -1: as many as the shape rule gives (the JIT's `fused`)
  std::vector<AttrSpec> attrs;
  ShapeRule infer;
  // Default cost: flops_per_element per result element, bytes of all operands and results.
  int flops_per_element = 1;
  CostRule cost;  // overrides the default when set
  // Plain loops over host memory: the oracle for every test and the fallback of every device.
  // The registry widens bf16 and f16 tensors for it (ir/ops/half_widening.h) unless
  // `reference_takes_half` says that it reads and writes them itself.
  ReferenceKernel reference;
  bool reference_takes_half = false;
  // Empty for ops that are not differentiable (comparisons, integer ops, gradient ops).
  GradRule grad;
  // Operands whose buffer the (first) result may take when the operand dies at this node and has
  // the result's dtype and element count: the kernel reads each element of it before writing the
  // element at the same index. (The executor then runs the op in place; the memory plan counts
  // one buffer.)
  std::vector<int> overwritable;
  // For an op whose overwritable operands depend on its attributes and differ per result (a fused
  // kernel's, on what the kernel reads): computes them, for each of its `results` at once, in place
  // of `overwritable`.
  std::function<std::vector<std::vector<int>>(const Attributes&, int results)> overwritable_of;

  // The operands that each of a node's `results` may overwrite: `overwritable` for result 0, or
  // what `overwritable_of` gives.
  std::vector<std::vector<int>> overwritable_for(const Attributes& attrs, int results) const {
    if (overwritable_of) return overwritable_of(attrs, results);
    std::vector<std::vector<int>> table(results);
    if (results > 0) table[0] = overwritable;
    return table;
  }

  // How the fusion planner treats the op and how it lowers into a fused kernel (empty: never
  // fused).
  Lowering lowering;
  Precision precision = Precision::kFollow;
  // Autocast's weak values (a Python scalar's rule: a constant takes the dtype of the tensor it
  // meets): ops whose result is one value everywhere make one (constant, full); ops that only
  // move or retype their operand's values carry one through (broadcast, reshape, cast).
  bool makes_constant = false;
  bool carries_constant = false;

  OpCost cost_of(const std::vector<TensorType>& operands, const std::vector<TensorType>& results,
                 const Attributes& attrs) const;
};

// Runs `def`'s shape rule on these operand types and attributes (attributes must already have
// passed the schema). Throws VerifyError with the rule's message.
std::vector<TensorType> infer_types(const OpDef& def, const std::vector<const TensorType*>& in,
                                    const Attributes& attrs, ShapeGraph& shapes);

}  // namespace disc::ir
