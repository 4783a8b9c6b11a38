// The LLVM emitter: a kernel IR and a shape bucket in, one LLVM IR function out, vectorised for
// the host, for LlvmCompiler to optimise and compile. The function runs a range of rows:
//
//   void name(int64_t row_begin, int64_t row_end, int64_t cols, void* const* buffers);
//
// buffers[i] points at the kernel's buffer i (inputs, then outputs); cols is the exact column
// extent, in the bucket (a static bucket's extent is a constant in the code, and `cols` must equal
// it). Rows are independent, so callers split [0, rows) over threads (kernel_cache.h's run_kernel).
//
//   auto ctx = std::make_unique<llvm::LLVMContext>();
//   std::unique_ptr<llvm::Module> m = jit::emit_kernel(k, bucket, jit::host_target(), *ctx, "k0");
//   m->setModuleIdentifier(key);  // the cache key
//   compiler.compile(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx)), "k0");
//
// The module carries the flag "disc.loops_done": its loops are vectorised and unrolled already, so
// LlvmCompiler runs its short pipeline (CSE, LICM, InstCombine) instead of O3.
//
// What the code does, per call: scalar-level instructions once, in double; a scalar store only in
// the call that owns row 0. Per row, in instruction order: row-level instructions in float, and
// for each reduction one pass over the columns that recomputes its element-level argument tree and
// keeps vector accumulators; then one final pass computing and storing every element-level store.
// Within each chunk of columns of the final pass, every load comes before any store, so an output
// may alias an input with the same (full) access: kernels run in place.
//
// A pass covers the columns in chunks of W lanes (W = vector_bits / 32, lowered to a power of two
// no larger than the bucket's top), U chunks per iteration for wide buckets in reduction passes
// (independent accumulators; the final pass takes one: unrolled, it was no faster and took 6%
// more compile time), then single chunks, then one masked chunk for the remainder (none when the
// extent is static and W divides it). Reductions combine their accumulators and lanes in a fixed
// tree: the same inputs give the same bits on every call and any split of rows over threads, not
// the bits of a sequential sum.
//
// Ops and levels (the interpreter's semantics, with f32 in place of double where noted):
//   scalar level (double): every op; exp, log, tanh and pow call libm.
//   row and element level (f32): every op; exp, log, tanh, sigmoid, silu inline (llvm_math.h);
//     sqrt exact, rsqrt as 1 / sqrt (exact division); pow calls powf (per lane: slow, but exact
//     to libm), pow(x, 2) is x * x.
//   loads convert f32, f64, i32, i64 and bool to f32 (to double at scalar level); other buffer
//     types throw CompileError. Stores write f32 (KernelIR::check requires f32 outputs).
// Throws InvalidArgument for an IR that fails KernelIR::check(), CompileError for a bucket that
// cannot hold the extent or a buffer type it cannot load.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jit/bucket.h"
#include "jit/cpu/target.h"
#include "jit/kernel_ir/kernel_ir.h"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace disc::jit {

std::unique_ptr<llvm::Module> emit_kernel(const KernelIR& k, const Bucket& b, const Target& t,
                                          llvm::LLVMContext& ctx, const std::string& name);

// Part of every kernel cache key: bump it when the code emitted for the same kernel IR and bucket
// changes (its loops, its math, what run_kernel passes it), so that objects cached on disk by an
// older emitter miss instead of running.
inline constexpr int kEmitterRevision = 2;

// The element-level values the code keeps in a scratch row rather than computing them again in a
// later pass: expensive ones (is_expensive) that several passes read, like softmax's exp, which
// the sum pass computes and the final pass reads back. Same values, so the same bits.
std::vector<int> cached_values(const KernelIR& k);

// What run_kernel passes after the kernel's own buffers: buffers[k.buffers()] the row totals
// (double, indexed by instruction; row_totals()), buffers[k.buffers() + 1] a scratch of
// cached_values(k).size() * cols floats that no other call uses at the same time.
inline int totals_slot(const KernelIR& k) {
  return k.buffers();
}
inline int scratch_slot(const KernelIR& k) {
  return k.buffers() + 1;
}

// The vector width and unrolling the emitter chooses for a bucket (exposed for tests and dumps).
struct LoopShape {
  int lanes = 1;   // W: f32 lanes per chunk
  int unroll = 1;  // U: chunks per iteration of a reduction pass's main loop
};
LoopShape loop_shape(const Bucket& b, const Target& t);

}  // namespace disc::jit
