// Tensors whose elements the importer knows: an ONNX model's constants, integer initializers, and
// the shape arithmetic exported graphs compute (Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape). An element is a number or a symbolic dim such as `S` or `4*S`, so `Shape(x)` of an
// x [batch, seq, 64] is the Known [batch, seq, 64], and the Reshape that reads it gets its target
// shape at import: the shape sub-computation folds away and leaves no node in disc's graph.
//
//   Known s = Known::dims({DimExpr::symbol("B"), 64});      // i64[2]: [B, 64]
//   Known t = binary(s, Known::scalar(2.0, DType::kI64), BinaryOp::kMul, shapes);  // [2*B, 128]
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "ir/dim_expr.h"
#include "ir/shape_graph.h"

namespace disc::onnx {

// One element: an integer dim expression (symbolic allowed) or, for non-integral float values, a
// real number.
struct Scalar {
  std::optional<ir::DimExpr> dim;
  double real = 0;

  static Scalar of(double v);            // a dim when v is integral and fits an int64
  std::optional<double> number() const;  // the value when it has no symbol
  std::string str() const;
};

struct Known {
  // The most elements a Known holds: shape arithmetic and small constants, never a tensor's data
  // (a malformed model asking for more gets InvalidArgument, not an allocation).
  static constexpr int64_t kMaxElements = int64_t{1} << 20;

  DType dtype = DType::kI64;
  std::vector<int64_t> shape;  // concrete
  std::vector<Scalar> elements;

  static Known scalar(double v, DType t);
  static Known dims(const std::vector<ir::DimExpr>& d);  // i64[n]
  int64_t numel() const;
  // The element count of `shape`; throws InvalidArgument past kMaxElements.
  static int64_t count(const std::vector<int64_t>& shape);
  int rank() const { return static_cast<int>(shape.size()); }
  bool symbolic() const;  // some element holds a symbol
  // Every element as a dim (integers, symbolic allowed); nullopt when one is not integral.
  std::optional<std::vector<ir::DimExpr>> as_dims() const;
  // Every element as an int64 constant; nullopt when one is symbolic or not integral.
  std::optional<std::vector<int64_t>> as_ints() const;
  std::string str() const;  // "i64[2] {B, 64}"
};

enum class BinaryOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMin,
  kMax,
  kEq,
  kLt,
  kGt,
  kLe,
  kGe,
  kAnd,
  kOr
};
enum class UnaryOp {
  kNeg,
  kAbs,
  kSqrt,
  kReciprocal,
  kExp,
  kLog,
  kSin,
  kCos,
  kTanh,
  kSigmoid,
  kErf,
  kRelu,
  kNot,
  kFloor,
  kCeil
};

// Elementwise with ONNX (numpy) broadcasting over the concrete shapes. Symbolic elements take
// +, -, *, exact division, min/max and comparisons that `shapes` decides; anything else throws
// InvalidArgument saying which element could not be folded.
Known binary(const Known& a, const Known& b, BinaryOp op, const ir::ShapeGraph& shapes);
Known unary(const Known& a, UnaryOp op);
// Converts the elements to `t` (floats truncate toward zero into integers, as ONNX's Cast does).
Known cast(const Known& a, DType t);
// The broadcast of two concrete shapes (numpy rules); nullopt when they do not broadcast.
std::optional<std::vector<int64_t>> broadcast_shape(const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b);
// `a` repeated to `shape` (numpy rules; a's shape must broadcast to it).
Known expand(const Known& a, const std::vector<int64_t>& shape);

}  // namespace disc::onnx
