// Predicates the passes that find causal attention share (attention.cc, tril.cc).
#pragma once

#include "ir/graph.h"

namespace disc::ir {

// v is [..., S, S] with the last two dims provably equal.
inline bool square(const Graph& g, const Value& v) {
  const auto& s = v.shape();
  return s.size() >= 2 && g.shapes().compare(s[s.size() - 2], s.back()) == Ordering::kEQ;
}

// v is causal_mask(x) with `value` above the diagonal.
inline bool is_mask_with(const Value& v, double value) {
  const Node* n = v.producer();
  return n && n->op().name == "causal_mask" && n->attrs().get_float("value") == value;
}

// Node n (a softmax or the like) works over its operand's last axis.
inline bool over_last_axis(const Node& n) {
  const int64_t axis = n.attrs().get_int("axis");
  return axis == -1 || axis == n.operand(0)->rank() - 1;
}

}  // namespace disc::ir
