#include "jit/cpu/llvm_math.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

#include <initializer_list>
#include <limits>

#include "jit/cpu/target.h"

namespace disc::jit {
namespace {

using llvm::Value;

// A float constant of x's type (splat for vectors).
Value* c(Value* like, double v) {
  return llvm::ConstantFP::get(like->getType(), v);
}

// The i32 (vector) type with x's shape.
llvm::Type* int_type(llvm::IRBuilderBase& b, Value* x) {
  return x->getType()->getWithNewType(b.getInt32Ty());
}
Value* ci(llvm::IRBuilderBase& b, Value* like, int32_t v) {
  return llvm::ConstantInt::getSigned(int_type(b, like), v);
}

// Horner's scheme from the highest coefficient down: ((c0 * x + c1) * x + c2) ...
Value* horner(llvm::IRBuilderBase& b, Value* x, std::initializer_list<double> coefficients) {
  Value* p = nullptr;
  for (double k : coefficients)
    p = p ? b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {p, x, c(x, k)}) : c(x, k);
  return p;
}

// (a > b) ? a : b and (a < b) ? a : b: one max/min instruction on x86, and a NaN in `a` gives `b`.
Value* max_of(llvm::IRBuilderBase& b, Value* x, Value* y) {
  return b.CreateSelect(b.CreateFCmpOGT(x, y), x, y);
}
Value* min_of(llvm::IRBuilderBase& b, Value* x, Value* y) {
  return b.CreateSelect(b.CreateFCmpOLT(x, y), x, y);
}

// 2^n for integer n in [-126, 127], built from the exponent bits.
Value* pow2(llvm::IRBuilderBase& b, Value* n, Value* like) {
  Value* bits = b.CreateShl(b.CreateAdd(n, ci(b, like, 127)), ci(b, like, 23));
  return b.CreateBitCast(bits, like->getType());
}

// exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in two steps (Cody-Waite: n * kLn2Hi
// is exact), exp(r) on |r| <= ln(2)/2 by Cephes' expf polynomial. 2^n comes as two factors, so a
// subnormal result is rounded once, from a normal intermediate, and a factor (silu's x) can be
// applied before that rounding. x is clamped to [lower, 89]: exp(89) overflows; `lower` >= -150.
struct ExpParts {
  Value* y;       // exp(r), in [0.7, 1.5)
  Value* scale1;  // 2^n = scale1 * scale2, each a normal float
  Value* scale2;
};

ExpParts exp_parts(llvm::IRBuilderBase& b, Value* x, double lower) {
  constexpr double kLog2e = 1.44269504088896341, kLn2Hi = 0.693359375, kLn2Lo = -2.12194440e-4;
  // A NaN becomes `lower` here (compare false); callers put it back.
  Value* xc = min_of(b, max_of(b, x, c(x, lower)), c(x, 89.0));
  // Round to nearest by adding and subtracting 1.5 * 2^23 (no fast-math flags: not folded).
  Value* magic = c(x, 12582912.0);
  Value* nf = b.CreateFSub(b.CreateFAdd(b.CreateFMul(xc, c(x, kLog2e)), magic), magic);
  Value* r = b.CreateFSub(xc, b.CreateFMul(nf, c(x, kLn2Hi)));
  r = b.CreateFSub(r, b.CreateFMul(nf, c(x, kLn2Lo)));
  Value* p = horner(b, r,
                    {1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                     1.6666665459e-1, 5.0000001201e-1});
  Value* r2 = b.CreateFMul(r, r);
  Value* y = b.CreateFAdd(b.CreateFAdd(b.CreateFMul(p, r2), r), c(x, 1.0));
  Value* n = b.CreateFPToSI(nf, int_type(b, x));  // in [-217, 128]
  Value* n1 = b.CreateAShr(n, ci(b, x, 1));
  return {y, pow2(b, n1, x), pow2(b, b.CreateSub(n, n1), x)};
}

Value* scaled(llvm::IRBuilderBase& b, Value* y, const ExpParts& e) {
  return b.CreateFMul(b.CreateFMul(y, e.scale1), e.scale2);
}

// exp on 16 lanes with AVX-512: the same reduction and polynomial, with n = roundeven(x log2 e)
// (one vrndscaleps) and 2^n applied by vscalefps, which rounds a subnormal result once and gives
// 0 and +inf beyond the range: 17 instructions where the generic path takes 28.
Value* exp_avx512(llvm::IRBuilderBase& b, Value* x) {
  constexpr double kLog2e = 1.44269504088896341, kLn2Hi = 0.693359375, kLn2Lo = -2.12194440e-4;
  Value* xc = min_of(b, max_of(b, x, c(x, -104.0)), c(x, 89.0));  // n stays finite
  Value* n = b.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, b.CreateFMul(xc, c(x, kLog2e)));
  auto fma = [&](Value* p, Value* q, Value* r) {
    return b.CreateIntrinsic(llvm::Intrinsic::fma, {x->getType()}, {p, q, r});
  };
  Value* r = fma(n, c(x, -kLn2Hi), xc);
  r = fma(n, c(x, -kLn2Lo), r);
  Value* p = horner(b, r,
                    {1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                     1.6666665459e-1, 5.0000001201e-1});
  Value* y = b.CreateFAdd(fma(p, b.CreateFMul(r, r), r), c(x, 1.0));
  return b.CreateIntrinsic(
      llvm::Intrinsic::x86_avx512_mask_scalef_ps_512, {},
      {y, n, llvm::UndefValue::get(x->getType()), b.getInt16(0xffff), b.getInt32(4)});
}

bool is_avx512_vector(Value* x) {
  auto* v = llvm::dyn_cast<llvm::FixedVectorType>(x->getType());
  return v && v->getNumElements() == 16 && v->getElementType()->isFloatTy() &&
         host_target().vector_bits == 512;
}

}  // namespace

