#include "formats/onnx/known.h"

#include <cmath>
#include <functional>
#include <limits>

#include "base/error.h"

namespace disc::onnx {
namespace {

using ir::DimExpr;

bool integral(DType t) {
  return is_integer(t) || t == DType::kBool;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Row-major strides of `shape`, as if broadcast into `to` (0 along stretched dims).
std::vector<int64_t> strides_in(const std::vector<int64_t>& shape, const std::vector<int64_t>& to) {
  std::vector<int64_t> st(to.size(), 0);
  int64_t s = 1;
  for (int i = static_cast<int>(shape.size()) - 1, j = static_cast<int>(to.size()) - 1; i >= 0;
       --i, --j) {
    st[j] = shape[i] == 1 ? 0 : s;
    s *= shape[i];
  }
  return st;
}

// The flat index into a tensor of `strides` of result element `flat` of `shape`.
int64_t source_index(int64_t flat, const std::vector<int64_t>& shape,
                     const std::vector<int64_t>& strides) {
  int64_t at = 0;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    at += (flat % shape[d]) * strides[d];
    flat /= shape[d];
  }
  return at;
}

[[noreturn]] void cannot_fold(const Scalar& a, const Scalar& b, const char* what) {
  throw InvalidArgument(std::string("cannot fold ") + what + " of " + a.str() + " and " + b.str() +
                        " at import (the result depends on a symbol's run-time value)");
}

Scalar fold_symbolic(const Scalar& a, const Scalar& b, BinaryOp op, const ir::ShapeGraph& shapes) {
  if (!a.dim || !b.dim) cannot_fold(a, b, "arithmetic");
  const DimExpr &x = *a.dim, &y = *b.dim;
  auto truth = [](bool v) { return Scalar{DimExpr(v ? 1 : 0)}; };
  ir::Ordering o = shapes.compare(x, y);
  using ir::Ordering;
  switch (op) {
    case BinaryOp::kAdd:
      return {x + y};
    case BinaryOp::kSub:
      return {x - y};
    case BinaryOp::kMul:
      return {x * y};
    case BinaryOp::kDiv:
      if (auto q = x.divide_exact(y)) return {*q};
      cannot_fold(a, b, "a division");
    case BinaryOp::kEq:
      if (o == Ordering::kEQ) return truth(true);
      if (o == Ordering::kLT || o == Ordering::kGT) return truth(false);
      cannot_fold(a, b, "a comparison");
    case BinaryOp::kLt:
    case BinaryOp::kGe:
      if (o == Ordering::kLT || o == Ordering::kGE || o == Ordering::kGT || o == Ordering::kEQ)
        return truth((o == Ordering::kLT) == (op == BinaryOp::kLt));
      cannot_fold(a, b, "a comparison");
    case BinaryOp::kGt:
    case BinaryOp::kLe:
      if (o == Ordering::kGT || o == Ordering::kLE || o == Ordering::kLT || o == Ordering::kEQ)
        return truth((o == Ordering::kGT) == (op == BinaryOp::kGt));
      cannot_fold(a, b, "a comparison");
    case BinaryOp::kMin:
    case BinaryOp::kMax: {
      bool a_le = o == Ordering::kLT || o == Ordering::kLE || o == Ordering::kEQ;
      bool a_ge = o == Ordering::kGT || o == Ordering::kGE || o == Ordering::kEQ;
      if (!a_le && !a_ge) cannot_fold(a, b, "min/max");
      return (op == BinaryOp::kMin) == a_le ? a : b;
    }
    default:
      cannot_fold(a, b, "arithmetic");
  }
}

double apply(BinaryOp op, double x, double y) {
  switch (op) {
    case BinaryOp::kAdd:
      return x + y;
    case BinaryOp::kSub:
      return x - y;
    case BinaryOp::kMul:
      return x * y;
    case BinaryOp::kDiv:
      return x / y;
    case BinaryOp::kPow:
      return std::pow(x, y);
    case BinaryOp::kMin:
      return std::min(x, y);
    case BinaryOp::kMax:
      return std::max(x, y);
    case BinaryOp::kEq:
      return x == y;
    case BinaryOp::kLt:
      return x < y;
    case BinaryOp::kGt:
      return x > y;
    case BinaryOp::kLe:
      return x <= y;
    case BinaryOp::kGe:
      return x >= y;
    case BinaryOp::kAnd:
      return x != 0 && y != 0;
    case BinaryOp::kOr:
      return x != 0 || y != 0;
  }
  return 0;
}

bool comparison(BinaryOp op) {
  return op == BinaryOp::kEq || op == BinaryOp::kLt || op == BinaryOp::kGt || op == BinaryOp::kLe ||
         op == BinaryOp::kGe || op == BinaryOp::kAnd || op == BinaryOp::kOr;
}

// Rounds `v` as a value of dtype t holds it: integers truncate toward zero (ONNX's integer Div and
// Cast do), bool is v != 0, f32 rounds to float.
Scalar as_dtype(double v, DType t) {
  if (t == DType::kBool) return Scalar{DimExpr(v != 0 ? 1 : 0)};
  if (is_integer(t)) {
    if (!std::isfinite(v) || std::abs(v) > 9.2e18)
      throw InvalidArgument("the integer value " + std::to_string(v) + " does not fit an int64");
    return Scalar{DimExpr(static_cast<int64_t>(std::trunc(v)))};
  }
  if (t == DType::kF32) v = static_cast<double>(static_cast<float>(v));
  return Scalar::of(v);
}

}  // namespace

Scalar Scalar::of(double v) {
  if (std::isfinite(v) && v == std::trunc(v) && std::abs(v) < 9.0e15)
    return Scalar{DimExpr(static_cast<int64_t>(v))};
  return Scalar{std::nullopt, v};
}

std::optional<double> Scalar::number() const {
  if (!dim) return real;
  if (auto c = dim->constant()) return static_cast<double>(*c);
  return std::nullopt;
}

std::string Scalar::str() const {
  if (dim) return dim->str();
  std::string s = std::to_string(real);
  return s;
}

Known Known::scalar(double v, DType t) {
  return Known{t, {}, {as_dtype(v, t)}};
}

Known Known::dims(const std::vector<DimExpr>& d) {
  Known k{DType::kI64, {static_cast<int64_t>(d.size())}, {}};
  for (const DimExpr& e : d) k.elements.push_back(Scalar{e});
  return k;
}

int64_t Known::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n = ir::checked_mul(n, d);
  return n;
}

