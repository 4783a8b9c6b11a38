// The host's kernels (memory the host addresses: cpu, sim), each registered beside the code that
// marshals a node's attributes and tensors into its arguments. An op without one here runs its
// reference kernel.
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "devices/communicator.h"
#include "devices/cpu/block_attention.h"
#include "devices/cpu/linear_cross_entropy.h"
#include "devices/cpu/rope.h"
#include "engine/kernels/kernel_registry.h"
#include "engine/kernels/shared.h"
#include "ir/ops/attention_dims.h"
#include "ir/ops/kernels.h"
#include "ir/ops/rope_dims.h"

namespace disc::engine {
namespace {

constexpr DeviceKind kHost = DeviceKind::kHost;

// attention and attention_grad by blocks of query rows (devices/cpu/block_attention.h): the
// [..., S, S] scores exist only a block at a time. `s` (with the packed sequences' offsets, read
// from operand `offsets_at` when the node has it) must outlive the arguments.
ir::AttentionDims attention_dims_of(const ir::KernelArgs& args, size_t offsets_at) {
  return ir::attention_dims(args.in[0], args.in[2], args.a(),
                            args.in.size() > offsets_at ? &args.in[offsets_at] : nullptr);
}

devices::AttentionArgs attention_args(const ir::KernelArgs& args, const ir::AttentionDims& s) {
  const ir::TensorRef &q = args.in[0], &v = args.in[2];
  const bool packed = !s.offsets.empty();
  return {.dtype = q.dtype,
          .heads = s.heads,
          .sq = s.sq,
          .sk = s.sk,
          .d = s.d,
          .dv = s.dv,
          .causal = s.causal,
          .scale = s.scale,
          .q = q.data,
          .k = args.in[1].data,
          .v = v.data,
          .offsets = packed ? s.offsets.data() : nullptr,
          .sequences = packed ? static_cast<int64_t>(s.offsets.size()) - 1 : 0};
}

jit::KernelRun attention(const ir::Node&, const ir::KernelArgs& a, KernelContext& ctx) {
  const ir::AttentionDims s = attention_dims_of(a, 3);
  devices::attention_forward(*ctx.dev, attention_args(a, s), a.out[0].data);
  return {};
}

jit::KernelRun attention_grad(const ir::Node&, const ir::KernelArgs& a, KernelContext& ctx) {
  const ir::AttentionDims s = attention_dims_of(a, 4);
  devices::attention_backward(*ctx.dev, attention_args(a, s), a.in[3].data, a.out[0].data,
                              a.out[1].data, a.out[2].data);
  return {};
}

// The head's loss and gradients by panels of rows (devices/cpu/linear_cross_entropy.h): the
// [rows, classes] logits exist only a panel at a time. Labels are checked and counted here.
jit::KernelRun linear_cross_entropy(const ir::Node& n, const ir::KernelArgs& args,
                                    KernelContext& ctx) {
  const ir::TensorRef &h = args.in[0], &w = args.in[1], &labels = args.in[2];
  const bool tw = n.attrs().get_bool("transpose_w");
  const int64_t classes = w.shape[tw ? 0 : 1], ignore = n.attrs().get_int("ignore_index");
  std::vector<int64_t> ids(static_cast<size_t>(labels.numel()));
  for (int64_t i = 0; i < labels.numel(); ++i) ids[i] = ir::index_at(labels, i);
  const devices::LinearCrossEntropyArgs a{
      .dtype = h.dtype,
      .rows = labels.numel(),
      .d = h.shape.back(),
      .classes = classes,
      .transpose_w = tw,
      .h = h.data,
      .w = w.data,
      .labels = ids.data(),
      .ignore_index = ignore,
      .count = ir::count_labels(n.op().name, labels, classes, ignore)};
  devices::linear_cross_entropy(*ctx.dev, a, args.out[0].data, args.out[1].data, args.out[2].data);
  return {};
}

// The reference's table of rope angles for (head size, theta), at positions [0, positions) at
// least, kept for the process: every rope node of every step reads the same one, and computing it
// each time took half of the kernel's time. A table only grows, and a position's angles do not
// depend on how many it holds.
std::shared_ptr<const ir::RopeTable> rope_angles(int64_t d, double theta, int64_t positions) {
  static std::mutex mu;
  static std::map<std::pair<int64_t, double>, std::shared_ptr<const ir::RopeTable>> tables;
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<const ir::RopeTable>& t = tables[{d, theta}];
  if (!t || t->positions < positions)
    t = std::make_shared<const ir::RopeTable>(ir::rope_table(d, theta, positions));
  return t;
}

// rope on the operand's own type (devices/cpu/rope.h), with the reference's positions and angles.
jit::KernelRun rope(const ir::Node&, const ir::KernelArgs& a, KernelContext& ctx) {
  const ir::RopeDims r = ir::rope_dims(a);
  const std::shared_ptr<const ir::RopeTable> angles = rope_angles(r.d, r.theta, r.positions);
  const ir::RopeTable& table = *angles;
  devices::rope(*ctx.dev,
                {.dtype = a.in[0].dtype,
                 .rows = r.rows,
                 .d = r.d,
                 .seq = r.seq,
                 .inner = r.inner,
                 .position = r.position.data(),
                 .cos = table.cos.data(),
                 .sin = table.sin.data(),
                 .inverse = r.inverse,
                 .x = a.in[0].data},
                a.out[0].data);
  return {};
}

// A collective a kernel started: left to run beside the step where the executor takes it
// (ctx.later), else finished here.
void run_or_hand_over(devices::Collective c, KernelContext& ctx) {
  if (ctx.later) {
    ctx.later->push_back(std::move(c));
  } else {
    c.get();
  }
}

// A gradient bucket summed over the ranks, one collective a tensor (in place where the result
// took its operand's buffer). Not one over the bucket packed: MPI splits a message into segments
// by its size, and with three ranks or more each segment's sum runs in another rank order, so the
// bits would depend on where the buckets end. The sums run on the communicator's thread while
// the step goes on (ctx.later), except where the node is staged from a GPU: its tensors are copied
// to the host and back around this call.
jit::KernelRun all_reduce(const ir::Node&, const ir::KernelArgs& a, KernelContext& ctx) {
  for (size_t i = 0; i < a.in.size(); ++i) {
    const ir::TensorRef &in = a.in[i], &out = a.out[i];
    if (out.data != in.data) std::memcpy(out.data, in.data, in.bytes());
    if (!ctx.comm) continue;
    run_or_hand_over(ctx.comm->start_all_reduce_sum(out.data, out.numel(), out.dtype), ctx);
  }
  return {};
}

// A gradient bucket summed over the ranks, each rank keeping its part of each sum (ZeRO stage 1):
// one collective a tensor, as all_reduce.
jit::KernelRun reduce_scatter(const ir::Node& n, const ir::KernelArgs& a, KernelContext& ctx) {
  if (!ctx.comm) {
    n.op().reference(a);
    return {};
  }
  for (size_t i = 0; i < a.in.size(); ++i) {
    run_or_hand_over(ctx.comm->start_reduce_scatter_sum(a.in[i].data, a.in[i].numel(),
                                                        a.in[i].dtype, a.out[i].data),
                     ctx);
  }
  return {};
}

// The ranks' updated parts of a parameter joined (ZeRO stage 1): the communicator copies this
// rank's part as the node runs and writes the whole on its thread.
jit::KernelRun all_gather(const ir::Node& n, const ir::KernelArgs& a, KernelContext& ctx) {
  if (!ctx.comm) {
    n.op().reference(a);
    return {};
  }
  run_or_hand_over(ctx.comm->start_all_gather(a.in[0].data, a.in[0].numel(), a.in[0].dtype,
                                              a.out[0].data, a.out[0].numel()),
                   ctx);
  return {};
}

}  // namespace

void register_cpu_kernels(KernelRegistry& r) {
  for (DType t : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
    r.add({.op = "matmul",
           .device = kHost,
           .dtype = t,
           .name = "cpu/device_gemm",
           .run = device_gemm});
    r.add({.op = "attention",
           .device = kHost,
           .dtype = t,
           .name = "cpu/block_attention",
           .run = attention});
    r.add({.op = "attention_grad",
           .device = kHost,
           .dtype = t,
           .name = "cpu/block_attention",
           .run = attention_grad});
  }
  for (DType t : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
    r.add({.op = "rope", .device = kHost, .dtype = t, .name = "cpu/rope", .run = rope});
    r.add({.op = "linear_cross_entropy",
           .device = kHost,
           .dtype = t,
           .name = "cpu/linear_cross_entropy",
           .run = linear_cross_entropy});
  }
  for (DType t : {DType::kF32, DType::kF64}) {
    r.add({.op = "all_reduce",
           .device = kHost,
           .dtype = t,
           .name = "cpu/all_reduce",
           .run = all_reduce});
    r.add({.op = "reduce_scatter",
           .device = kHost,
           .dtype = t,
           .name = "cpu/reduce_scatter",
           .run = reduce_scatter});
    r.add({.op = "all_gather",
           .device = kHost,
           .dtype = t,
           .name = "cpu/all_gather",
           .run = all_gather});
  }
  // Fused nodes as kernels compiled by LLVM (jit/cpu/fused_runner.h), where the executor has them.
  r.add({.op = "fused",
         .device = kHost,
         .name = "cpu/llvm_fused",
         .run = run_fused,
         .supports = has_fused_kernel,
         .prepare = prepare_fused});
}

}  // namespace disc::engine
