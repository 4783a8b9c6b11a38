// Ops that move or reinterpret data without arithmetic: broadcast, reshape, transpose, slice,
// concat, pad.
#include "ir/op_registry.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

OpDef layout(const std::string& name, const std::string& summary, OpCategory category) {
  OpDef d{.name = name, .category = category, .summary = summary};
  d.flops_per_element = 0;
  return d;
}

std::vector<TensorType> infer_broadcast(InferContext& ctx) {
  const auto& shape = ctx.attrs().get_dims("shape");
  const auto& dims = ctx.attrs().get_ints("dims");
  const auto& in = ctx.in(0).shape;
  int out_rank = static_cast<int>(shape.size());
  ctx.require(dims.size() == in.size(), "`dims` has " + std::to_string(dims.size()) +
                                            " entries; it needs one per operand dim (" +
                                            std::to_string(in.size()) + ")");
  for (size_t i = 0; i < dims.size(); ++i) {
    ctx.require(dims[i] >= 0 && dims[i] < out_rank,
                "`dims` entry " + std::to_string(dims[i]) + " is outside the result rank " +
                    std::to_string(out_rank));
    ctx.require(i == 0 || dims[i] > dims[i - 1], "`dims` must be strictly increasing");
    if (in[i] == DimExpr(1)) continue;  // a size-1 dim stretches to any size
    ctx.unify(in[i], shape[dims[i]],
              "operand dim " + std::to_string(i) + " (" + in[i].str() + ") must be 1 or equal " +
                  "result dim " + std::to_string(dims[i]) + " (" + shape[dims[i]].str() + ")");
  }
  return {TensorType{ctx.in(0).dtype, shape}};
}

std::vector<TensorType> infer_reshape(InferContext& ctx) {
  const auto& shape = ctx.attrs().get_dims("shape");
  for (const auto& d : shape) {
    ctx.require(ctx.shapes().compare(d, 0) != Ordering::kLT, "`shape` has a negative dim");
  }
  ctx.unify(ctx.in(0).numel(), product(shape),
            "reshape of " + dims_str(ctx.in(0).shape) + " to " + dims_str(shape) +
                " must keep the element count");
  return {TensorType{ctx.in(0).dtype, shape}};
}

std::vector<TensorType> infer_transpose(InferContext& ctx) {
  const auto& perm = ctx.attrs().get_ints("perm");
  const auto& in = ctx.in(0).shape;
  ctx.require(perm.size() == in.size(), "`perm` has " + std::to_string(perm.size()) +
                                            " entries for a rank-" + std::to_string(in.size()) +
                                            " operand");
  std::vector<bool> seen(in.size());
  std::vector<DimExpr> out;
  for (int64_t p : perm) {
    ctx.require(p >= 0 && p < static_cast<int64_t>(in.size()) && !seen[p],
                "`perm` must be a permutation of 0.." + std::to_string(in.size() - 1));
    seen[p] = true;
    out.push_back(in[p]);
  }
  return {TensorType{ctx.in(0).dtype, out}};
}

std::vector<TensorType> infer_slice(InferContext& ctx) {
  auto shape = ctx.in(0).shape;
  int axis = ctx.axis(ctx.attrs().get_int("axis"), ctx.in(0).rank(), "axis");
  const DimExpr &start = ctx.attrs().get_dim("start"), &limit = ctx.attrs().get_dim("limit");
  auto must_not = [&](const DimExpr& a, Ordering bad, const DimExpr& b, const std::string& what) {
    ctx.require(ctx.shapes().compare(a, b) != bad, what);
  };
  must_not(start, Ordering::kLT, 0, "`start` (" + start.str() + ") is negative");
  must_not(limit, Ordering::kLT, start,
           "`limit` (" + limit.str() + ") is below `start` (" + start.str() + ")");
  must_not(limit, Ordering::kGT, shape[axis],
           "`limit` (" + limit.str() + ") exceeds dim " + std::to_string(axis) + " (" +
               shape[axis].str() + ")");
  shape[axis] = limit - start;
  return {TensorType{ctx.in(0).dtype, shape}};
}

