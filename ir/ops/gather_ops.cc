// Row gathers (embedding lookup) and their gradient, scatter-add.
#include <algorithm>
#include <cstring>

#include "ir/autodiff.h"
#include "ir/op_registry.h"
#include "ir/ops/kernels.h"
#include "ir/ops/ops.h"
#include "ir/ops/shape_helpers.h"

namespace disc::ir {
namespace {

// gather(table [V, rest...], indices [idx...]) -> [idx..., rest...]
std::vector<TensorType> infer_gather(InferContext& ctx) {
  ctx.require(ctx.in(0).rank() >= 1, "operand 0 (the table) needs rank >= 1");
  ctx.require_integer(1);
  std::vector<DimExpr> out = ctx.in(1).shape;
  out.insert(out.end(), ctx.in(0).shape.begin() + 1, ctx.in(0).shape.end());
  return {TensorType{ctx.in(0).dtype, out}};
}

// scatter_add(base [V, rest...], indices [idx...], updates [idx..., rest...]) -> [V, rest...]
std::vector<TensorType> infer_scatter_add(InferContext& ctx) {
  ctx.require_float(0, /*allow_int=*/true);
  ctx.require(ctx.in(0).rank() >= 1, "operand 0 (the base) needs rank >= 1");
  ctx.require_integer(1);
  same_dtype(ctx, 0, 2);
  std::vector<DimExpr> want = ctx.in(1).shape;
  want.insert(want.end(), ctx.in(0).shape.begin() + 1, ctx.in(0).shape.end());
  const auto& upd = ctx.in(2).shape;
  ctx.require(upd.size() == want.size(), "operand 2 (updates) has shape " + dims_str(upd) +
                                             "; expected indices' shape then base's row shape " +
                                             dims_str(want));
  for (size_t i = 0; i < want.size(); ++i) {
    ctx.unify(upd[i], want[i], "updates dim " + std::to_string(i) + " must equal " + want[i].str());
  }
  return {ctx.in(0)};
}

int64_t checked_row(const KernelArgs& a, const TensorRef& indices, int64_t i, int64_t rows) {
  int64_t r = index_at(indices, i);
  if (r < 0 || r >= rows) throw_bad_index(a.op, r, i, rows);
  return r;
}

// out[i, :] = table[indices[i], :]
void gather_kernel(const KernelArgs& a) {
  const TensorRef &table = a.in[0], &indices = a.in[1];
  int64_t row = dtype_size(table.dtype) * (table.numel() / std::max<int64_t>(table.shape[0], 1));
  for (int64_t i = 0, n = indices.numel(); i < n; ++i) {
    int64_t r = checked_row(a, indices, i, table.shape[0]);
    std::memcpy(static_cast<char*>(a.out[0].data) + i * row,
                static_cast<const char*>(table.data) + r * row, row);
  }
}

// out = base; out[indices[i], :] += updates[i, :], in index order (deterministic).
void scatter_add_kernel(const KernelArgs& a) {
  const TensorRef &base = a.in[0], &indices = a.in[1], &updates = a.in[2];
  int64_t cols = base.numel() / std::max<int64_t>(base.shape[0], 1);
  dispatch_number(base.dtype, a.op, [&](auto t) {
    using T = decltype(t);
    T* out = a.out[0].as<T>();
    if (out != base.as<T>()) std::copy_n(base.as<T>(), base.numel(), out);
    const T* u = updates.as<T>();
    for (int64_t i = 0, n = indices.numel(); i < n; ++i) {
      int64_t r = checked_row(a, indices, i, base.shape[0]);
      for (int64_t c = 0; c < cols; ++c) out[r * cols + c] += u[i * cols + c];
    }
  });
}

}  // namespace

void throw_bad_index(const std::string& op, int64_t index, int64_t position, int64_t rows) {
  throw InvalidArgument(op + ": index " + std::to_string(index) + " at position " +
                        std::to_string(position) + " is outside [0, " + std::to_string(rows) +
                        "); check the token ids against the vocabulary size");
}

void register_gather_ops(OpRegistry& r) {
  OpDef gather{.name = "gather",
               .category = OpCategory::kGatherScatter,
               .summary = "rows of the table picked by integer indices (embedding lookup)"};
  gather.min_operands = gather.max_operands = 2;
  gather.flops_per_element = 0;
  gather.infer = infer_gather;
  gather.reference = gather_kernel;
  gather.reference_takes_half = true;  // it copies rows of bytes
  gather.grad = [](GradContext& c) {
    return std::vector<Value*>{c.add("scatter_add", {c.full_like(c.x(0), 0.0), c.x(1), c.dy[0]}),
                               nullptr};
  };
  r.add(std::move(gather));

  OpDef scatter{.name = "scatter_add",
                .category = OpCategory::kGatherScatter,
                .summary = "base plus each update row added at its index (gather's gradient)"};
  scatter.min_operands = scatter.max_operands = 3;
  scatter.infer = infer_scatter_add;
  scatter.reference = scatter_add_kernel;
  scatter.grad = [](GradContext& c) {
    return std::vector<Value*>{c.dy[0], nullptr, c.add("gather", {c.dy[0], c.x(1)})};
  };
  r.add(std::move(scatter));
}

}  // namespace disc::ir
