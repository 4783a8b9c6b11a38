// Runs a kernel IR with plain loops in double precision: the oracle the emitters are tested
// against, and the reference kernel of a fused node when no compiled kernel is at hand. Rows are
// independent, so they run in parallel and the results do not depend on the thread count.
#pragma once

#include <vector>

#include "ir/tensor_ref.h"
#include "jit/kernel_ir/kernel_ir.h"

namespace disc::jit {

// buffers[i] are the kernel's buffers, inputs then outputs; the iteration space is
// buffers[k.space]'s shape (see space_of, which checks them).
void interpret(const KernelIR& k, const std::vector<ir::TensorRef>& buffers);

// The totals of the kernel's sum_rows instructions over rows x cols, indexed by instruction (0
// elsewhere), summed in double with rows in order; then the checks: throws InvalidArgument when a
// check_labels counts labels outside the classes. Only the dtype and data of buffers are read.
std::vector<double> row_totals(const KernelIR& k, const std::vector<ir::TensorRef>& buffers,
                               int64_t rows, int64_t cols);

}  // namespace disc::jit