int64_t Known::count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw InvalidArgument("a negative dim in " + shape_str(shape));
    n = ir::checked_mul(n, d);
    if (n > kMaxElements)
      throw InvalidArgument("a known tensor of shape " + shape_str(shape) + " holds over " +
                            std::to_string(kMaxElements) + " elements; disc folds smaller ones");
  }
  return n;
}

bool Known::symbolic() const {
  for (const Scalar& s : elements)
    if (!s.number()) return true;
  return false;
}

std::optional<std::vector<DimExpr>> Known::as_dims() const {
  std::vector<DimExpr> out;
  for (const Scalar& s : elements) {
    if (!s.dim) return std::nullopt;
    out.push_back(*s.dim);
  }
  return out;
}

std::optional<std::vector<int64_t>> Known::as_ints() const {
  std::vector<int64_t> out;
  for (const Scalar& s : elements) {
    if (!s.dim || !s.dim->constant()) return std::nullopt;
    out.push_back(*s.dim->constant());
  }
  return out;
}

std::string Known::str() const {
  std::string out = std::string(dtype_name(dtype)) + shape_str(shape) + " {";
  for (size_t i = 0; i < elements.size() && i < 8; ++i) out += (i ? ", " : "") + elements[i].str();
  return out + (elements.size() > 8 ? ", ...}" : "}");
}

std::optional<std::vector<int64_t>> broadcast_shape(const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b) {
  std::vector<int64_t> out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1, y = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[out.size() - 1 - i] = x == 1 ? y : x;
  }
  return out;
}