std::vector<TensorType> infer_concat(InferContext& ctx) {
  int axis = ctx.axis(ctx.attrs().get_int("axis"), ctx.in(0).rank(), "axis");
  auto shape = ctx.in(0).shape;
  for (int i = 1; i < ctx.num_operands(); ++i) {
    same_dtype(ctx, 0, i);
    const auto& s = ctx.in(i).shape;
    ctx.require(s.size() == shape.size(), "operand " + std::to_string(i) + " has rank " +
                                              std::to_string(s.size()) + ", operand 0 has rank " +
                                              std::to_string(shape.size()));
    for (size_t d = 0; d < s.size(); ++d) {
      if (static_cast<int>(d) == axis) continue;
      ctx.unify(shape[d], s[d], "dim " + std::to_string(d) + " of operand " + std::to_string(i) +
                                    " must equal that of operand 0");
    }
    shape[axis] += s[axis];
  }
  return {TensorType{ctx.in(0).dtype, shape}};
}

std::vector<TensorType> infer_pad(InferContext& ctx) {
  const auto &low = ctx.attrs().get_dims("low"), &high = ctx.attrs().get_dims("high");
  auto shape = ctx.in(0).shape;
  ctx.require(low.size() == shape.size() && high.size() == shape.size(),
              "`low` and `high` need one entry per dim (" + std::to_string(shape.size()) + ")");
  for (size_t d = 0; d < shape.size(); ++d) {
    bool negative = ctx.shapes().compare(low[d], 0) == Ordering::kLT ||
                    ctx.shapes().compare(high[d], 0) == Ordering::kLT;
    ctx.require(!negative, "padding must not be negative (use slice to crop)");
    shape[d] += low[d] + high[d];
  }
  return {TensorType{ctx.in(0).dtype, shape}};
}

}  // namespace

void register_layout_ops(OpRegistry& r) {
  OpDef broadcast = layout("broadcast",
                           "stretches operand dim i to result dim dims[i] (size-1 dims stretch "
                           "to any size); result dims not in `dims` are new",
                           OpCategory::kBroadcast);
  broadcast.attrs = {{"shape", AttrKind::kDims, std::nullopt, {}},
                     {"dims", AttrKind::kInts, std::nullopt, {}}};
  broadcast.infer = infer_broadcast;
  r.add(std::move(broadcast));

  OpDef reshape = layout("reshape", "same elements, row-major, in `shape`", OpCategory::kLayout);
  reshape.attrs = {{"shape", AttrKind::kDims, std::nullopt, {}}};
  reshape.infer = infer_reshape;
  r.add(std::move(reshape));

  OpDef transpose = layout("transpose", "result dim i is operand dim perm[i]", OpCategory::kLayout);
  transpose.attrs = {{"perm", AttrKind::kInts, std::nullopt, {}}};
  transpose.infer = infer_transpose;
  r.add(std::move(transpose));

  OpDef slice = layout("slice", "elements [start, limit) along `axis`", OpCategory::kLayout);
  slice.attrs = {{"axis", AttrKind::kInt, std::nullopt, {}},
                 {"start", AttrKind::kDim, std::nullopt, {}},
                 {"limit", AttrKind::kDim, std::nullopt, {}}};
  slice.infer = infer_slice;
  r.add(std::move(slice));

  OpDef concat = layout("concat", "operands joined along `axis`", OpCategory::kLayout);
  concat.max_operands = -1;
  concat.attrs = {{"axis", AttrKind::kInt, std::nullopt, {}}};
  concat.infer = infer_concat;
  r.add(std::move(concat));

  OpDef pad = layout("pad", "adds low[d] and high[d] elements of `value` around each dim d",
                     OpCategory::kLayout);
  pad.attrs = {{"low", AttrKind::kDims, std::nullopt, {}},
               {"high", AttrKind::kDims, std::nullopt, {}},
               {"value", AttrKind::kFloat, 0.0, {}}};
  pad.infer = infer_pad;
  r.add(std::move(pad));
}

}  // namespace disc::ir
