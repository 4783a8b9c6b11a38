// Reductions over a set of axes.
#include <algorithm>
#include <cmath>

#include "ir/autodiff.h"
#include "ir/op_registry.h"
#include "ir/ops/index_math.h"
#include "ir/ops/lowerings.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

enum class Reduction { kSum, kMax, kMean };

// Accumulates in double, in row-major input order, so results do not depend on threads.
void reduce_kernel(const KernelArgs& a, Reduction kind) {
  const TensorRef &in = a.in[0], &out = a.out[0];
  std::vector<bool> reduced(in.rank(), false);
  for (int64_t ax : a.a().get_ints("axes")) reduced[ax < 0 ? ax + in.rank() : ax] = true;
  // Output stride of each input dim (0 for reduced dims).
  std::vector<int64_t> kept_shape;
  for (int d = 0; d < in.rank(); ++d) {
    if (!reduced[d]) kept_shape.push_back(in.shape[d]);
  }
  auto kept_strides = row_major_strides(kept_shape);
  std::vector<int64_t> stride(in.rank(), 0);
  for (int d = 0, k = 0; d < in.rank(); ++d) {
    if (!reduced[d]) stride[d] = kept_strides[k++];
  }
  int64_t n_out = out.numel(), count = n_out ? in.numel() / n_out : 0;
  std::vector<double> acc(n_out, kind == Reduction::kMax ? -INFINITY : 0.0);
  dispatch_number(in.dtype, a.op, [&](auto t) {
    using T = decltype(t);
    const T* x = in.as<T>();
    std::vector<int64_t> idx(in.rank(), 0);
    for (int64_t i = 0, n = in.numel(); i < n; ++i, next_index(idx, in.shape)) {
      int64_t o = 0;
      for (int d = 0; d < in.rank(); ++d) o += idx[d] * stride[d];
      double v = static_cast<double>(x[i]);
      acc[o] = kind == Reduction::kMax ? std::max(acc[o], v) : acc[o] + v;
    }
    T* y = out.as<T>();
    for (int64_t o = 0; o < n_out; ++o) {
      y[o] =
          static_cast<T>(kind == Reduction::kMean ? acc[o] / static_cast<double>(count) : acc[o]);
    }
  });
}

// dy stretched back over the reduced axes, to x's shape.
Value* expand(GradContext& c, Value* dy) {
  int rank = c.x(0)->rank();
  std::vector<int64_t> dims;
  bool keep = c.node.attrs().get_bool("keepdims");
  std::vector<int64_t> axes;
  for (int64_t a : c.node.attrs().get_ints("axes")) axes.push_back(a < 0 ? a + rank : a);
  for (int64_t d = 0; d < rank; ++d) {
    if (keep || std::find(axes.begin(), axes.end(), d) == axes.end()) dims.push_back(d);
  }
  return c.add("broadcast", {dy}, {{"shape", c.x(0)->shape()}, {"dims", dims}});
}

std::vector<Value*> reduce_grad(GradContext& c, Reduction kind) {
  Value* g = expand(c, c.dy[0]);
  if (kind == Reduction::kSum) return {g};
  if (kind == Reduction::kMean) {
    DimExpr count = 1;
    const auto& shape = c.x(0)->shape();
    for (int64_t a : c.node.attrs().get_ints("axes")) count *= shape[a < 0 ? a + shape.size() : a];
    Value* n = c.add("dim_value", {}, {{"dim", count}, {"dtype", c.x(0)->dtype()}});
    Value* nb = c.add("broadcast", {n}, {{"shape", shape}, {"dims", std::vector<int64_t>{}}});
    return {c.add("div", {g, nb})};
  }
  // max: the gradient goes to every element equal to the maximum.
  Value* is_max = c.add("eq", {c.x(0), expand(c, c.y())});
  return {c.add("select", {is_max, g, c.full_like(c.x(0), 0.0)})};
}

// A reduction over every axis of its operand (of rank 1 or more) to a scalar.
bool reduces_every_axis(const Node& n) {
  std::vector<int64_t> axes = n.attrs().get_ints("axes");
  const int64_t rank = n.operand(0)->rank();
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  std::sort(axes.begin(), axes.end());
  if (rank == 0 || static_cast<int64_t>(axes.size()) != rank) return false;
  for (int64_t i = 0; i < rank; ++i)
    if (axes[i] != i) return false;
  return true;
}

// Over the space's last axis, a row value; over every axis (a gradient norm's sum of squares), a
// row sum summed over rows in f32.
Lowering reduce_lowering(KOp k) {
  Lowering l{.kind = FusionKind::kReduction};
  l.fits = [k](const KernelWriter& w, const Node& n) {
    if (!reads_the_space(w, n)) return false;
    if (k == KOp::kReduceSum && reduces_every_axis(n)) return n.result()->dtype() == DType::kF32;
    const auto& axes = n.attrs().get_ints("axes");
    return axes.size() == 1 && (axes[0] == last_of(w) || axes[0] == -1) &&
           !n.attrs().get_bool("keepdims");
  };
  l.lower = [k](KernelWriter& w, const Node& n) {
    if (k == KOp::kReduceSum && reduces_every_axis(n))
      return w.set_sum(n.result(), w.emit(k, {w.value(n.operand(0))}), Access::kScalar);
    w.set(n.result(), w.emit(k, {w.value(n.operand(0))}));
  };
  return l;
}

OpDef reduce(const std::string& name, const std::string& summary, bool float_only, Reduction kind) {
  OpDef d{.name = name, .category = OpCategory::kReduce, .summary = summary};
  d.attrs = {{"axes", AttrKind::kInts, std::nullopt, {}}, {"keepdims", AttrKind::kBool, false, {}}};
  d.infer = [float_only](InferContext& ctx) {
    ctx.require_float(0, /*allow_int=*/!float_only);
    auto axes = axes_attr(ctx, "axes", ctx.in(0).rank());
    bool keep = ctx.attrs().get_bool("keepdims");
    std::vector<DimExpr> out;
    for (int d = 0; d < ctx.in(0).rank(); ++d) {
      bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
      if (!reduced)
        out.push_back(ctx.in(0).shape[d]);
      else if (keep)
        out.push_back(1);
    }
    return std::vector{TensorType{ctx.in(0).dtype, out}};
  };
  d.cost = [](const auto& in, const auto& out, const Attributes&) {
    return input_proportional_cost(in, out, 1);
  };
  d.reference = [kind](const KernelArgs& a) { reduce_kernel(a, kind); };
  d.grad = [kind](GradContext& c) { return reduce_grad(c, kind); };
  d.precision = Precision::kF32;
  if (kind != Reduction::kMean)
    d.lowering = reduce_lowering(kind == Reduction::kSum ? KOp::kReduceSum : KOp::kReduceMax);
  return d;
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  r.add(reduce("reduce_sum", "sum over `axes`", false, Reduction::kSum));
  r.add(reduce("reduce_max", "maximum over `axes`", false, Reduction::kMax));
  r.add(reduce("reduce_mean", "mean over `axes`", true, Reduction::kMean));
}

}  // namespace disc::ir
