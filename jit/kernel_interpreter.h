// Runs a kernel IR with plain loops in double precision: the oracle the emitters are tested
// against, and the reference kernel of a fused node when no compiled kernel is at hand. Rows are
// independent, so they run in parallel and the results do not depend on the thread count.
#pragma once

#include <vector>

#include "ir/tensor_ref.h"
#include "jit/kernel_ir.h"

namespace disc::jit {

// buffers[i] are the kernel's buffers, inputs then outputs; the iteration space is
// buffers[k.space]'s shape (see space_of, which checks them).
void interpret(const KernelIR& k, const std::vector<ir::TensorRef>& buffers);

}  // namespace disc::jit
