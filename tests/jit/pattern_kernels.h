// Hand-built kernel IRs for the fusion patterns the emitter must handle (issue 6's list): a
// broadcast chain, softmax, RMSNorm, cross-entropy, AdamW, compares. Shared by the emitter and
// kernel cache tests; with_half_buffers makes their 16-bit variants.
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

#include "jit/bucket.h"
#include "jit/kernel_ir/kernel_ir.h"

namespace disc::jit {

// A bucket that admits every extent: the kernels compiled for it take no constant extent.
inline constexpr Bucket kAnyExtent{0, std::numeric_limits<int64_t>::max()};

// Elementwise with broadcasts of all four accesses and loads of i32 and f64:
// y = -min(max((x * w + b) * s - x / (|w| + 1), d), i)   with b per row, w and d per column,
// s a scalar, i an i32 tensor.
inline constexpr const char* kBroadcasts =
    R"(kernel inputs=6 outputs=1 space=0 types=f32,f32,f32,f32,i32,f64,f32
%0 = load 0 full
%1 = load 1 row
%2 = load 2 col
%3 = load 3 scalar
%4 = load 4 full
%5 = load 5 col
%6 = mul %0 %2
%7 = add %6 %1
%8 = mul %7 %3
%9 = abs %2
%10 = const 1
%11 = add %9 %10
%12 = div %0 %11
%13 = sub %8 %12
%14 = max %13 %5
%15 = min %14 %4
%16 = neg %15
store 6 full %16)";

inline constexpr const char* kSoftmax = R"(kernel inputs=1 outputs=1 space=0 types=f32,f32
%0 = load 0 full
%1 = reduce_max %0
%2 = sub %0 %1
%3 = exp %2
%4 = reduce_sum %3
%5 = div %3 %4
store 1 full %5)";

// RMSNorm after a residual add: h = x + r; y = h * rsqrt(sum(h^2) * inv_cols + 1e-5) * w;
// stores h, y and the row's rsqrt (a row store of a value computed from a reduction).
inline constexpr const char* kRmsNorm =
    R"(kernel inputs=4 outputs=3 space=0 types=f32,f32,f32,f32,f32,f32,f32
%0 = load 0 full
%1 = load 1 full
%2 = add %0 %1
%3 = mul %2 %2
%4 = reduce_sum %3
%5 = load 3 scalar
%6 = mul %4 %5
%7 = const 1.0000000000000001e-05
%8 = add %6 %7
%9 = rsqrt %8
%10 = load 2 col
%11 = mul %2 %9
%12 = mul %11 %10
store 4 full %2
store 5 full %12
store 6 row %9)";

// RMSNorm's backward with inv = rsqrt(sum(x^2) * inv_cols + 1e-5):
// dx = inv * w * dy - inv^3 * inv_cols * sum(dy * w * x) * x, and the weight's gradient
// dw = sum over rows of dy * x * inv, a column sum (col store).
inline constexpr const char* kRmsNormGrad =
    R"(kernel inputs=4 outputs=2 space=0 types=f32,f32,f32,f32,f32,f32
%0 = load 0 full
%1 = load 1 col
%2 = load 2 full
%3 = load 3 scalar
%4 = mul %0 %0
%5 = reduce_sum %4
%6 = mul %5 %3
%7 = const 1.0000000000000001e-05
%8 = add %6 %7
%9 = rsqrt %8
%10 = mul %2 %1
%11 = mul %10 %0
%12 = reduce_sum %11
%13 = mul %9 %9
%14 = mul %13 %9
%15 = mul %14 %3
%16 = mul %15 %12
%17 = mul %10 %9
%18 = mul %16 %0
%19 = sub %17 %18
%20 = mul %2 %0
%21 = mul %20 %9
store 4 full %19
store 5 col %21)";

// Cross-entropy's mean loss as lowering.cc writes it: the count of counted labels (not -100) and
// of labels outside the classes (here < 0 or >= 1e9: none, with labels drawn in [0, cols)) are
// totals over rows taken first; each counted row's loss times 1 / count is summed into a scalar.
inline constexpr const char* kCrossEntropyMean =
    R"(kernel inputs=2 outputs=1 space=0 types=f32,i64,f32
%0 = load 0 full
%1 = load 1 row
%2 = const 0
%3 = const 1
%4 = const -100
%5 = ne %1 %4
%6 = select %5 %3 %2
%7 = sum_rows %6
%8 = lt %1 %2
%9 = const 1000000000
%10 = ge %1 %9
%11 = select %10 %3 %2
%12 = select %8 %3 %11
%13 = select %5 %12 %2
%14 = sum_rows %13
%15 = check_labels %14
%16 = reduce_max %0
%17 = sub %0 %16
%18 = exp %17
%19 = reduce_sum %18
%20 = eq %7 %2
%21 = col_index
%22 = eq %21 %1
%23 = select %22 %17 %2
%24 = reduce_sum %23
%25 = log %19
%26 = sub %25 %24
%27 = select %5 %26 %2
%28 = div %3 %7
%29 = select %20 %2 %28
%30 = mul %27 %29
store 2 scalar %30)";

