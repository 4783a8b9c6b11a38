// The `fused` op: one node standing for a fused group, so that the scheduler, the memory planner
// and the executor treat a kernel like any other node. Its attributes hold the group's kernel IR
// (`kernel`, text) and its iteration space (`shape`); its results are the group's outputs.
//
//   %a, %b = fused(%x, %w) {kernel = "kernel inputs=2 outputs=2 ...", shape = [B, S, 128]}
//
// The shape rule reads the kernel (full stores give the space's shape, row stores the space
// without its last dim, scalar stores []), checks the operands against their loads, and the
// reference kernel is the kernel IR interpreter.
#pragma once

#include <memory>

#include "ir/graph.h"
#include "jit/kernel_ir/kernel_ir.h"

namespace disc::jit {

// Adds `fused` to the op registry (once; later calls do nothing). Anything that builds or parses
// graphs with fused nodes calls it first.
void register_fused_op();

// The kernel of a fused node, parsed once per distinct text.
std::shared_ptr<const KernelIR> kernel_of(const ir::Attributes& attrs);

// What running a fused node needs from it, worked out once per node: its kernel, the kernel's
// fingerprint (a cache key) and the last dim of its space (the column extent and whether the
// graph fixes it).
struct FusedKernel {
  std::shared_ptr<const KernelIR> kernel;
  uint64_t fingerprint = 0;
  bool cols_static = false;      // the space's last dim is a constant in the graph
  ir::DimExpr cols{int64_t{1}};  // the space's last dim (1 for a scalar space)
};
FusedKernel fused_kernel_of(const ir::Node& n);

}  // namespace disc::jit
