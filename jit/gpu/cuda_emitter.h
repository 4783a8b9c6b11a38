// The CUDA C emitter: the kernel IR (kernel_ir.h) as CUDA C source for NVRTC (nvrtc.h), the GPU
// twin of the LLVM emitter. One kernel IR becomes up to three kernels, launched in this order:
//
//   NAME_totals(rows, cols, b0 .. bN, totals)         sum_rows totals and check_labels counts,
//                                                     one block, in double; only when the IR
//                                                     has_row_totals(); the host reads the checks
//   NAME(rows, cols, b0 .. bN, totals, sums)          the rows: any grid (the rows are strided)
//   NAME_sums(groups, cols, sums, s0 .. sK)           the summed stores' blocks added in order, in
//                                                     double; only with summed_stores()
//
// int64 rows and cols; b0 .. bN the kernel's buffers (inputs, then outputs); s0 .. sK the summed
// stores' buffers in summed_stores() order; totals a double per instruction (sum_rows totals
// where the instruction is one, check_labels counts where it is one); sums the per-group sums,
// sums_per_group(cols) floats per group of rows_per_group rows, which the kernel zeroes itself.
//
// bf16 and f16 buffers are unsigned short: loads widen them to float exactly, stores round to
// nearest even (column and summed scalar stores are f32), as base/half.h and the interpreter do.
//
// What the code does (the interpreter's semantics, as the LLVM emitter does them): scalar-level
// instructions in double, once per thread; row-level ones in float, per row, by every thread of
// the block (they are the same for all); each reduction is one pass over the row's columns, the
// block's threads striding over them, each with its own accumulator, combined by a butterfly in
// each warp and then the warps in order: a fixed order for a given block size, so the same bits
// on every call. The final pass computes and stores every element-level store, each thread its
// own columns, loads before stores: an output may alias an input read with full access.
// Expensive element values that several passes read are recomputed (the CPU keeps them in a
// scratch row). A store with col access adds into its group's sums, rows in order; a scalar store
// of a row value too; a scalar store of a scalar value is written once, by block 0.
//
// The block size follows the bucket (32 threads for extents up to 32, up to 256); a block runs one
// row at a time, or groups of kSumBlockRows rows in order when the kernel sums over rows. Where it
// sums only scalars (a gradient norm's squares), a group's rows run at once, a warp per row (warp
// reductions), and thread 0 adds their values in row order after: the same sums, in parallel.
#pragma once

#include <string>
#include <vector>

#include "jit/bucket.h"
#include "jit/kernel_ir/kernel_ir.h"

namespace disc::jit {

struct CudaKernelSource {
  std::string math;        // device helpers of plain arithmetic (16-bit conversions,
                           // NaN-skipping max, logsumexp)
  std::string reductions;  // block reductions (warp shuffles, shared memory)
  std::string body;        // the kernels; read only what math and reductions define
  std::string name;        // NAME; the others are NAME_totals and NAME_sums
  int block = 256;         // threads per block, for every kernel of the source
  int rows_per_group = 1;
  bool has_totals = false;
  std::vector<int> summed;            // summed_stores(): the buffers NAME_sums writes
  int col_sums = 0, scalar_sums = 0;  // how many of them sum columns, how many a scalar
  // Floats of sums per group: cols for each col store, 1 for each summed scalar store.
  int64_t sums_per_group(int64_t cols) const;
  std::string source() const { return math + reductions + body; }
};

// Throws InvalidArgument for an IR that fails KernelIR::check(), CompileError for a buffer type
// it cannot load (f32, f64, bf16, f16, i32, i64 and bool load) or a bucket that cannot hold an
// extent.
CudaKernelSource emit_cuda_kernel(const KernelIR& k, const Bucket& b, const std::string& name);

}  // namespace disc::jit
