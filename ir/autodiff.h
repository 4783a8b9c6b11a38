// Reverse-mode automatic differentiation as a graph transformation: from a scalar loss, append the
// nodes that compute d(loss)/d(value) for the values asked for. Each op's gradient rule (in its
// registry entry) builds the gradients of its operands from those of its results.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace disc::ir {

// What a gradient rule sees and the small vocabulary it builds with.
struct GradContext {
  Graph& g;
  const Node& node;
  std::vector<Value*> dy;  // gradient of each result; nullptr where none flows
  // Per result: where a bf16 or f16 result's gradient adds up several uses, their sum in f32, of
  // which dy is the rounding (nullptr elsewhere). A rule that hands the gradient to an f32
  // operand (cast's) hands on this sum, so that gradients accumulate in f32.
  std::vector<Value*> dy_f32;

  Value* x(int i) const { return node.operand(i); }
  Value* y(int i = 0) const { return node.result(i); }
  Value* add(const std::string& op, const std::vector<Value*>& operands, Attributes attrs = {}) {
    return g.add(op, operands, std::move(attrs));
  }
  // All results of a multi-result op (gradient ops such as rms_norm_grad).
  std::vector<Value*> add_all(const std::string& op, const std::vector<Value*>& operands,
                              Attributes attrs = {}) {
    return g.add_node(op, operands, std::move(attrs))->results();
  }
  // A tensor shaped like `like` filled with `value`.
  Value* full_like(const Value* like, double value);
  // `v` (a gradient over `from`'s shape) summed down to `to`'s shape where `from` was made by
  // broadcasting: used by broadcast's rule and for shared matmul weights.
  Value* sum_to(Value* v, const std::vector<int>& kept_axes, const TensorType& to);
};

// Appends to `g` the gradient of the scalar float `loss` with respect to each of `wrt`, in order
// (a value the loss does not depend on gets zeros). Throws InvalidArgument naming the op when a
// node on the path has no gradient rule.
std::vector<Value*> build_gradients(Graph& g, Value* loss, const std::vector<Value*>& wrt);

}  // namespace disc::ir
