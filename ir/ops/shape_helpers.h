// Small pieces that shape rules share.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "ir/op_def.h"

namespace disc::ir {

inline std::string dims_str(const std::vector<DimExpr>& dims) {
  return TensorType{DType::kF32, dims}.str().substr(3);  // "[B, S]"
}

// Operands a and b have the same shape; records the dim equalities. Returns a's shape.
inline std::vector<DimExpr> unify_shapes(InferContext& ctx, int a, int b) {
  const auto &sa = ctx.in(a).shape, &sb = ctx.in(b).shape;
  ctx.require(sa.size() == sb.size(), "operand " + std::to_string(b) + " has shape " +
                                          dims_str(sb) + ", operand " + std::to_string(a) +
                                          " has shape " + dims_str(sa) +
                                          "; ranks differ (insert a broadcast or reshape)");
  for (size_t i = 0; i < sa.size(); ++i) {
    ctx.unify(sa[i], sb[i],
              "dim " + std::to_string(i) + " of operand " + std::to_string(b) + " must equal dim " +
                  std::to_string(i) + " of operand " + std::to_string(a));
  }
  return sa;
}

// A gradient op's dy (operand `dy`) has the shape of the result it is the gradient of, `y`
// (`whose`: "the output's", "the forward result's"); records the dim equalities.
inline void require_dy_shape(InferContext& ctx, int dy, const std::vector<DimExpr>& y,
                             const std::string& whose) {
  const auto& d = ctx.in(dy).shape;
  ctx.require(d.size() == y.size(), "dy must have " + whose + " shape " + dims_str(y));
  for (size_t i = 0; i < d.size(); ++i)
    ctx.unify(d[i], y[i], "dy dim " + std::to_string(i) + " must equal " + whose);
}

// Labels (operand `labels`) have the shape of operand `x` (named `name`) without x's last dim
// (`last`, as the message names it); records the dim equalities.
inline void require_label_shape(InferContext& ctx, int labels, int x, const std::string& name,
                                const std::string& last) {
  const auto &l = ctx.in(labels).shape, &s = ctx.in(x).shape;
  ctx.require(l.size() + 1 == s.size(), "labels " + dims_str(l) + " must have the shape of " +
                                            name + " " + dims_str(s) + " without " + last);
  for (size_t i = 0; i < l.size(); ++i)
    ctx.unify(
        l[i], s[i],
        "labels dim " + std::to_string(i) + " must equal " + name + " dim " + std::to_string(i));
}

inline void same_dtype(const InferContext& ctx, int a, int b) {
  ctx.require(ctx.in(a).dtype == ctx.in(b).dtype,
              "operand " + std::to_string(b) + " is " + std::string(dtype_name(ctx.in(b).dtype)) +
                  ", operand " + std::to_string(a) + " is " +
                  std::string(dtype_name(ctx.in(a).dtype)) + "; insert a cast");
}

// Axes from an int-list attribute, normalised, checked in range and unique, sorted.
inline std::vector<int> axes_attr(const InferContext& ctx, const std::string& attr, int rank) {
  std::vector<int> axes;
  for (int64_t a : ctx.attrs().get_ints(attr)) {
    int n = ctx.axis(a, rank, attr);
    for (int seen : axes)
      ctx.require(seen != n, "`" + attr + "` names axis " + std::to_string(n) + " twice");
    axes.push_back(n);
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

inline void require_rank(const InferContext& ctx, int i, int rank, const std::string& layout) {
  ctx.require(ctx.in(i).rank() == rank, "operand " + std::to_string(i) + " has rank " +
                                            std::to_string(ctx.in(i).rank()) + "; expected " +
                                            std::to_string(rank) + " (" + layout + ")");
}

// A cost rule for ops whose work is proportional to their first operand (reductions, norms).
inline OpCost input_proportional_cost(const std::vector<TensorType>& in,
                                      const std::vector<TensorType>& out, int flops_per_element) {
  return {in.at(0).numel() * flops_per_element, io_bytes(in, out)};
}

}  // namespace disc::ir