Known expand(const Known& a, const std::vector<int64_t>& shape) {
  auto to = broadcast_shape(a.shape, shape);
  if (!to || *to != shape)
    throw InvalidArgument("shape " + shape_str(a.shape) + " does not broadcast to " +
                          shape_str(shape));
  Known out{a.dtype, shape, {}};
  int64_t n = Known::count(shape);
  std::vector<int64_t> st = strides_in(a.shape, shape);
  out.elements.reserve(n);
  for (int64_t i = 0; i < n; ++i) out.elements.push_back(a.elements[source_index(i, shape, st)]);
  return out;
}

Known binary(const Known& a, const Known& b, BinaryOp op, const ir::ShapeGraph& shapes) {
  auto shape = broadcast_shape(a.shape, b.shape);
  if (!shape)
    throw InvalidArgument("shapes " + shape_str(a.shape) + " and " + shape_str(b.shape) +
                          " do not broadcast");
  DType t = comparison(op) ? DType::kBool : a.dtype;
  Known out{t, *shape, {}};
  std::vector<int64_t> sa = strides_in(a.shape, *shape), sb = strides_in(b.shape, *shape);
  int64_t n = Known::count(*shape);
  for (int64_t i = 0; i < n; ++i) {
    const Scalar &x = a.elements[source_index(i, *shape, sa)],
                 &y = b.elements[source_index(i, *shape, sb)];
    auto nx = x.number(), ny = y.number();
    if (nx && ny) {
      bool int_div = op == BinaryOp::kDiv && integral(a.dtype);
      if (int_div && *ny == 0) throw InvalidArgument("integer division by zero");
      out.elements.push_back(as_dtype(apply(op, *nx, *ny), t));  // integers truncate
    } else {
      out.elements.push_back(fold_symbolic(x, y, op, shapes));
    }
  }
  return out;
}

Known unary(const Known& a, UnaryOp op) {
  std::function<double(double)> f;
  switch (op) {
    case UnaryOp::kNeg:
      f = [](double x) { return -x; };
      break;
    case UnaryOp::kAbs:
      f = [](double x) { return std::abs(x); };
      break;
    case UnaryOp::kSqrt:
      f = [](double x) { return std::sqrt(x); };
      break;
    case UnaryOp::kReciprocal:
      f = [](double x) { return 1 / x; };
      break;
    case UnaryOp::kExp:
      f = [](double x) { return std::exp(x); };
      break;
    case UnaryOp::kLog:
      f = [](double x) { return std::log(x); };
      break;
    case UnaryOp::kSin:
      f = [](double x) { return std::sin(x); };
      break;
    case UnaryOp::kCos:
      f = [](double x) { return std::cos(x); };
      break;
    case UnaryOp::kTanh:
      f = [](double x) { return std::tanh(x); };
      break;
    case UnaryOp::kSigmoid:
      f = [](double x) { return 1 / (1 + std::exp(-x)); };
      break;
    case UnaryOp::kErf:
      f = [](double x) { return std::erf(x); };
      break;
    case UnaryOp::kRelu:
      f = [](double x) { return std::max(x, 0.0); };
      break;
    case UnaryOp::kNot:
      f = [](double x) { return x == 0 ? 1.0 : 0.0; };
      break;
    case UnaryOp::kFloor:
      f = [](double x) { return std::floor(x); };
      break;
    case UnaryOp::kCeil:
      f = [](double x) { return std::ceil(x); };
      break;
  }
  Known out{a.dtype, a.shape, {}};
  for (const Scalar& s : a.elements) {
    if (op == UnaryOp::kNeg && s.dim) {
      out.elements.push_back(Scalar{-*s.dim});
      continue;
    }
    auto v = s.number();
    if (!v) throw InvalidArgument("cannot fold a function of the symbolic value " + s.str());
    out.elements.push_back(as_dtype(f(*v), a.dtype));
  }
  return out;
}

Known cast(const Known& a, DType t) {
  Known out{t, a.shape, {}};
  for (const Scalar& s : a.elements) {
    auto v = s.number();
    if (!v) {
      if (t == DType::kBool) throw InvalidArgument("cannot fold " + s.str() + " as a bool");
      out.elements.push_back(s);  // a symbolic dim is an integer in any number type
      continue;
    }
    out.elements.push_back(as_dtype(*v, t));
  }
  return out;
}

}  // namespace disc::onnx
