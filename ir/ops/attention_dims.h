// The sizes of one attention (or attention_grad) node, read from q and v: the reference kernels
// and the devices' block attention (engine/executor.cc) must agree on them.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/attribute.h"
#include "ir/tensor_ref.h"

namespace disc::ir {

// q [heads..., sq, d], k [heads..., sk, d], v [heads..., sk, dv]; heads flattens every leading dim.
struct AttentionDims {
  int64_t heads = 0, sq = 0, sk = 0, d = 0, dv = 0;
  bool causal = true;
  double scale = 1.0;
  // Packed sequences: N+1 offsets, sequence n the rows [offsets[n], offsets[n+1]). Empty: one
  // sequence of every row.
  std::vector<int64_t> offsets;
};

// `offsets`, when given, is the op's offsets operand: checked (0 first, sq last, never
// decreasing; InvalidArgument naming the first bad entry otherwise) and copied.
AttentionDims attention_dims(const TensorRef& q, const TensorRef& v, const Attributes& attrs,
                             const TensorRef* offsets = nullptr);

// Calls f(begin, end) for each sequence's rows: the packed ones, or [0, sq) when not packed.
template <typename F>
void for_each_sequence(const AttentionDims& s, F&& f) {
  if (s.offsets.empty()) return f(int64_t{0}, s.sq);
  for (size_t n = 0; n + 1 < s.offsets.size(); ++n) f(s.offsets[n], s.offsets[n + 1]);
}

}  // namespace disc::ir
