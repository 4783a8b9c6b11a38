// LLVM IR for the transcendental functions of the kernel IR in f32, inline and vectorisable:
// exp, log, tanh, sigmoid and silu on a `float` or a `<N x float>` value. LLVM's own llvm.exp on a
// vector becomes one expf call per lane; these are a few dozen vector instructions instead.
//
//   llvm::Value* y = jit::emit_exp(builder, x);  // x: float or <16 x float>; y: the same type
//
// Accuracy against the exact result, measured over the f32 range in tests/jit/llvm_math_test.cc:
// exp and log within 2 ulp (Cody-Waite range reduction and Cephes' minimax polynomials), tanh,
// sigmoid and silu within 4 ulp. Special values follow libm: exp(-inf) = 0, exp(+inf) = +inf,
// exp underflows through the subnormals to 0 and overflows to +inf; log(0) = -inf, log(x < 0) =
// NaN, log(+inf) = +inf, subnormal inputs are exact; NaN in gives NaN out everywhere.
//
// The polynomials use llvm.fmuladd: fused where the target has FMA, so results depend on the
// target (which every kernel cache key names), never on the call.
#pragma once

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace disc::jit {

llvm::Value* emit_exp(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_log(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_tanh(llvm::IRBuilderBase& b, llvm::Value* x);
// 1 / (1 + exp(-x)), computed from exp(-|x|) so that neither tail loses precision.
llvm::Value* emit_sigmoid(llvm::IRBuilderBase& b, llvm::Value* x);
// x * sigmoid(x), rounded once into the subnormals (x < -87).
llvm::Value* emit_silu(llvm::IRBuilderBase& b, llvm::Value* x);

}  // namespace disc::jit
