// Elementwise ONNX ops: arithmetic, comparisons, unary math, Where and Cast. On Known operands
// they fold (shape arithmetic); on tensors they become disc's elementwise ops, with numpy
// broadcasting made explicit `broadcast` nodes.
#include "base/error.h"
#include "formats/onnx/op_context.h"
#include "formats/onnx/tensor_proto.h"

namespace disc::onnx {
namespace {

using ir::DimExpr;
using ir::Value;

struct Binary {
  BinaryOp fold;
  const char* disc_op;  // nullptr: folds only
};

// The operands of an elementwise node broadcast to their common shape, as graph values.
std::vector<Value*> broadcast_operands(OpContext& c, const std::vector<int>& inputs) {
  std::vector<std::vector<DimExpr>> shapes;
  for (int i : inputs) shapes.push_back(c.in(i).shape());
  std::vector<DimExpr> shape = c.broadcast_shape(shapes);
  std::vector<Value*> out;
  for (int i : inputs) out.push_back(c.broadcast_to(c.value(i), shape));
  return out;
}

OpRule binary_rule(Binary b) {
  return [b](OpContext& c) {
    if (c.all_known()) return result(binary(c.known(0, ""), c.known(1, ""), b.fold, c.shapes()));
    if (!b.disc_op) c.fail("disc folds this op on constants and shapes only, not on tensors");
    auto ops = broadcast_operands(c, {0, 1});
    if (b.fold == BinaryOp::kPow && ops[1]->dtype() != ops[0]->dtype())  // ONNX allows it
      ops[1] = c.add("cast", {ops[1]}, {{"dtype", ops[0]->dtype()}});
    return result(c.add(b.disc_op, ops));
  };
}

// Min and Max take any number of operands.
OpRule variadic_rule(BinaryOp fold, const char* disc_op) {
  return [fold, disc_op](OpContext& c) {
    if (c.num_inputs() < 1) c.fail("needs at least one input");
    if (c.all_known()) {
      Known acc = c.known(0, "");
      for (int i = 1; i < c.num_inputs(); ++i) acc = binary(acc, c.known(i, ""), fold, c.shapes());
      return result(std::move(acc));
    }
    std::vector<int> inputs;
    for (int i = 0; i < c.num_inputs(); ++i) inputs.push_back(i);
    auto ops = broadcast_operands(c, inputs);
    Value* acc = ops[0];
    for (size_t i = 1; i < ops.size(); ++i) acc = c.add(disc_op, {acc, ops[i]});
    return result(acc);
  };
}

OpRule unary_rule(UnaryOp fold, const char* disc_op) {
  return [fold, disc_op](OpContext& c) {
    if (c.all_known()) return result(unary(c.known(0, ""), fold));
    if (!disc_op) c.fail("disc has no such op on tensors yet; it folds it on constants only");
    Value* x = c.value(0);
    if (fold == UnaryOp::kReciprocal) return result(c.add("div", {c.full_like(1.0, x), x}));
    return result(c.add(disc_op, {x}));
  };
}

DType cast_target(OpContext& c) {
  if (c.node().op_type == "CastLike") return c.in(1).dtype();
  int64_t to = c.attr_int("to", 0);
  auto t = dtype_of(static_cast<int32_t>(to));
  if (!t)
    c.fail("casts to " + onnx_type_name(static_cast<int32_t>(to)) +
           ", which disc does not have (float, double, float16, bfloat16, int32, int64, bool)");
  return *t;
}

std::vector<Slot> cast_rule(OpContext& c) {
  DType t = cast_target(c);
  const Slot& x = c.in(0);
  if (x.known) return result(cast(*x.known, t));
  if (x.fill) {
    Fill f = *x.fill;
    f.value = cast(Known::scalar(f.value, f.dtype), t).elements[0].number().value_or(0);
    f.dtype = t;
    return {Slot{nullptr, std::nullopt, f}};
  }
  if (x.value->dtype() == t) return result(x.value);
  return result(c.add("cast", {x.value}, {{"dtype", t}}));
}

// Where(mask, c, scores) with mask the strict upper triangle of a square [S, S] (what exported
// causal attention builds from Trilu): disc's causal_mask, which fuses and which the attention
// pass recognises.
std::optional<Value*> causal_mask(OpContext& c) {
  const Slot &cond = c.in(0), &fill = c.in(1), &x = c.in(2);
  if (!cond.fill || !cond.fill->triangle || cond.fill->value == 0 || !fill.known ||
      fill.known->numel() != 1 || x.known || x.fill)
    return std::nullopt;
  const Fill& f = *cond.fill;
  int r = x.rank(), fr = static_cast<int>(f.shape.size());
  if (!f.triangle->upper || f.triangle->k != 1 || fr != 2 || r < 2 || !(f.shape[0] == f.shape[1]) ||
      !(x.shape()[r - 1] == f.shape[1]) || !(x.shape()[r - 2] == f.shape[0]))
    return std::nullopt;
  auto value = fill.known->elements[0].number();
  if (!value) return std::nullopt;
  return c.add("causal_mask", {c.value(2)}, {{"value", *value}});
}

std::vector<Slot> where_rule(OpContext& c) {
  if (c.all_known()) {
    const Known &k = c.known(0, ""), &a = c.known(1, ""), &b = c.known(2, "");
    auto s1 = broadcast_shape(k.shape, a.shape);
    auto shape = s1 ? broadcast_shape(*s1, b.shape) : std::nullopt;
    if (!shape) c.fail("the operands do not broadcast");
    Known kk = expand(k, *shape), ka = expand(a, *shape), kb = expand(b, *shape);
    Known out{a.dtype, *shape, {}};
    for (int64_t i = 0; i < out.numel(); ++i) {
      auto v = kk.elements[i].number();
      if (!v) c.fail("cannot fold a condition that depends on a symbol");
      out.elements.push_back(*v != 0 ? ka.elements[i] : kb.elements[i]);
    }
    return result(std::move(out));
  }
  if (auto m = causal_mask(c)) return result(*m);
  auto ops = broadcast_operands(c, {0, 1, 2});
  return result(c.add("select", ops));
}

}  // namespace

void add_elementwise_rules(RuleTable& t) {
  const std::pair<const char*, Binary> binaries[] = {
      {"Add", {BinaryOp::kAdd, "add"}},       {"Sub", {BinaryOp::kSub, "sub"}},
      {"Mul", {BinaryOp::kMul, "mul"}},       {"Div", {BinaryOp::kDiv, "div"}},
      {"Pow", {BinaryOp::kPow, "pow"}},       {"Equal", {BinaryOp::kEq, "eq"}},
      {"Less", {BinaryOp::kLt, "lt"}},        {"Greater", {BinaryOp::kGt, "gt"}},
      {"LessOrEqual", {BinaryOp::kLe, "le"}}, {"GreaterOrEqual", {BinaryOp::kGe, "ge"}},
      {"And", {BinaryOp::kAnd, nullptr}},     {"Or", {BinaryOp::kOr, nullptr}},
  };
  for (const auto& [name, b] : binaries) t[name] = {binary_rule(b)};
  t["Min"] = {variadic_rule(BinaryOp::kMin, "min")};
  t["Max"] = {variadic_rule(BinaryOp::kMax, "max")};
  const std::tuple<const char*, UnaryOp, const char*> unaries[] = {
      {"Neg", UnaryOp::kNeg, "neg"},     {"Abs", UnaryOp::kAbs, "abs"},
      {"Sqrt", UnaryOp::kSqrt, "sqrt"},  {"Reciprocal", UnaryOp::kReciprocal, "div"},
      {"Exp", UnaryOp::kExp, "exp"},     {"Log", UnaryOp::kLog, "log"},
      {"Sin", UnaryOp::kSin, "sin"},     {"Cos", UnaryOp::kCos, "cos"},
      {"Tanh", UnaryOp::kTanh, "tanh"},  {"Sigmoid", UnaryOp::kSigmoid, "sigmoid"},
      {"Relu", UnaryOp::kRelu, "relu"},  {"Erf", UnaryOp::kErf, "erf"},
      {"Not", UnaryOp::kNot, nullptr},   {"Floor", UnaryOp::kFloor, nullptr},
      {"Ceil", UnaryOp::kCeil, nullptr},
  };
  for (const auto& [name, fold, op] : unaries) t[name] = {unary_rule(fold, op)};
  t["Cast"] = {cast_rule};
  t["CastLike"] = {cast_rule, 15};
  t["Where"] = {where_rule};
  t["Identity"] = {[](OpContext& c) { return std::vector<Slot>{c.in(0)}; }};
}

}  // namespace disc::onnx