// Cross-entropy over logits with an i64 label per row: loss = log(sum(exp(x - max))) -
// (x[label] - max) as a row store, and its gradient softmax - one_hot(label) (col_index == label).
inline constexpr const char* kCrossEntropy =
    R"(kernel inputs=2 outputs=2 space=0 types=f32,i64,f32,f32
%0 = load 0 full
%1 = load 1 row
%2 = reduce_max %0
%3 = sub %0 %2
%4 = exp %3
%5 = reduce_sum %4
%6 = log %5
%7 = col_index
%8 = eq %7 %1
%9 = const 0
%10 = select %8 %3 %9
%11 = reduce_sum %10
%12 = sub %6 %11
%13 = div %4 %5
%14 = const 1
%15 = select %8 %14 %9
%16 = sub %13 %15
store 2 row %12
store 3 full %16)";

// AdamW: bias corrections 1 - beta^step from an i64 step at scalar level (pow in double), the
// moments and the parameter per element, the step size lr / (1 - beta1^step) as a scalar store.
inline constexpr const char* kAdamW =
    R"(kernel inputs=6 outputs=4 space=0 types=f32,f32,f32,f32,f32,i64,f32,f32,f32,f32
%0 = load 0 full
%1 = load 1 full
%2 = load 2 full
%3 = load 3 full
%4 = load 4 scalar
%5 = load 5 scalar
%6 = const 0.90000000000000002
%7 = const 0.999
%8 = const 1
%9 = pow %6 %5
%10 = sub %8 %9
%11 = pow %7 %5
%12 = sub %8 %11
%13 = div %4 %10
%14 = sqrt %12
%15 = mul %6 %2
%16 = sub %8 %6
%17 = mul %16 %1
%18 = add %15 %17
%19 = mul %7 %3
%20 = sub %8 %7
%21 = mul %1 %1
%22 = mul %20 %21
%23 = add %19 %22
%24 = sqrt %23
%25 = div %24 %14
%26 = const 1e-08
%27 = add %25 %26
%28 = div %18 %27
%29 = mul %13 %28
%30 = const 0.01
%31 = mul %4 %30
%32 = mul %31 %0
%33 = add %29 %32
%34 = sub %0 %33
store 6 full %34
store 7 full %18
store 8 full %23
store 9 scalar %13)";

// Every compare, through select: a and b are small integers (i32, per element and per column)
// so that equal values are common; a bool tensor and a one-hot on the column index too.
inline constexpr const char* kCompares =
    R"(kernel inputs=4 outputs=7 space=0 types=i32,i32,i64,bool,f32,f32,f32,f32,f32,f32,f32
%0 = load 0 full
%1 = load 1 col
%2 = load 2 row
%3 = load 3 full
%4 = col_index
%5 = eq %4 %2
%6 = select %5 %0 %1
%7 = ne %0 %1
%8 = neg %1
%9 = select %7 %0 %8
%10 = lt %0 %1
%11 = select %10 %0 %8
%12 = le %0 %1
%13 = select %12 %0 %8
%14 = gt %0 %1
%15 = select %14 %0 %8
%16 = ge %0 %1
%17 = select %16 %0 %8
%18 = const 0.5
%19 = gt %3 %18
%20 = select %19 %0 %8
store 4 full %6
store 5 full %9
store 6 full %11
store 7 full %13
store 8 full %15
store 9 full %17
store 10 full %20)";

// A graph, not a kernel: SwiGLU on bf16 operands with an f32 residual and an f16 result, which
// fusion makes one kernel that loads, stores and rounds 16-bit values.
inline constexpr const char* kBf16SwiGluGraph = R"(graph @g {
  sym R in [1, 300]
  input %gate : bf16[R, 64]
  input %up : bf16[R, 64]
  input %x : f32[R, 64]
  %s = silu(%gate) : bf16[R, 64]
  %a = mul(%s, %up) : bf16[R, 64]
  %a32 = cast(%a) {dtype = f32} : f32[R, 64]
  %y = add(%x, %a32) : f32[R, 64]
  %h = cast(%y) {dtype = f16} : f16[R, 64]
  output y = %y
  output h = %h
}
)";

// k with its f32 buffers of type `low` (bf16 or f16), but those summed over rows (f32 only): the
// 16-bit variant of a pattern, whose loads widen and whose stores round.
inline KernelIR with_half_buffers(KernelIR k, DType low) {
  const std::vector<int> sums = k.summed_stores();
  for (int b = 0; b < k.buffers(); ++b)
    if (k.types[b] == DType::kF32 && std::find(sums.begin(), sums.end(), b) == sums.end())
      k.types[b] = low;
  return k;
}

}  // namespace disc::jit
