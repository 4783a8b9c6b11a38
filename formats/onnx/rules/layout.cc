// Layout ONNX ops: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split, Slice, Expand
// and Gather. On Known operands they fold (the shape arithmetic of exported graphs goes through
// all of them); on tensors they become disc's layout ops. A target shape computed at import may
// be symbolic: Reshape's -1 is solved as the exact quotient of the element counts.
#include <limits>

#include "base/error.h"
#include "formats/onnx/op_context.h"

namespace disc::onnx {
namespace {

using ir::DimExpr;
using ir::Ordering;
using ir::Value;

// The row-major coordinates of flat index i in `shape`.
std::vector<int64_t> coords(int64_t i, const std::vector<int64_t>& shape) {
  std::vector<int64_t> c(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    c[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  return c;
}

int64_t flat(const std::vector<int64_t>& c, const std::vector<int64_t>& shape) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + c[d];
  return i;
}

// A Known whose element at each coordinate of `shape` is a's at `source(coordinate)`.
template <typename F>
Known gather_known(const Known& a, const std::vector<int64_t>& shape, F source) {
  Known out{a.dtype, shape, {}};
  const int64_t n = Known::count(shape);
  for (int64_t i = 0; i < n; ++i)
    out.elements.push_back(a.elements.at(flat(source(coords(i, shape)), a.shape)));
  return out;
}

// The known input i as constant ints.
std::vector<int64_t> ints(OpContext& c, int i, const std::string& what) {
  auto v = c.known(i, what).as_ints();
  if (!v) c.fail(what + " must be constant integers");
  return *v;
}

std::vector<DimExpr> reshape_target(OpContext& c, const std::vector<DimExpr>& from) {
  auto target = c.known(1, "the target shape").as_dims();
  if (!target) c.fail("the target shape must be integers");
  bool allow_zero = c.attr_int("allowzero", 0) != 0;
  int infer = -1;
  DimExpr rest = 1;
  for (int i = 0; i < static_cast<int>(target->size()); ++i) {
    DimExpr& d = (*target)[i];
    if (d == DimExpr(-1)) {
      if (infer >= 0) c.fail("the target shape has two -1 dims");
      infer = i;
      continue;
    }
    if (d.is_zero() && !allow_zero) {
      if (i >= static_cast<int>(from.size()))
        c.fail("target dim " + std::to_string(i) + " copies a dim the input lacks");
      d = from[i];
    }
    rest = rest * d;
  }
  if (infer >= 0) {
    auto q = ir::product(from).divide_exact(rest);
    if (!q)
      c.fail("cannot solve the target's -1: " + ir::product(from).str() + " elements over " +
             rest.str() + " is not an exact quotient");
    (*target)[infer] = *q;
  }
  return *target;
}

std::vector<Slot> reshape_rule(OpContext& c) {
  const Slot& x = c.in(0);
  std::vector<DimExpr> target = reshape_target(c, x.shape());
  if (x.known) {
    Known k = *x.known;
    k.shape.clear();
    for (const DimExpr& d : target) {
      if (!d.constant()) c.fail("a known tensor cannot take a symbolic shape");
      k.shape.push_back(*d.constant());
    }
    if (k.numel() != x.known->numel()) c.fail("the target shape holds another number of elements");
    return result(std::move(k));
  }
  return result(c.reshape(c.value(0), target));
}

std::vector<Slot> flatten_rule(OpContext& c) {
  auto shape = c.in(0).shape();
  const int rank = static_cast<int>(shape.size());
  int64_t a = c.attr_int("axis", 1);  // in [-rank, rank]: the dims before it make the rows
  if (a < -rank || a > rank) c.fail("axis " + std::to_string(a) + " is outside [-rank, rank]");
  const int axis = static_cast<int>(a < 0 ? a + rank : a);
  std::vector<DimExpr> head(shape.begin(), shape.begin() + axis),
      tail(shape.begin() + axis, shape.end());
  return result(c.reshape(c.value(0), {ir::product(head), ir::product(tail)}));
}

// Squeeze and Unsqueeze: the input with dims removed or inserted, as a reshape.
std::vector<Slot> squeeze_rule(OpContext& c, bool insert) {
  const Slot& x = c.in(0);
  std::vector<DimExpr> shape = x.shape();
  std::vector<int64_t> axes = c.has(1) ? ints(c, 1, "axes") : std::vector<int64_t>{};
  if (insert) {
    int rank = static_cast<int>(shape.size() + axes.size());
    std::vector<bool> added(rank, false);
    for (int64_t a : axes) added[c.axis(a, rank)] = true;
    std::vector<DimExpr> out;
    for (int i = 0, j = 0; i < rank; ++i) out.push_back(added[i] ? DimExpr(1) : shape[j++]);
    shape = out;
  } else {
    std::vector<bool> drop(shape.size(), axes.empty());
    for (int64_t a : axes) drop[c.axis(a, static_cast<int>(shape.size()))] = true;
    std::vector<DimExpr> out;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (drop[i] && shape[i] == DimExpr(1)) continue;
      if (drop[i] && !axes.empty())
        c.fail("dim " + std::to_string(i) + " is " + shape[i].str() + ", not 1");
      out.push_back(shape[i]);
    }
    shape = out;
  }
  if (x.known) {
    Known k = *x.known;
    k.shape.clear();
    for (const DimExpr& d : shape) k.shape.push_back(*d.constant());
    return result(std::move(k));
  }
  return result(c.reshape(c.value(0), shape));
}

std::vector<Slot> transpose_rule(OpContext& c) {
  int rank = c.in(0).rank();
  std::vector<int64_t> perm;
  if (auto p = c.attr_ints("perm")) {
    perm = *p;
  } else {
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int>(perm.size()) != rank)
    c.fail("`perm` has " + std::to_string(perm.size()) + " entries for a tensor of rank " +
           std::to_string(rank));
  for (int64_t& p : perm) p = c.axis(p, rank);
  if (const auto& k = c.in(0).known) {
    std::vector<int64_t> shape;
    for (int64_t p : perm) shape.push_back(k->shape[p]);
    return result(gather_known(*k, shape, [&](const std::vector<int64_t>& at) {
      std::vector<int64_t> from(rank);
      for (int i = 0; i < rank; ++i) from[perm[i]] = at[i];
      return from;
    }));
  }
  return result(c.add("transpose", {c.value(0)}, {{"perm", perm}}));
}

std::vector<Slot> concat_rule(OpContext& c) {
  if (c.num_inputs() < 1) c.fail("needs at least one input");
  int rank = c.in(0).rank();
  int axis = c.axis(c.attr_int("axis", 0), rank);
  if (c.all_known()) {
    std::vector<int64_t> shape = c.known(0, "").shape, starts;
    shape[axis] = 0;
    for (int i = 0; i < c.num_inputs(); ++i) {
      if (c.known(i, "").rank() != rank) c.fail("the inputs' ranks differ");
      starts.push_back(shape[axis]);
      shape[axis] += c.known(i, "").shape[axis];
    }
    Known out{c.known(0, "").dtype, shape, {}};
    for (int64_t i = 0, n = out.numel(); i < n; ++i) {
      std::vector<int64_t> at = coords(i, shape);
      int part = c.num_inputs() - 1;
      while (starts[part] > at[axis]) --part;
      at[axis] -= starts[part];
      const Known& k = c.known(part, "");
      out.elements.push_back(k.elements.at(flat(at, k.shape)));
    }
    return result(std::move(out));
  }
  std::vector<Value*> parts;
  for (int i = 0; i < c.num_inputs(); ++i) {
    Value* v = c.value(i);
    if (v->rank() == rank && v->shape()[axis] == DimExpr(0)) continue;  // empty: adds nothing
    parts.push_back(v);
  }
  if (parts.size() == 1) return result(parts[0]);
  return result(c.add("concat", parts, {{"axis", int64_t{axis}}}));
}

// v within [0, dim] where that can be decided.
DimExpr clamp(OpContext& c, DimExpr v, const DimExpr& dim) {
  if (auto k = v.constant(); k && *k <= 0) return 0;
  Ordering o = c.shapes().compare(v, dim);
  if (o == Ordering::kGT || o == Ordering::kGE) return dim;
  if (o == Ordering::kLT || o == Ordering::kLE || o == Ordering::kEQ) return v;
  c.fail("cannot tell whether " + v.str() + " is within the dim " + dim.str());
}

// A Slice bound (start or end) on a dim: negative counts from the end; huge means the end.
DimExpr bound(OpContext& c, const DimExpr& v, const DimExpr& dim) {
  auto k = v.constant();
  if (k && *k >= (int64_t{1} << 31)) return dim;
  if (k && *k < 0) return clamp(c, dim + v, dim);
  return clamp(c, v, dim);
}

// Slice's bounds, one entry per sliced axis (steps 1 unless given).
struct SliceSpec {
  std::vector<DimExpr> starts, ends;
  std::vector<int64_t> axes, steps;
};

SliceSpec slice_spec(OpContext& c) {
  auto starts = c.known(1, "starts").as_dims(), ends = c.known(2, "ends").as_dims();
  if (!starts || !ends || starts->size() != ends->size())
    c.fail("starts and ends must be integer lists of one length");
  SliceSpec s{*starts, *ends, {}, std::vector<int64_t>(starts->size(), 1)};
  if (c.has(3)) {
    s.axes = ints(c, 3, "axes");
  } else {
    for (size_t i = 0; i < starts->size(); ++i) s.axes.push_back(static_cast<int64_t>(i));
  }
  if (c.has(4)) s.steps = ints(c, 4, "steps");
  if (s.axes.size() != starts->size() || s.steps.size() != starts->size())
    c.fail("axes and steps must match starts");
  return s;
}

// A known tensor sliced, any step, as numpy slices (bounds clamped to the dim).
Known slice_known(OpContext& c, const Known& k, const SliceSpec& spec) {
  const int rank = k.rank();
  std::vector<int64_t> first(rank, 0), step(rank, 1), out = k.shape;
  for (size_t i = 0; i < spec.axes.size(); ++i) {
    int a = c.axis(spec.axes[i], rank);
    int64_t d = k.shape[a], s = spec.steps[i];
    auto sv = spec.starts[i].constant(), ev = spec.ends[i].constant();
    if (!sv || !ev || s == 0)
      c.fail("a known tensor's slice needs constant bounds and a nonzero step");
    auto norm = [&](int64_t v, int64_t lo, int64_t hi) {
      return std::clamp(v < 0 ? v + d : v, lo, hi);
    };
    int64_t b = s > 0 ? norm(*sv, 0, d) : norm(*sv, -1, d - 1),
            e = s > 0 ? norm(*ev, 0, d) : norm(*ev, -1, d - 1);
    s = std::clamp<int64_t>(s, -(d + 1), d + 1);  // a longer step takes one element, as this
    first[a] = b, step[a] = s;
    out[a] = s > 0 ? std::max<int64_t>(0, (e - b + s - 1) / s)
                   : std::max<int64_t>(0, (b - e - s - 1) / -s);
  }
  return gather_known(k, out, [&](std::vector<int64_t> at) {
    for (int i = 0; i < rank; ++i) at[i] = first[i] + at[i] * step[i];
    return at;
  });
}

std::vector<Slot> slice_rule(OpContext& c) {
  const SliceSpec spec = slice_spec(c);
  if (const auto& k = c.in(0).known) return result(slice_known(c, *k, spec));
  std::vector<DimExpr> shape = c.in(0).shape();
  Value* v = c.value(0);
  for (size_t i = 0; i < spec.axes.size(); ++i) {
    if (spec.steps[i] != 1)
      c.fail("slices with step " + std::to_string(spec.steps[i]) +
             " of a tensor are not imported (step 1 only)");
    int a = c.axis(spec.axes[i], static_cast<int>(shape.size()));
    DimExpr b = bound(c, spec.starts[i], shape[a]), e = bound(c, spec.ends[i], shape[a]);
    if (b.is_zero() && e == shape[a]) continue;
    v = c.add("slice", {v}, {{"axis", int64_t{a}}, {"start", b}, {"limit", e}});
  }
  return result(v);
}

std::vector<Slot> split_rule(OpContext& c) {
  std::vector<DimExpr> shape = c.in(0).shape();
  int axis = c.axis(c.attr_int("axis", 0), static_cast<int>(shape.size()));
  int n = static_cast<int>(c.node().output.size());
  std::vector<DimExpr> sizes;
  if (c.has(1)) {
    auto s = c.known(1, "split").as_dims();
    if (!s || static_cast<int>(s->size()) != n) c.fail("`split` must give one size per output");
    sizes = *s;
  } else {
    auto part = shape[axis].divide_exact(n);
    if (!part)
      c.fail("dim " + shape[axis].str() + " does not split into " + std::to_string(n) +
             " equal parts");
    sizes.assign(n, *part);
  }
  Value* v = c.value(0);
  std::vector<Slot> out;
  DimExpr at = 0;
  for (const DimExpr& s : sizes) {
    out.push_back(
        Slot{c.add("slice", {v}, {{"axis", int64_t{axis}}, {"start", at}, {"limit", at + s}})});
    at = at + s;
  }
  return out;
}

std::vector<Slot> expand_rule(OpContext& c) {
  auto target = c.known(1, "the shape").as_dims();
  if (!target) c.fail("the shape must be integers");
  const Slot& x = c.in(0);
  std::vector<DimExpr> shape = c.broadcast_shape({x.shape(), *target});
  if (x.known && x.known->numel() == 1 && x.known->elements[0].number()) {
    bool concrete = true;
    for (const DimExpr& d : shape) concrete = concrete && d.constant();
    if (!concrete)
      return {
          Slot{nullptr, std::nullopt, Fill{x.known->dtype, shape, *x.known->elements[0].number()}}};
  }
  if (x.known) {
    std::vector<int64_t> s;
    for (const DimExpr& d : shape) {
      if (!d.constant()) c.fail("a known tensor cannot expand to a symbolic shape");
      s.push_back(*d.constant());
    }
    return result(expand(*x.known, s));
  }
  return result(c.broadcast_to(c.value(0), shape));
}

// Gather of a tensor along an axis other than 0: moved to the front, gathered, moved back.
Value* gather_along(OpContext& c, Value* data, Value* indices, int axis) {
  int rank = data->rank();
  if (axis == 0) return c.add("gather", {data, indices});
  std::vector<int64_t> front = {axis};
  for (int i = 0; i < rank; ++i)
    if (i != axis) front.push_back(i);
  Value* g = c.add("gather", {c.add("transpose", {data}, {{"perm", front}}), indices});
  // g is [idx..., the other dims in order]; the result wants [dims before axis, idx..., after].
  int ir = indices->rank();
  std::vector<int64_t> back;
  for (int i = 0; i < axis; ++i) back.push_back(ir + i);
  for (int i = 0; i < ir; ++i) back.push_back(i);
  for (int i = axis + 1; i < rank; ++i) back.push_back(ir + i - 1);
  return c.add("transpose", {g}, {{"perm", back}});
}

// Gather of a known tensor at known indices (negative ones count from the end).
Known gather_picks(OpContext& c, const Known& k, const Known& idx, int axis) {
  auto picks = idx.as_ints();
  if (!picks) c.fail("the indices must be constant");
  int64_t d = k.shape[axis];
  for (int64_t& p : *picks) {
    if (p < -d || p >= d)
      c.fail("index " + std::to_string(p) + " is outside a dim of " + std::to_string(d));
    if (p < 0) p += d;
  }
  std::vector<int64_t> out(k.shape.begin(), k.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), k.shape.begin() + axis + 1, k.shape.end());
  const int ir = idx.rank();
  return gather_known(k, out, [&](const std::vector<int64_t>& at) {
    std::vector<int64_t> from(at.begin(), at.begin() + axis);
    std::vector<int64_t> which(at.begin() + axis, at.begin() + axis + ir);
    from.push_back((*picks)[flat(which, idx.shape)]);
    from.insert(from.end(), at.begin() + axis + ir, at.end());
    return from;
  });
}

std::vector<Slot> gather_rule(OpContext& c) {
  std::vector<DimExpr> shape = c.in(0).shape();
  int rank = static_cast<int>(shape.size());
  int axis = c.axis(c.attr_int("axis", 0), rank);
  const Slot& idx = c.in(1);
  if (c.in(0).known && idx.known) return result(gather_picks(c, *c.in(0).known, *idx.known, axis));
  Value* data = c.value(0);
  if (idx.known) {
    // Constant indices: negative ones count from the end of the (possibly symbolic) dim.
    auto picks = idx.known->as_ints();
    if (!picks) c.fail("the indices must be integers");
    if (idx.known->rank() == 0) {  // one index: a slice, the axis dropped
      DimExpr at = (*picks)[0] < 0 ? shape[axis] + (*picks)[0] : DimExpr((*picks)[0]);
      Value* s =
          c.add("slice", {data}, {{"axis", int64_t{axis}}, {"start", at}, {"limit", at + 1}});
      std::vector<DimExpr> out = shape;
      out.erase(out.begin() + axis);
      return result(c.reshape(s, out));
    }
    for (int64_t p : *picks)
      if (p < 0) c.fail("negative indices into a tensor are imported one at a time only");
  }
  Value* indices = c.value(1);
  if (!is_integer(indices->dtype())) c.fail("the indices must be integers");
  return result(gather_along(c, data, indices, axis));
}

}  // namespace

void add_layout_rules(RuleTable& t) {
  t["Reshape"] = {reshape_rule};
  t["Flatten"] = {flatten_rule};
  t["Squeeze"] = {[](OpContext& c) { return squeeze_rule(c, false); }};
  t["Unsqueeze"] = {[](OpContext& c) { return squeeze_rule(c, true); }};
  t["Transpose"] = {transpose_rule};
  t["Concat"] = {concat_rule};
  t["Slice"] = {slice_rule};
  t["Split"] = {split_rule};
  t["Expand"] = {expand_rule};
  t["Gather"] = {gather_rule};
}

}  // namespace disc::onnx
