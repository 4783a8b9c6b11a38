// The sizes of one attention (or attention_grad) node, read from q and v: the reference kernels
// and the devices' block attention (engine/executor.cc) must agree on them.
#pragma once

#include <cstdint>

#include "ir/attribute.h"
#include "ir/tensor_ref.h"

namespace disc::ir {

// q [heads..., sq, d], k [heads..., sk, d], v [heads..., sk, dv]; heads flattens every leading dim.
struct AttentionDims {
  int64_t heads = 0, sq = 0, sk = 0, d = 0, dv = 0;
  bool causal = true;
  double scale = 1.0;
};

AttentionDims attention_dims(const TensorRef& q, const TensorRef& v, const Attributes& attrs);

}  // namespace disc::ir
