// Ops that move or reinterpret data without arithmetic: broadcast, reshape, transpose, slice,
// concat, pad.
#include <cstring>

#include "ir/autodiff.h"
#include "ir/op_registry.h"
#include "ir/ops/index_math.h"
#include "ir/ops/kernels.h"
#include "ir/ops/lowerings.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

OpDef layout(const std::string& name, const std::string& summary, OpCategory category) {
  OpDef d{.name = name, .category = category, .summary = summary};
  d.flops_per_element = 0;
  d.reference_takes_half = true;  // the kernels move bytes, whatever the dtype
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
    ctx.require(dims[i] >= 0 && dims[i] < out_rank, "`dims` entry " + std::to_string(dims[i]) +
                                                        " is outside the result rank " +
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
      ctx.unify(shape[d], s[d],
                "dim " + std::to_string(d) + " of operand " + std::to_string(i) +
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

// Layout kernels move bytes, so one implementation serves every dtype.
const char* bytes_of(const TensorRef& t) {
  return static_cast<const char*>(t.data);
}
char* bytes_of_mut(const TensorRef& t) {
  return static_cast<char*>(t.data);
}

// out[idx] = in[src(idx)] for every output multi-index; src returns a flat input index.
template <typename F>
void gather_elements(const KernelArgs& a, F src) {
  const TensorRef &in = a.in[0], &out = a.out[0];
  int64_t size = dtype_size(in.dtype);
  if (out.numel() == 0) return;
  std::vector<int64_t> idx(out.shape.size(), 0);
  int64_t o = 0;
  do {
    std::memcpy(bytes_of_mut(out) + o++ * size, bytes_of(in) + src(idx) * size, size);
  } while (next_index(idx, out.shape));
}

// In chunks over the threads: one thread's copy does not saturate memory bandwidth.
void reshape_kernel(const KernelArgs& a) {
  if (a.in[0].data == a.out[0].data) return;  // run in place: the bytes are already there
  constexpr int64_t kChunk = 256 * 1024;
  const int64_t bytes = a.in[0].bytes();
  parallel_rows((bytes + kChunk - 1) / kChunk, [&](int64_t c) {
    std::memcpy(bytes_of_mut(a.out[0]) + c * kChunk, bytes_of(a.in[0]) + c * kChunk,
                std::min(kChunk, bytes - c * kChunk));
  });
}

void broadcast_kernel(const KernelArgs& a) {
  const auto& dims = a.a().get_ints("dims");
  const auto& in_shape = a.in[0].shape;
  auto strides = row_major_strides(in_shape);
  gather_elements(a, [&](const std::vector<int64_t>& idx) {
    int64_t flat = 0;
    for (size_t i = 0; i < dims.size(); ++i)
      flat += (in_shape[i] == 1 ? 0 : idx[dims[i]]) * strides[i];
    return flat;
  });
}

// The trailing dims the permutation leaves in place stay contiguous: each step copies one such
// run (the whole head dim of attention's [B, S, H, D] -> [B, H, S, D]), rows spread over threads.
void transpose_kernel(const KernelArgs& a) {
  const auto& perm = a.a().get_ints("perm");
  const TensorRef &in = a.in[0], &out = a.out[0];
  int moved = static_cast<int>(perm.size());  // dims [moved, rank) stay in place
  while (moved > 0 && perm[moved - 1] == moved - 1) --moved;
  int64_t run = dtype_size(in.dtype);
  for (size_t d = moved; d < perm.size(); ++d) run *= in.shape[d];
  const auto strides = row_major_strides(in.shape);
  const std::vector<int64_t> outer(out.shape.begin(), out.shape.begin() + moved);
  const int64_t size = dtype_size(in.dtype);
  parallel_rows(product_of(outer), [&](int64_t row) {
    int64_t src = 0;
    for (int64_t i = moved - 1, rest = row; i >= 0; --i) {
      src += (rest % outer[i]) * strides[perm[i]];
      rest /= outer[i];
    }
    std::memcpy(bytes_of_mut(out) + row * run, bytes_of(in) + src * size, run);
  });
}

void slice_kernel(const KernelArgs& a) {
  int axis = static_cast<int>(a.a().get_int("axis"));
  if (axis < 0) axis += a.in[0].rank();
  int64_t start = a.dim_attr("start"), limit = a.dim_attr("limit");
  if (start < 0 || limit < start || limit > a.in[0].shape[axis]) {
    throw ShapeError("slice [" + std::to_string(start) + ", " + std::to_string(limit) +
                     ") is outside dim " + std::to_string(axis) + " of size " +
                     std::to_string(a.in[0].shape[axis]));
  }
  auto strides = row_major_strides(a.in[0].shape);
  gather_elements(a, [&](const std::vector<int64_t>& idx) {
    int64_t flat = 0;
    for (size_t i = 0; i < idx.size(); ++i)
      flat += (idx[i] + (static_cast<int>(i) == axis ? start : 0)) * strides[i];
    return flat;
  });
}

void concat_kernel(const KernelArgs& a) {
  int axis = static_cast<int>(a.a().get_int("axis"));
  if (axis < 0) axis += a.out[0].rank();
  int64_t size = dtype_size(a.out[0].dtype);
  AxisSplit out = split_at(a.out[0].shape, axis);
  int64_t offset = 0;  // along the axis
  for (const TensorRef& in : a.in) {
    AxisSplit s = split_at(in.shape, axis);
    int64_t run = s.extent * s.inner * size;  // one outer row of this operand, contiguous
    for (int64_t o = 0; o < s.outer; ++o) {
      std::memcpy(bytes_of_mut(a.out[0]) + (o * out.extent + offset) * out.inner * size,
                  bytes_of(in) + o * run, run);
    }
    offset += s.extent;
  }
}

void pad_kernel(const KernelArgs& a) {
  auto low = a.dims_attr("low");
  const TensorRef &in = a.in[0], &out = a.out[0];
  double value = a.a().get_float("value");
  // Fill with the pad value, then copy the operand into place.
  dispatch_number(out.dtype, a.op, [&](auto t) {
    using T = decltype(t);
    std::fill_n(out.as<T>(), out.numel(), static_cast<T>(value));
  });
  if (in.numel() == 0) return;
  int64_t size = dtype_size(in.dtype);
  auto out_strides = row_major_strides(out.shape);
  std::vector<int64_t> idx(in.shape.size(), 0);
  int64_t i = 0;
  do {
    int64_t flat = 0;
    for (size_t d = 0; d < idx.size(); ++d) flat += (idx[d] + low[d]) * out_strides[d];
    std::memcpy(bytes_of_mut(out) + flat * size, bytes_of(in) + i++ * size, size);
  } while (next_index(idx, in.shape));
}

std::vector<Value*> broadcast_grad(GradContext& c) {
  // Sum over the new dims and over the size-1 dims that were stretched.
  std::vector<int> kept;
  const auto& dims = c.node.attrs().get_ints("dims");
  for (size_t i = 0; i < dims.size(); ++i) {
    if (!(c.x(0)->shape()[i] == DimExpr(1))) kept.push_back(static_cast<int>(dims[i]));
  }
  return {c.sum_to(c.dy[0], kept, c.x(0)->type())};
}

std::vector<Value*> transpose_grad(GradContext& c) {
  const auto& perm = c.node.attrs().get_ints("perm");
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  return {c.add("transpose", {c.dy[0]}, {{"perm", inverse}})};
}

std::vector<Value*> slice_grad(GradContext& c) {
  int rank = c.x(0)->rank();
  int64_t axis = c.node.attrs().get_int("axis");
  if (axis < 0) axis += rank;
  std::vector<DimExpr> low(rank, 0), high(rank, 0);
  low[axis] = c.node.attrs().get_dim("start");
  high[axis] = c.x(0)->shape()[axis] - c.node.attrs().get_dim("limit");
  return {c.add("pad", {c.dy[0]}, {{"low", low}, {"high", high}})};
}

std::vector<Value*> concat_grad(GradContext& c) {
  int64_t axis = c.node.attrs().get_int("axis");
  if (axis < 0) axis += c.y()->rank();
  std::vector<Value*> out;
  DimExpr offset = 0;
  for (const Value* in : c.node.operands()) {
    DimExpr limit = offset + in->shape()[axis];
    out.push_back(c.add("slice", {c.dy[0]}, {{"axis", axis}, {"start", offset}, {"limit", limit}}));
    offset = limit;
  }
  return out;
}

std::vector<Value*> pad_grad(GradContext& c) {
  const auto& low = c.node.attrs().get_dims("low");
  Value* v = c.dy[0];
  for (int d = 0; d < c.x(0)->rank(); ++d) {
    if (low[d].is_zero() && c.node.attrs().get_dims("high")[d].is_zero()) continue;
    v = c.add("slice", {v},
              {{"axis", int64_t{d}}, {"start", low[d]}, {"limit", low[d] + c.x(0)->shape()[d]}});
  }
  return {v};
}

// In a kernel a broadcast is a load: of a scalar, of a row value (dims: the leading ones), of a
// column value (dims: the last one, a norm's weight), or of the tensor itself.
Lowering broadcast_lowering() {
  Lowering l{.kind = FusionKind::kElementwise};
  l.fits = [](const KernelWriter& w, const Node& n) {
    const Value& x = *n.operand(0);
    const Fit out = w.fit_of(n.result()->shape());
    if (!computes_in_f32(n.result()) || out == Fit::kNone) return false;
    if (x.rank() == 0 || w.same(x.shape(), n.result()->shape())) return true;
    const auto& dims = n.attrs().get_ints("dims");
    const int r = static_cast<int>(w.space().size());
    if (out != Fit::kFull || r == 0) return false;
    if (dims.size() == 1 && dims[0] == r - 1 && w.same(x.shape(), {w.space().back()}))
      return true;  // by column
    std::vector<int64_t> leading(r - 1);
    for (int i = 0; i < r - 1; ++i) leading[i] = i;
    return dims == leading && w.same(x.shape(), rows_of(w.space()));  // by row
  };
  l.lower = [](KernelWriter& w, const Node& n) {
    const Value* x = n.operand(0);
    const int r = static_cast<int>(w.space().size());
    std::optional<Access> a;
    if (x->rank() == 0) a = Access::kScalar;
    // By column only when the one dim kept is the last: [R] kept along dim 0 is a row value.
    else if (n.attrs().get_ints("dims") == std::vector<int64_t>{r - 1} && r > 1)
      a = Access::kCol;
    w.set(n.result(), w.value(x, a));
  };
  return l;
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
  broadcast.grad = broadcast_grad;
  broadcast.reference = broadcast_kernel;
  broadcast.lowering = broadcast_lowering();
  broadcast.carries_constant = true;
  r.add(std::move(broadcast));

  OpDef reshape = layout("reshape", "same elements, row-major, in `shape`", OpCategory::kLayout);
  reshape.attrs = {{"shape", AttrKind::kDims, std::nullopt, {}}};
  reshape.infer = infer_reshape;
  reshape.grad = [](GradContext& c) {
    return std::vector<Value*>{c.add("reshape", {c.dy[0]}, {{"shape", c.x(0)->shape()}})};
  };
  reshape.reference = reshape_kernel;
  reshape.carries_constant = true;
  reshape.overwritable = {0};  // in place, the result is the operand's bytes: no copy at all
  r.add(std::move(reshape));

  OpDef transpose = layout("transpose", "result dim i is operand dim perm[i]", OpCategory::kLayout);
  transpose.attrs = {{"perm", AttrKind::kInts, std::nullopt, {}}};
  transpose.infer = infer_transpose;
  transpose.grad = transpose_grad;
  transpose.reference = transpose_kernel;
  r.add(std::move(transpose));

  OpDef slice = layout("slice", "elements [start, limit) along `axis`", OpCategory::kLayout);
  slice.attrs = {{"axis", AttrKind::kInt, std::nullopt, {}},
                 {"start", AttrKind::kDim, std::nullopt, {}},
                 {"limit", AttrKind::kDim, std::nullopt, {}}};
  slice.infer = infer_slice;
  slice.grad = slice_grad;
  slice.reference = slice_kernel;
  r.add(std::move(slice));

  OpDef concat = layout("concat", "operands joined along `axis`", OpCategory::kLayout);
  concat.max_operands = -1;
  concat.attrs = {{"axis", AttrKind::kInt, std::nullopt, {}}};
  concat.infer = infer_concat;
  concat.grad = concat_grad;
  concat.reference = concat_kernel;
  r.add(std::move(concat));

  OpDef pad = layout("pad", "adds low[d] and high[d] elements of `value` around each dim d",
                     OpCategory::kLayout);
  pad.attrs = {{"low", AttrKind::kDims, std::nullopt, {}},
               {"high", AttrKind::kDims, std::nullopt, {}},
               {"value", AttrKind::kFloat, 0.0, {}}};
  pad.infer = infer_pad;
  pad.grad = pad_grad;
  pad.reference = pad_kernel;
  pad.reference_takes_half = false;  // it writes `value` in the dtype
  r.add(std::move(pad));
}

}  // namespace disc::ir
