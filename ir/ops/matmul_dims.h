// The sizes of one matmul, read from its first operand and its result: the reference kernel and
// the devices' library GEMM (engine/executor.cc) must agree on them, sum_batch included.
#pragma once

#include <cstdint>

#include "ir/attribute.h"
#include "ir/tensor_ref.h"

namespace disc::ir {

struct MatmulDims {
  int64_t batch = 0;     // products; 0 when the result is empty
  int64_t m = 0, n = 0;  // each product's result is [m, n]
  int64_t k = 0;         // the contraction's length; with sum_batch, A's batch rows join it
};

MatmulDims matmul_dims(const TensorRef& a, const TensorRef& c, const Attributes& attrs);

}  // namespace disc::ir
