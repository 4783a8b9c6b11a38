// The kernel IR: one fused group of memory-bound ops as a loop nest over a 2-D iteration space,
// target-independent, so that the LLVM emitter (CPU) and later a CUDA/HIP C emitter read the same
// thing. The space is the shape of one buffer (`space`), seen as `rows` x `cols`: cols is its last
// dim, rows the product of the others. The outer loop runs over rows (in parallel); each row runs
// its reductions as passes over the columns, then one final pass computes and stores the rest
// (FusionStitching's stitch: a reduction's row result feeds elementwise work in the same kernel).
//
// Buffers are the kernel's operands, inputs first, then outputs. Each load or store names how it
// indexes its buffer at (row, col):
//   full    buffer[row * cols + col]   a tensor of the space's shape
//   row     buffer[row]                one value per row (a reduction's result, a label)
//   col     buffer[col]                one value per column (a norm's weight)
//   scalar  buffer[0]                  one value (the learning rate, a clipping factor)
//
// Instructions are in SSA order (arguments are earlier instructions). Each has a level, derived
// from its arguments: scalar (computed once per call, in double), row (once per row, in float) or
// element (per column, in float). A reduction turns an element value into a row value. Compares
// give booleans that only `select` reads. A store writes its value at every index its access
// covers: a row or scalar value stored with full access fills the row (or the tensor). A store
// with col access is a column reduction: buffer[col] = the sum of the value over all rows (a norm
// weight's gradient); a row value stored with scalar access is summed over all rows the same way
// (a mean loss). Rows are summed in blocks of kSumBlockRows, in order within a block, and the
// blocks' sums in order: the result does not depend on how rows are spread over threads.
//
// Totals over rows that row work needs (a cross-entropy's count of counted labels) come first:
// `sum_rows` sums a row value that only loads and arithmetic make (no reduction) over every row,
// in double, before any row runs, and is a scalar-level value. `check_labels` fails the kernel
// (InvalidArgument) when its scalar argument, a count of labels outside the classes, is not 0.
//
//   softmax over rows, as text (one instruction per line; `;` may separate them too):
//     kernel inputs=1 outputs=1 space=0 types=f32,f32
//     %0 = load 0 full
//     %1 = reduce_max %0
//     %2 = sub %0 %1
//     %3 = exp %2
//     %4 = reduce_sum %3
//     %5 = div %3 %4
//     store 1 full %5
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "ir/kernel_lowering.h"
#include "ir/tensor_ref.h"

namespace disc::jit {

// The instruction set and the accesses are the ops' lowerings' vocabulary (ir/kernel_lowering.h).
using ir::Access;
using ir::KOp;
enum class Level : uint8_t { kScalar, kRow, kElement };

std::string_view access_name(Access a);  // "full", "row", "col", "scalar"

std::string_view kop_name(KOp op);  // "load", "add", "reduce_sum", ...
// The op named `name`, or false when no KOp has that name.
bool kop_from_name(std::string_view name, KOp& op);
int kop_arity(KOp op);  // number of instruction arguments (load and const: 0)
bool is_compare(KOp op);
bool names_buffer(KOp op);  // load, load_at and store: they have a buffer and an access
bool is_expensive(KOp op);  // transcendental, root, power or division: worth not recomputing
bool is_reduction(KOp op);

struct Instr {
  KOp op = KOp::kConst;
  std::vector<int> args;          // indices of earlier instructions
  int buffer = -1;                // load, store
  Access access = Access::kFull;  // load, store
  double value = 0;               // const
};

// 16: a GPU runs a block's rows one after another (each row's reductions synchronise the block),
// so a [tokens, 512] column sum spreads over tokens / 16 blocks; 64 left a norm weight's gradient
// on a fraction of an H200's 132 multiprocessors for 0.23 ms.
inline constexpr int64_t kSumBlockRows = 16;

struct KernelIR {
  int inputs = 0;
  int outputs = 0;
  std::vector<DType> types;  // per buffer, inputs then outputs
  int space = 0;             // the buffer whose shape is the iteration space
  std::vector<Instr> code;

  int buffers() const { return inputs + outputs; }
  // The level of each instruction (see above).
  std::vector<Level> levels() const;
  // Throws InvalidArgument naming the instruction when the IR is malformed: an argument that is
  // not earlier, a wrong arity, a buffer out of range, a store to an input or a load from an
  // output, a store of a value of a higher level than its access (an element value with row
  // access), an output stored twice or never, a bool where a number is needed.
  void check() const;
  // The inputs that output `output` (0 for the first) may be written over (the fused node then
  // runs in place when such an operand dies there): of the output's type and read only with full
  // access, so each element is read at its own index, before the final pass stores that index;
  // and, with several outputs, read only before the output's store in the code (the interpreter
  // runs a row instruction by instruction). Empty for an output not stored with full access.
  std::vector<int> in_place_inputs(int output = 0) const;
  // in_place_inputs of every output, in one pass over the code.
  std::vector<std::vector<int>> in_place_table() const;
  // The text form above (lines joined by "\n"); parse() reads it back.
  std::string str() const;
  static KernelIR parse(std::string_view text);
  // A stable hash of str(), for cache keys.
  uint64_t fingerprint() const;
  // How often each element-level instruction is evaluated per row: once per pass (a reduction's,
  // or the final one) whose tree reads it.
  std::vector<int> evaluations() const;
  // The output buffers whose store sums over rows (col access, or scalar access of a row
  // value), in order.
  std::vector<int> summed_stores() const;
  // True when the kernel has sum_rows instructions (run_kernel passes their totals).
  bool has_row_totals() const;
};

// The iteration space of a kernel over concrete buffers.
struct Space {
  int64_t rows = 1, cols = 1;
};
// Reads rows and cols from buffers[k.space] and checks every buffer against its accesses (full:
// rows * cols elements, row: rows, col: cols, scalar: 1) and its type; throws ShapeError saying
// which buffer does not fit.
Space space_of(const KernelIR& k, const std::vector<ir::TensorRef>& buffers);

// What check_labels fails with: `count` labels outside [0, cols). Every way of running a kernel
// (the interpreter, the CPU and GPU kernels) throws this InvalidArgument.
[[noreturn]] void throw_bad_labels(int64_t count, int64_t cols);

}  // namespace disc::jit