// Below -104, exp rounds to 0.
Value* emit_exp(llvm::IRBuilderBase& b, Value* x) {
  if (is_avx512_vector(x)) return b.CreateSelect(b.CreateFCmpUNO(x, x), x, exp_avx512(b, x));
  const ExpParts e = exp_parts(b, x, -104.0);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, scaled(b, e.y, e));
}

// log(x) = e ln 2 + log(m), x = 2^e m with m in [sqrt(1/2), sqrt(2)), log(1 + f) by Cephes' logf
// polynomial; e ln 2 added in two parts (Cody-Waite). Subnormals are scaled by 2^23 first.
Value* emit_log(llvm::IRBuilderBase& b, Value* x) {
  constexpr double kLn2Hi = 0.693359375, kLn2Lo = -2.12194440e-4;
  llvm::Type* ity = int_type(b, x);
  Value* subnormal = b.CreateFCmpOLT(x, c(x, std::numeric_limits<float>::min()));
  Value* xs = b.CreateSelect(subnormal, b.CreateFMul(x, c(x, 8388608.0)), x);
  Value* bits = b.CreateBitCast(xs, ity);
  Value* e =
      b.CreateSub(b.CreateAnd(b.CreateLShr(bits, ci(b, x, 23)), ci(b, x, 0xff)), ci(b, x, 126));
  e = b.CreateSub(e, b.CreateSelect(subnormal, ci(b, x, 23), ci(b, x, 0)));
  // The mantissa as a float in [0.5, 1).
  Value* m = b.CreateBitCast(
      b.CreateOr(b.CreateAnd(bits, ci(b, x, 0x007fffff)), ci(b, x, 0x3f000000)), x->getType());
  Value* below = b.CreateFCmpOLT(m, c(x, 0.707106781186547524));
  e = b.CreateSub(e, b.CreateZExt(below, ity));
  Value* f = b.CreateFSub(b.CreateSelect(below, b.CreateFAdd(m, m), m), c(x, 1.0));
  Value* ef = b.CreateSIToFP(e, x->getType());
  Value* z = b.CreateFMul(f, f);
  Value* p =
      horner(b, f,
             {7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
              -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1});
  Value* y = b.CreateFMul(b.CreateFMul(p, f), z);
  y = b.CreateFAdd(y, b.CreateFMul(ef, c(x, kLn2Lo)));
  y = b.CreateFSub(y, b.CreateFMul(z, c(x, 0.5)));
  Value* r = b.CreateFAdd(b.CreateFAdd(f, y), b.CreateFMul(ef, c(x, kLn2Hi)));
  // Outside (0, inf): 0 -> -inf, negative or NaN -> NaN, +inf -> +inf.
  const double inf = std::numeric_limits<double>::infinity();
  Value* edge = b.CreateSelect(b.CreateFCmpOEQ(x, c(x, 0.0)), c(x, -inf),
                               c(x, std::numeric_limits<double>::quiet_NaN()));
  r = b.CreateSelect(b.CreateFCmpOGT(x, c(x, 0.0)), r, edge);
  return b.CreateSelect(b.CreateFCmpOEQ(x, c(x, inf)), x, r);
}

// Cephes' tanhf: an odd polynomial below |x| = 0.625, where 1 - 2 / (exp(2|x|) + 1) would cancel;
// above, that formula with the sign of x (exp overflowing to +inf gives exactly 1).
Value* emit_tanh(llvm::IRBuilderBase& b, Value* x) {
  Value* ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  Value* z = b.CreateFMul(x, x);
  Value* p = horner(b, z,
                    {-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
                     -3.33332819422e-1});
  Value* small = b.CreateFAdd(b.CreateFMul(b.CreateFMul(p, z), x), x);
  Value* e = emit_exp(b, b.CreateFAdd(ax, ax));
  Value* big = b.CreateFSub(c(x, 1.0), b.CreateFDiv(c(x, 2.0), b.CreateFAdd(e, c(x, 1.0))));
  big = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, big, x);
  return b.CreateSelect(b.CreateFCmpOLT(ax, c(x, 0.625)), small, big);
}

// With e = exp(-|x|) in (0, 1]: 1 / (1 + e) for x >= 0 and e / (1 + e) below, so exp never
// overflows and the negative tail keeps its relative precision.
Value* emit_sigmoid(llvm::IRBuilderBase& b, Value* x) {
  Value* e = emit_exp(b, b.CreateFNeg(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x)));
  Value* num = b.CreateSelect(b.CreateFCmpOGE(x, c(x, 0.0)), c(x, 1.0), e);
  return b.CreateFDiv(num, b.CreateFAdd(c(x, 1.0), e));
}

// x / (1 + e) for x >= 0 and x e / (1 + e) below, with e = exp(-|x|), x e rounded once (so
// results down to the subnormals keep their precision: exp runs down to -115, where x e
// underflows). Beyond, x * 0: -0, or NaN for -inf, as x / (1 + exp(-x)) gives.
Value* emit_silu(llvm::IRBuilderBase& b, Value* x) {
  constexpr double kLower = -115.0;
  const ExpParts p =
      exp_parts(b, b.CreateFNeg(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x)), kLower);
  Value* e = scaled(b, p.y, p);
  Value* xe = scaled(b, b.CreateFMul(x, p.y), p);
  xe = b.CreateSelect(b.CreateFCmpOLT(x, c(x, kLower)), b.CreateFMul(x, c(x, 0.0)), xe);
  Value* num = b.CreateSelect(b.CreateFCmpOGE(x, c(x, 0.0)), x, xe);
  return b.CreateFDiv(num, b.CreateFAdd(c(x, 1.0), e));
}

}  // namespace disc::jit
