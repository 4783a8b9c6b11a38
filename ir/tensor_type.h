// The static type of a tensor value: element type and symbolic shape, e.g. `f32[B, S, 512]`.
#pragma once

#include <string>
#include <vector>

#include "base/dtype.h"
#include "ir/dim_expr.h"

namespace disc::ir {

struct TensorType {
  DType dtype = DType::kF32;
  std::vector<DimExpr> shape;

  int rank() const { return static_cast<int>(shape.size()); }
  DimExpr numel() const { return product(shape); }
  DimExpr bytes() const { return numel() * dtype_size(dtype); }
  std::string str() const;
  bool operator==(const TensorType&) const = default;
};

}  // namespace disc::ir
