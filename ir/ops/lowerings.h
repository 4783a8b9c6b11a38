// What the ops' lowerings to kernel IR (OpDef::lowering, ir/kernel_lowering.h) share: which values
// a fused kernel computes, the checks most rules start with, and the rule of an op that is one
// instruction.
#pragma once

#include <vector>

#include "base/dtype.h"
#include "ir/graph.h"
#include "ir/kernel_lowering.h"

namespace disc::ir {

// Kernels compute in f32: loads widen bf16 and f16, stores round to them.
bool computes_in_f32(DType t);
bool computes_in_f32(const Value* v);

// A shape without its last dim: the rows of a space.
std::vector<DimExpr> rows_of(const std::vector<DimExpr>& shape);

// Operand 0 is a float of the writer's (non-scalar) space: what reductions and row ops read.
bool reads_the_space(const KernelWriter& w, const Node& n);
// Every operand is a float of the writer's space.
bool all_of_the_space(const KernelWriter& w, const Node& n);
// The node's `axis` attribute as a non-negative index into operand 0.
int64_t axis_of(const Node& n);
// The index of the space's last dim.
int64_t last_of(const KernelWriter& w);
// A row op along its `axis` attribute (softmax and its kin): every operand a float of the space,
// the axis its last.
bool fits_over_last_axis(const KernelWriter& w, const Node& n);

// An elementwise op that is instruction k over its operands (a compare gives a bool that only a
// select reads; select's condition is that bool).
Lowering elementwise_lowering(KOp k);

// The rules of forward ops and their gradient ops, registered in two files but written as one:
// gelu's tanh form and gelu_grad; rms_norm and rms_norm_grad; cross_entropy and its gradient.
Lowering tanh_gelu_lowering(bool grad);
Lowering rms_norm_lowering(bool grad);
Lowering cross_entropy_lowering(bool grad);

}  // namespace disc::ir
