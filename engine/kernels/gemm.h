// matmul through a device's library GEMM, for every device kind: the node's attributes and
// tensors as devices::GemmArgs.
#pragma once

#include "devices/device.h"
#include "ir/graph.h"
#include "ir/op_def.h"

namespace disc::engine {

// [..., M, K] x [..., K, N] (or a shared [K, N]) -> [..., M, N] on `dev`. Rows are dense, so a
// batch that shares B is one GEMM over its stacked rows, and sum_batch is one GEMM whose
// contraction runs over the stacked rows of both operands. With tril_a on the host, block GEMMs
// skip A's blocks above the diagonal (devices/cpu/tril_gemm.h).
void run_gemm(const ir::Node& n, const ir::KernelArgs& a, devices::Device& dev);

}  // namespace disc::engine
