// Collectives of a data-parallel run: every rank holds the same graph and runs it in the same
// order, each on its share of the batch. The reference kernel is the one-rank case; the engine's
// kernels (engine/kernels/cpu.cc) run across the Trainer's communicator, on its thread. With the
// optimizer state sharded (ZeRO stage 1), `rank_shard` takes this rank's part of a parameter and
// `all_gather` joins the ranks' updated parts.
#include <cstring>

#include "base/error.h"
#include "ir/autodiff.h"
#include "ir/data_parallel.h"
#include "ir/op_registry.h"
#include "ir/ops/ops.h"

namespace disc::ir {
namespace {

// One rank: each sum is its operand.
void all_reduce_kernel(const KernelArgs& a) {
  for (size_t i = 0; i < a.in.size(); ++i) {
    if (a.out[i].data != a.in[i].data) std::memcpy(a.out[i].data, a.in[i].data, a.in[i].bytes());
  }
}

// The elements per rank when `numel` elements are shared by `ranks`: the last rank's part is
// padded with zeros.
int64_t shard_size(int64_t numel, int64_t ranks) {
  return (numel + ranks - 1) / ranks;
}

void rank_shard_kernel(const KernelArgs& a) {
  copy_rank_part(a.in[0].data, a.in[0].numel(), dtype_size(a.out[0].dtype),
                 a.in[1].as<int64_t>()[0], a.out[0].data, a.out[0].numel());
}

// One rank: its part is the whole. Several need the ranks' communicator (the engine's kernels).
void require_one_rank(const KernelArgs& a) {
  if (a.a().get_int("ranks") != 1)
    throw InvalidArgument(a.op + " over several ranks runs on the ranks' communicator");
}
void all_gather_kernel(const KernelArgs& a) {
  require_one_rank(a);
  std::memcpy(a.out[0].data, a.in[0].data, static_cast<size_t>(a.out[0].bytes()));
}
void reduce_scatter_kernel(const KernelArgs& a) {
  require_one_rank(a);
  for (size_t i = 0; i < a.in.size(); ++i)
    std::memcpy(a.out[i].data, a.in[i].data, static_cast<size_t>(a.in[i].bytes()));
}

// The `ranks` attribute of the sharding ops and their collectives.
int64_t ranks_of(InferContext& ctx) {
  const int64_t ranks = ctx.attrs().get_int("ranks");
  ctx.require(ranks >= 1, "`ranks` must be at least 1");
  return ranks;
}

// Each operand's part of the ranks' sum: f32 or f64 of a static shape, all of one dtype.
std::vector<TensorType> parts_of_sums(InferContext& ctx) {
  const int64_t ranks = ranks_of(ctx);
  std::vector<TensorType> out;
  for (int i = 0; i < ctx.num_operands(); ++i) {
    const DType t = ctx.in(i).dtype;
    ctx.require((t == DType::kF32 || t == DType::kF64) && t == ctx.in(0).dtype,
                "operand " + std::to_string(i) + " has dtype " + std::string(dtype_name(t)) +
                    "; reduce_scatter sums f32 or f64, one dtype a bucket");
    const std::optional<int64_t> n = ctx.in(i).numel().constant();
    ctx.require(n.has_value(), "operand " + std::to_string(i) + " must have a static shape, not " +
                                   ctx.in(i).str());
    out.push_back(TensorType{t, {DimExpr(shard_size(*n, ranks))}});
  }
  return out;
}

void register_sharding_ops(OpRegistry& r) {
  OpDef shard{.name = "rank_shard",
              .category = OpCategory::kGatherScatter,
              .summary =
                  "this rank's part of x flattened: the elements [rank * s, rank * s + s) "
                  "with s = ceil(numel / ranks), zeros past the end"};
  shard.min_operands = shard.max_operands = 2;
  shard.attrs = {{"ranks", AttrKind::kInt, std::nullopt, {}}};
  shard.infer = [](InferContext& ctx) {
    const int64_t ranks = ranks_of(ctx);
    ctx.require_float(0);
    ctx.require(ctx.in(1).dtype == DType::kI64 && ctx.in(1).rank() == 0,
                "operand 1 (rank) must be an i64 scalar");
    const std::optional<int64_t> n = ctx.in(0).numel().constant();
    ctx.require(n.has_value(), "operand 0 must have a static shape, not " + ctx.in(0).str());
    return std::vector{TensorType{ctx.in(0).dtype, {DimExpr(shard_size(*n, ranks))}}};
  };
  shard.flops_per_element = 0;
  shard.reference = rank_shard_kernel;
  r.add(std::move(shard));

  OpDef gather{.name = "all_gather",
               .category = OpCategory::kCollective,
               .summary =
                   "the ranks' parts of a tensor (rank_shard's), joined in rank order and "
                   "shaped as `shape`"};
  gather.attrs = {{"ranks", AttrKind::kInt, std::nullopt, {}},
                  {"shape", AttrKind::kDims, std::nullopt, {}}};
  gather.infer = [](InferContext& ctx) {
    const int64_t ranks = ranks_of(ctx);
    ctx.require_float(0);
    const TensorType out{ctx.in(0).dtype, ctx.attrs().get_dims("shape")};
    const std::optional<int64_t> n = out.numel().constant(), part = ctx.in(0).numel().constant();
    ctx.require(n.has_value() && ctx.in(0).rank() == 1 && part == shard_size(*n, ranks),
                "operand 0 is " + ctx.in(0).str() + ", not one of " + std::to_string(ranks) +
                    " parts of a static " + out.str());
    return std::vector{out};
  };
  gather.flops_per_element = 0;
  gather.reference = all_gather_kernel;
  r.add(std::move(gather));

  OpDef scatter{.name = "reduce_scatter",
                .category = OpCategory::kCollective,
                .summary =
                    "this rank's part (rank_shard's) of each operand summed over every rank "
                    "(a gradient bucket)"};
  scatter.min_operands = 1;
  scatter.max_operands = -1;
  scatter.num_results = -1;
  scatter.attrs = {{"ranks", AttrKind::kInt, std::nullopt, {}}};
  scatter.infer = parts_of_sums;
  scatter.flops_per_element = 0;
  scatter.reference = reduce_scatter_kernel;
  r.add(std::move(scatter));
}

}  // namespace

void register_collective_ops(OpRegistry& r) {
  register_sharding_ops(r);
  OpDef d{.name = "all_reduce",
          .category = OpCategory::kCollective,
          .summary = "each operand summed elementwise over every rank (a gradient bucket)"};
  d.min_operands = 1;
  d.max_operands = -1;
  d.num_results = -1;
  d.infer = [](InferContext& ctx) {
    std::vector<TensorType> out;
    for (int i = 0; i < ctx.num_operands(); ++i) {
      const DType t = ctx.in(i).dtype;
      ctx.require(t == DType::kF32 || t == DType::kF64,
                  "operand " + std::to_string(i) + " has dtype " + std::string(dtype_name(t)) +
                      "; all_reduce sums f32 or f64");
      ctx.require(t == ctx.in(0).dtype, "operand " + std::to_string(i) + " has dtype " +
                                            std::string(dtype_name(t)) + ", operand 0 " +
                                            std::string(dtype_name(ctx.in(0).dtype)) +
                                            "; a bucket holds one dtype");
      out.push_back(ctx.in(i));
    }
    return out;
  };
  d.flops_per_element = 0;
  d.reference = all_reduce_kernel;
  // Every rank reads the same sum and backpropagates its own share of it: the gradient of each
  // operand is its result's (summing it again would count every rank's share N times).
  d.grad = [](GradContext& c) { return c.dy; };
  // Result i may take operand i's buffer: a bucket is summed in place.
  d.overwritable_of = [](const Attributes&, int results) {
    std::vector<std::vector<int>> table;
    for (int r = 0; r < results; ++r) table.push_back({r});
    return table;
  };
  r.add(std::move(d));
}

}  // namespace disc::ir
