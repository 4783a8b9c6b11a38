// Elementwise ops: unary math, binary arithmetic, comparisons, select and cast. Operands of a
// binary op have equal shapes (broadcasting is an explicit `broadcast` node), which is what lets
// the fusion planner treat every elementwise op alike.
#include <cmath>
#include <numbers>
#include <optional>

#include "ir/autodiff.h"
#include "ir/op_registry.h"
#include "ir/ops/lowerings.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

// y[i] = f(x[i]) for f a generic lambda; ints only where allow_int. In a fused kernel, instruction
// `kop` (none: the op is not fused).
template <typename F>
OpDef unary(const std::string& name, std::optional<KOp> kop, const std::string& summary, int flops,
            bool allow_int, F f, GradRule grad = {}) {
  OpDef d{.name = name, .category = OpCategory::kElementwise, .summary = summary};
  if (kop) d.lowering = elementwise_lowering(*kop);
  d.flops_per_element = flops;
  d.overwritable = {0};
  d.infer = [allow_int](InferContext& ctx) {
    ctx.require_float(0, allow_int);
    return std::vector{ctx.in(0)};
  };
  d.reference = [allow_int, f](const KernelArgs& a) {
    auto body = [&](auto t) {
      using T = decltype(t);
      const T* x = a.in[0].as<T>();
      T* y = a.out[0].as<T>();
      for (int64_t i = 0, n = a.in[0].numel(); i < n; ++i) y[i] = static_cast<T>(f(x[i]));
    };
    allow_int ? dispatch_number(a.in[0].dtype, a.op, body)
              : dispatch_float(a.in[0].dtype, a.op, body);
  };
  d.grad = std::move(grad);
  return d;
}

// out[i] = f(a[i], b[i]); comparisons write bool. In a fused kernel, instruction `kop`.
template <typename F>
OpDef binary(const std::string& name, KOp kop, const std::string& summary, bool comparison, F f,
             GradRule grad = {}) {
  OpDef d{.name = name, .category = OpCategory::kElementwise, .summary = summary};
  d.lowering = elementwise_lowering(kop);
  d.min_operands = d.max_operands = 2;
  d.overwritable = {0, 1};
  d.infer = [comparison](InferContext& ctx) {
    ctx.require_float(0, /*allow_int=*/true);
    same_dtype(ctx, 0, 1);
    auto shape = unify_shapes(ctx, 0, 1);
    return std::vector{TensorType{comparison ? DType::kBool : ctx.in(0).dtype, shape}};
  };
  d.reference = [comparison, f](const KernelArgs& a) {
    dispatch_number(a.in[0].dtype, a.op, [&](auto t) {
      using T = decltype(t);
      const T *x = a.in[0].as<T>(), *y = a.in[1].as<T>();
      int64_t n = a.in[0].numel();
      if (comparison) {
        bool* out = a.out[0].as<bool>();
        for (int64_t i = 0; i < n; ++i) out[i] = f(x[i], y[i]);
      } else {
        T* out = a.out[0].as<T>();
        for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(f(x[i], y[i]));
      }
    });
  };
  d.grad = std::move(grad);
  return d;
}

template <typename T>
T gelu(T x, bool tanh_form) {
  if (tanh_form) {
    const T k = static_cast<T>(std::sqrt(2.0 / std::numbers::pi));
    return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
  }
  return T(0.5) * x * (T(1) + std::erf(x / static_cast<T>(std::numbers::sqrt2)));
}

template <typename T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// Reads element i of any dtype as double, and writes a double as any dtype (cast's kernel).
double load_as_double(const TensorRef& t, int64_t i) {
  switch (t.dtype) {
    case DType::kF32:
      return t.as<float>()[i];
    case DType::kF64:
      return t.as<double>()[i];
    case DType::kI32:
      return t.as<int32_t>()[i];
    case DType::kI64:
      return static_cast<double>(t.as<int64_t>()[i]);
    case DType::kBool:
      return t.as<bool>()[i] ? 1 : 0;
    default:
      throw InvalidArgument("reference kernel of `cast` does not support " +
                            std::string(dtype_name(t.dtype)) + " yet");
  }
}

