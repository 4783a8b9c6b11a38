#include "ir/op_def.h"

#include "base/error.h"

namespace disc::ir {

std::string_view category_name(OpCategory c) {
  switch (c) {
    case OpCategory::kElementwise:
      return "elementwise";
    case OpCategory::kBroadcast:
      return "broadcast";
    case OpCategory::kReduce:
      return "reduce";
    case OpCategory::kMatmul:
      return "matmul";
    case OpCategory::kLayout:
      return "layout";
    case OpCategory::kGatherScatter:
      return "gather/scatter";
    case OpCategory::kNormalization:
      return "normalization";
    case OpCategory::kConvolution:
      return "convolution";
    case OpCategory::kConstant:
      return "constant";
    case OpCategory::kRandom:
      return "random";
    case OpCategory::kLoss:
      return "loss";
    case OpCategory::kCollective:
      return "collective";
    case OpCategory::kFused:
      return "fused";
  }
  return "?";
}

void InferContext::fail(const std::string& what) const {
  throw VerifyError(what);
}

void InferContext::unify(const DimExpr& a, const DimExpr& b, const std::string& what) {
  try {
    shapes_.assert_equal(a, b, what);
  } catch (const ShapeError& e) {
    fail(e.what());
  }
}

int InferContext::axis(int64_t axis, int rank, const std::string& attr) const {
  if (axis < -rank || axis >= rank) {
    fail("`" + attr + "` = " + std::to_string(axis) + " is outside [" + std::to_string(-rank) +
         ", " + std::to_string(rank) + ") for a rank-" + std::to_string(rank) + " operand");
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

void InferContext::require_float(int i, bool allow_int) const {
  DType t = in(i).dtype;
  if (is_float(t) || (allow_int && is_integer(t))) return;
  fail("operand " + std::to_string(i) + " has dtype " + std::string(dtype_name(t)) +
       (allow_int ? "; expected a float or integer dtype" : "; expected a float dtype"));
}

void InferContext::require_integer(int i) const {
  DType t = in(i).dtype;
  if (!is_integer(t)) {
    fail("operand " + std::to_string(i) + " has dtype " + std::string(dtype_name(t)) +
         "; expected i32 or i64");
  }
}

DimExpr io_bytes(const std::vector<TensorType>& operands, const std::vector<TensorType>& results) {
  DimExpr bytes;
  for (const auto& t : operands) bytes += t.bytes();
  for (const auto& t : results) bytes += t.bytes();
  return bytes;
}

OpCost OpDef::cost_of(const std::vector<TensorType>& operands,
                      const std::vector<TensorType>& results, const Attributes& attrs) const {
  if (cost) return cost(operands, results, attrs);
  OpCost c;
  c.bytes = io_bytes(operands, results);
  if (!results.empty()) c.flops = results[0].numel() * flops_per_element;
  return c;
}

}  // namespace disc::ir
