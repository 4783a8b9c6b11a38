// The kernels both device kinds register alike (cpu.cc, gpu.cc): matmul through the device's
// library GEMM, and fused nodes through the device's compiled kernels (KernelContext::fused).
#pragma once

#include "engine/kernels/kernel_registry.h"

namespace disc::engine {

// matmul: [..., M, K] x [..., K, N] (or a shared [K, N]) -> [..., M, N] on ctx's device. Rows are
// dense, so a batch that shares B is one GEMM over its stacked rows, and sum_batch is one GEMM
// whose contraction runs over the stacked rows of both operands. With tril_a on the host, block
// GEMMs skip A's blocks above the diagonal (devices/cpu/tril_gemm.h).
jit::KernelRun device_gemm(const ir::Node& n, const ir::KernelArgs& a, KernelContext& ctx);

// `fused` nodes, where the context has a runner that holds the node's kernel.
bool has_fused_kernel(const ir::Node& n, const KernelContext& ctx);
jit::KernelRun run_fused(const ir::Node& n, const ir::KernelArgs& a, KernelContext& ctx);
jit::KernelRun prepare_fused(const ir::Node& n, const ir::Bindings& b, KernelContext& ctx);

}  // namespace disc::engine