void store_double(const TensorRef& t, int64_t i, double v) {
  switch (t.dtype) {
    case DType::kF32:
      t.as<float>()[i] = static_cast<float>(v);
      return;
    case DType::kF64:
      t.as<double>()[i] = v;
      return;
    case DType::kI32:
      t.as<int32_t>()[i] = static_cast<int32_t>(v);
      return;
    case DType::kI64:
      t.as<int64_t>()[i] = static_cast<int64_t>(v);
      return;
    case DType::kBool:
      t.as<bool>()[i] = v != 0;
      return;
    default:
      throw InvalidArgument("reference kernel of `cast` does not support " +
                            std::string(dtype_name(t.dtype)) + " yet");
  }
}

void cast_kernel(const KernelArgs& a) {
  // i64 <-> i64 must not round-trip through double (values above 2^53).
  if (a.in[0].dtype == DType::kI64 && a.out[0].dtype == DType::kI64) {
    std::copy_n(a.in[0].as<int64_t>(), a.in[0].numel(), a.out[0].as<int64_t>());
    return;
  }
  for (int64_t i = 0, n = a.in[0].numel(); i < n; ++i)
    store_double(a.out[0], i, load_as_double(a.in[0], i));
}

// Moves elements without reading them as numbers, so it takes every dtype as it is: 16-bit
// floats unwidened, and an 8-bit optimizer state's codes (the f16 step's skip guard selects them).
template <typename Bits>
void select_bits(const KernelArgs& a) {
  const bool* c = a.in[0].as<bool>();
  const Bits *x = a.in[1].as<Bits>(), *y = a.in[2].as<Bits>();
  Bits* out = a.out[0].as<Bits>();
  for (int64_t i = 0, n = a.out[0].numel(); i < n; ++i) out[i] = c[i] ? x[i] : y[i];
}

void select_kernel(const KernelArgs& a) {
  switch (dtype_size(a.in[1].dtype)) {
    case 1:
      return select_bits<uint8_t>(a);
    case 2:
      return select_bits<uint16_t>(a);
    case 4:
      return select_bits<uint32_t>(a);
    default:
      return select_bits<uint64_t>(a);
  }
}

// Gradient rules, each building d(operand) from dy with other ops. `G` is the context.
using G = GradContext;
std::vector<Value*> grad_of(std::initializer_list<Value*> v) {
  return v;
}

Value* zeros(G& c, int operand) {
  return c.full_like(c.x(operand), 0.0);
}

// dy * f'(x) where f'(x) is built from the operand and result.
GradRule chain(std::function<Value*(G&)> derivative) {
  return [derivative](G& c) { return grad_of({c.add("mul", {c.dy[0], derivative(c)})}); };
}

// 1 - v (elementwise).
Value* one_minus(G& c, Value* v) {
  return c.add("sub", {c.full_like(v, 1.0), v});
}

