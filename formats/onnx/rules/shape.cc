// The ONNX ops that make values from shapes and constants: Constant, Shape, Size,
// ConstantOfShape and Range. They fold to Knowns; Range over a symbolic length becomes disc's
// iota (positions), ConstantOfShape of a symbolic shape a Fill (a mask, made when read).
#include <cmath>

#include "base/error.h"
#include "formats/onnx/op_context.h"

namespace disc::onnx {
namespace {

using ir::DimExpr;
using ir::Value;

constexpr int64_t kMaxFoldedElements = int64_t{1} << 16;

std::vector<Slot> constant_rule(OpContext& c) {
  for (const char* name : {"value", "value_float", "value_int", "value_floats", "value_ints"})
    if (auto k = c.attr_tensor(name)) return result(std::move(*k));
  c.fail("has no value attribute disc reads (value, value_float(s), value_int(s))");
}

std::vector<Slot> shape_rule(OpContext& c) {
  std::vector<DimExpr> shape = c.in(0).shape();
  int rank = static_cast<int>(shape.size());
  auto at = [&](int64_t v) {
    return static_cast<int>(std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank));
  };
  int start = at(c.attr_int("start", 0)), end = at(c.attr_int("end", rank));
  return result(Known::dims({shape.begin() + start, shape.begin() + std::max(start, end)}));
}

std::vector<Slot> size_rule(OpContext& c) {
  Known k = Known::dims({ir::product(c.in(0).shape())});
  k.shape.clear();
  return result(std::move(k));
}

std::vector<Slot> constant_of_shape_rule(OpContext& c) {
  auto shape = c.known(0, "the shape").as_dims();
  if (!shape) c.fail("the shape must be integers");
  Known value = c.attr_tensor("value").value_or(Known::scalar(0, DType::kF32));
  if (value.numel() != 1 || !value.elements[0].number()) c.fail("`value` must hold one number");
  double v = *value.elements[0].number();
  std::vector<int64_t> concrete;
  int64_t n = 1;
  for (const DimExpr& d : *shape) {
    if (!d.constant() || *d.constant() < 0) break;
    concrete.push_back(*d.constant());
    n = ir::checked_mul(n, concrete.back());
  }
  if (concrete.size() == shape->size() && n <= kMaxFoldedElements)
    return result(expand(Known::scalar(v, value.dtype), concrete));
  return {Slot{nullptr, std::nullopt, Fill{value.dtype, *shape, v}}};
}

std::vector<Slot> range_rule(OpContext& c) {
  const Known &start = c.known(0, "start"), &limit = c.known(1, "limit"),
              &delta = c.known(2, "delta");
  if (start.numel() != 1 || limit.numel() != 1 || delta.numel() != 1)
    c.fail("start, limit and delta must be scalars");
  DType t = start.dtype;
  auto s = start.elements[0].number(), d = delta.elements[0].number();
  auto l = limit.elements[0].number();
  if (!s || !d || *d == 0) c.fail("start and delta must be constants, delta nonzero");
  if (l) {  // all known: fold
    const double length = std::ceil((*l - *s) / *d);
    if (!(length <= static_cast<double>(kMaxFoldedElements)))  // NaN too
      c.fail("a range of " + std::to_string(length) + " elements is too long to fold");
    const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(length));
    Known out{t, {n}, {}};
    for (int64_t i = 0; i < n; ++i)
      out.elements.push_back(Known::scalar(*s + i * *d, t).elements[0]);
    return result(std::move(out));
  }
  // A symbolic limit: positions 0, 1, ... of a symbolic length, scaled and shifted.
  if (*s != std::trunc(*s) || *d != 1)
    c.fail("a range up to a symbolic limit must start at an integer and step by 1");
  DimExpr count = *limit.elements[0].dim - DimExpr(static_cast<int64_t>(*s));
  Value* positions = c.add("iota", {}, {{"shape", std::vector<DimExpr>{count}}, {"dtype", t}});
  if (*s != 0) positions = c.add("add", {positions, c.full_like(*s, positions)});
  return result(positions);
}

}  // namespace

void add_shape_rules(RuleTable& t) {
  t["Constant"] = {constant_rule};
  t["Shape"] = {shape_rule};
  t["Size"] = {size_rule};
  t["ConstantOfShape"] = {constant_of_shape_rule};
  t["Range"] = {range_rule};
}

}  // namespace disc::onnx