// Routes dy to operand 0 where `mask` holds and to operand 1 elsewhere.
std::vector<Value*> route(G& c, Value* mask) {
  Value* z = zeros(c, 0);
  return {c.add("select", {mask, c.dy[0], z}), c.add("select", {mask, z, c.dy[0]})};
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  r.add(unary(
      "neg", KOp::kNeg, "-x", 1, true, [](auto x) { return -x; },
      [](G& c) { return grad_of({c.add("neg", {c.dy[0]})}); }));
  r.add(unary(
      "abs", KOp::kAbs, "|x|", 1, true, [](auto x) { return x < 0 ? -x : x; },
      [](G& c) {
        Value* pos = c.add("ge", {c.x(0), zeros(c, 0)});
        return grad_of({c.add("select", {pos, c.dy[0], c.add("neg", {c.dy[0]})})});
      }));
  r.add(unary(
      "relu", KOp::kRelu, "max(x, 0)", 1, true, [](auto x) { return x > 0 ? x : decltype(x)(0); },
      [](G& c) {
        Value* pos = c.add("gt", {c.x(0), zeros(c, 0)});
        return grad_of({c.add("select", {pos, c.dy[0], zeros(c, 0)})});
      }));
  r.add(unary(
      "exp", KOp::kExp, "e^x", 4, false, [](auto x) { return std::exp(x); },
      chain([](G& c) { return c.y(); })));
  r.add(unary(
      "log", KOp::kLog, "natural logarithm", 4, false, [](auto x) { return std::log(x); },
      [](G& c) { return grad_of({c.add("div", {c.dy[0], c.x(0)})}); }));
  r.add(unary(
      "sqrt", KOp::kSqrt, "square root", 4, false, [](auto x) { return std::sqrt(x); },
      [](G& c) { return grad_of({c.add("div", {c.dy[0], c.add("add", {c.y(), c.y()})})}); }));
  r.add(unary(
      "rsqrt", KOp::kRsqrt, "1 / sqrt(x)", 4, false,
      [](auto x) { return decltype(x)(1) / std::sqrt(x); }, chain([](G& c) {
        Value* y3 = c.add("mul", {c.y(), c.add("mul", {c.y(), c.y()})});
        return c.add("mul", {c.full_like(c.y(), -0.5), y3});
      })));
  r.add(unary(
      "tanh", KOp::kTanh, "hyperbolic tangent", 4, false, [](auto x) { return std::tanh(x); },
      chain([](G& c) { return one_minus(c, c.add("mul", {c.y(), c.y()})); })));
  r.add(unary(
      "sigmoid", KOp::kSigmoid, "1 / (1 + e^-x)", 4, false, [](auto x) { return sigmoid(x); },
      chain([](G& c) { return c.add("mul", {c.y(), one_minus(c, c.y())}); })));
  r.add(unary(
      "silu", KOp::kSilu, "x * sigmoid(x)", 5, false, [](auto x) { return x * sigmoid(x); },
      chain([](G& c) {
        Value* s = c.add("sigmoid", {c.x(0)});
        Value* xs1 = c.add("mul", {c.x(0), one_minus(c, s)});
        return c.add("mul", {s, c.add("add", {c.full_like(s, 1.0), xs1})});
      })));
  r.add(unary(
      "erf", std::nullopt, "the error function (imported GELU's erf form)", 8, false,
      [](auto x) { return std::erf(x); }, chain([](G& c) {  // 2 / sqrt(pi) e^(-x^2)
        Value* sq = c.add("mul", {c.x(0), c.x(0)});
        return c.add("mul", {c.full_like(sq, std::numbers::inv_sqrtpi * 2),
                             c.add("exp", {c.add("neg", {sq})})});
      })));
  r.add(unary(
      "sin", std::nullopt, "sine", 4, false, [](auto x) { return std::sin(x); },
      chain([](G& c) { return c.add("cos", {c.x(0)}); })));
  r.add(unary(
      "cos", std::nullopt, "cosine", 4, false, [](auto x) { return std::cos(x); },
      chain([](G& c) { return c.add("neg", {c.add("sin", {c.x(0)})}); })));
  OpDef gelu_op =
      unary("gelu", std::nullopt, "x * Phi(x); `approximate` picks the erf form or the tanh form",
            8, false, [](auto x) { return x; });
  gelu_op.attrs = {{"approximate", AttrKind::kString, std::string("none"), {"none", "tanh"}}};
  gelu_op.grad = [](G& c) {
    return grad_of({c.add("gelu_grad", {c.x(0), c.dy[0]},
                          {{"approximate", c.node.attrs().get_string("approximate")}})});
  };
  gelu_op.reference = [](const KernelArgs& a) {
    bool tanh_form = a.a().get_string("approximate") == "tanh";
    dispatch_float(a.in[0].dtype, a.op, [&](auto t) {
      using T = decltype(t);
      const T* x = a.in[0].as<T>();
      T* y = a.out[0].as<T>();
      for (int64_t i = 0, n = a.in[0].numel(); i < n; ++i) y[i] = gelu(x[i], tanh_form);
    });
  };
  gelu_op.lowering = tanh_gelu_lowering(/*grad=*/false);
  r.add(std::move(gelu_op));

  r.add(binary(
      "add", KOp::kAdd, "a + b", false, [](auto x, auto y) { return x + y; },
      [](G& c) { return grad_of({c.dy[0], c.dy[0]}); }));
  r.add(binary(
      "sub", KOp::kSub, "a - b", false, [](auto x, auto y) { return x - y; },
      [](G& c) { return grad_of({c.dy[0], c.add("neg", {c.dy[0]})}); }));
  r.add(binary(
      "mul", KOp::kMul, "a * b", false, [](auto x, auto y) { return x * y; },
      [](G& c) {
        return grad_of({c.add("mul", {c.dy[0], c.x(1)}), c.add("mul", {c.dy[0], c.x(0)})});
      }));
  r.add(binary(
      "div", KOp::kDiv, "a / b", false, [](auto x, auto y) { return x / y; },
      [](G& c) {
        Value* da = c.add("div", {c.dy[0], c.x(1)});
        return grad_of({da, c.add("neg", {c.add("mul", {da, c.y()})})});
      }));
  r.add(binary(
      "pow", KOp::kPow, "a ^ b", false,
      [](auto x, auto y) { return std::pow(static_cast<double>(x), static_cast<double>(y)); },
      [](G& c) {
        Value* bm1 = c.add("sub", {c.x(1), c.full_like(c.x(1), 1.0)});
        Value* da = c.add("mul", {c.dy[0], c.add("mul", {c.x(1), c.add("pow", {c.x(0), bm1})})});
        Value* db = c.add("mul", {c.dy[0], c.add("mul", {c.y(), c.add("log", {c.x(0)})})});
        return grad_of({da, db});
      }));
  r.add(binary(
      "max", KOp::kMax, "elementwise maximum", false, [](auto x, auto y) { return x > y ? x : y; },
      [](G& c) { return route(c, c.add("ge", {c.x(0), c.x(1)})); }));
  r.add(binary(
      "min", KOp::kMin, "elementwise minimum", false, [](auto x, auto y) { return x < y ? x : y; },
      [](G& c) { return route(c, c.add("le", {c.x(0), c.x(1)})); }));
  r.add(binary("eq", KOp::kEq, "a == b, as bool", true, [](auto x, auto y) { return x == y; }));
  r.add(binary("ne", KOp::kNe, "a != b, as bool", true, [](auto x, auto y) { return x != y; }));
  r.add(binary("lt", KOp::kLt, "a < b, as bool", true, [](auto x, auto y) { return x < y; }));
  r.add(binary("le", KOp::kLe, "a <= b, as bool", true, [](auto x, auto y) { return x <= y; }));
  r.add(binary("gt", KOp::kGt, "a > b, as bool", true, [](auto x, auto y) { return x > y; }));
  r.add(binary("ge", KOp::kGe, "a >= b, as bool", true, [](auto x, auto y) { return x >= y; }));

  OpDef select{.name = "select",
               .category = OpCategory::kElementwise,
               .summary = "cond ? a : b, elementwise"};
  select.min_operands = select.max_operands = 3;
  select.infer = [](InferContext& ctx) {
    ctx.require(ctx.in(0).dtype == DType::kBool, "operand 0 (the condition) must be bool");
    same_dtype(ctx, 1, 2);
    unify_shapes(ctx, 0, 1);
    return std::vector{TensorType{ctx.in(1).dtype, unify_shapes(ctx, 1, 2)}};
  };
  select.reference = select_kernel;
  select.reference_takes_half = true;
  select.lowering = elementwise_lowering(KOp::kSelect);
  select.overwritable = {1, 2};
  select.grad = [](G& c) {
    Value* z = c.full_like(c.y(), 0.0);
    return grad_of(
        {nullptr, c.add("select", {c.x(0), c.dy[0], z}), c.add("select", {c.x(0), z, c.dy[0]})});
  };
  r.add(std::move(select));

  OpDef cast{.name = "cast",
             .category = OpCategory::kElementwise,
             .summary = "converts to `dtype` (round to nearest even; bool is x != 0)"};
  cast.attrs = {{"dtype", AttrKind::kDType, std::nullopt, {}}};
  cast.infer = [](InferContext& ctx) {
    return std::vector{TensorType{ctx.attrs().get_dtype("dtype"), ctx.in(0).shape}};
  };
  cast.reference = cast_kernel;
  cast.carries_constant = true;
  // Between f32, bf16 and f16: the f32 value, which the kernel rounds when the cast is to 16 bits.
  cast.lowering = {
      .kind = FusionKind::kElementwise,
      .accepts =
          [](const Node& n) {
            return computes_in_f32(n.operand(0)) && computes_in_f32(n.result());
          },
      .fits = [](const KernelWriter& w,
                 const Node& n) { return w.fit_of(n.result()->shape()) != Fit::kNone; },
      .lower = [](KernelWriter& w, const Node& n) { w.set(n.result(), w.value(n.operand(0))); }};
  cast.grad = [](G& c) {
    if (!is_float(c.x(0)->dtype())) return grad_of({nullptr});
    // An f32 value cast to 16 bits and read several times gets its uses' gradients summed in f32.
    if (c.dy_f32[0] && c.x(0)->dtype() == DType::kF32) return grad_of({c.dy_f32[0]});
    return grad_of({c.add("cast", {c.dy[0]}, {{"dtype", c.x(0)->dtype()}})});
  };
  r.add(std::move(cast));
}

}  // namespace disc::ir
