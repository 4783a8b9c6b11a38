#include "engine/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <set>

#include "devices/block_attention.h"
#include "devices/cpu/cpu_device.h"
#include "devices/linear_cross_entropy.h"
#include "devices/tril_gemm.h"
#include "engine/binding.h"
#include "ir/error.h"
#include "ir/ops/attention_dims.h"
#include "ir/ops/kernels.h"
#include "ir/ops/matmul_dims.h"

namespace disc::engine {

// The state of one run.
struct Executor::Run {
  ir::Bindings b;
  std::map<const ir::Value*, Tensor> env;
  std::map<const ir::Value*, devices::HostBuffer> offloaded;  // evicted to host memory
  // Reloaded: kept until the step ends, since the copy back may still be reading them.
  std::vector<devices::HostBuffer> reloaded;
  StepStats stats;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  double since_start() const {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  }
};

Executor::Executor(const ir::Graph& g, memory::Allocator& alloc, const memory::GovernorOptions& memory,
                   jit::KernelCache* kernels, bool background_compile, jit::GpuKernels* gpu_kernels)
    : g_(g), alloc_(alloc), governor_(g, memory), gpu_(gpu_kernels) {
  // Host kernels for fused nodes, unless the device compiles its own (nodes staged from a device
  // without them run on the host).
  if (kernels && !gpu_) fused_ = std::make_unique<jit::FusedRunner>(g, *kernels, background_compile);
  for (const ir::Node* n : g.nodes()) {
    if (!n->op().reference && n->op().name != "matmul") {
      throw InvalidArgument("op `" + n->op().name + "` has no reference kernel yet");
    }
  }
}

std::map<std::string, Tensor> Executor::run(std::map<std::string, Tensor>& args, StepStats* stats) {
  Run r;
  alloc_.reset_peak();
  const int64_t allocations = alloc_.stats().allocations;
  ShapeOf shapes;
  for (const auto& [name, t] : args) shapes[name] = {t.dtype(), t.shape()};
  r.b = bind_symbols(g_, shapes);
  const memory::MemoryPlan& plan = governor_.plan(r.b, alloc_.stats().live_bytes);
  if (fused_) compile_kernels(r);
  const memory::Liveness& live = governor_.liveness();

  for (const ir::Value* a : g_.arguments()) r.env[a] = args.at(a->name());
  for (int i = 0; i < live.steps(); ++i) {
    for (const memory::RegenRun& u : plan.regen_runs[i]) regenerate(u, plan, r);
    run_node(*live.order[i], r, /*in_place=*/true);
    for (const auto& [arg, v] : live.copies_after[i]) {
      const Tensor &target = r.env.at(arg), &value = r.env.at(v);
      target.copy_from(value);
    }
    for (const ir::Value* v : live.frees_after[i]) r.env.erase(v);
    for (int e : plan.evict_after[i]) evict(plan.evictions[e], r);
  }
  if (!r.offloaded.empty() || !r.reloaded.empty()) alloc_.device().synchronize();  // before their memory goes
  std::map<std::string, Tensor> outputs;
  for (const auto& [name, v] : g_.outputs()) outputs[name] = r.env.at(v);
  if (stats) {
    *stats = std::move(r.stats);
    stats->ms = r.since_start() / 1e3;
    stats->live_peak_bytes = alloc_.stats().peak_bytes;
    stats->reserved_peak_bytes = alloc_.stats().reserved_peak_bytes;
    stats->planned_peak_bytes = plan.peak;
    stats->held_before_step_bytes = plan.held_before_step;
    stats->allocations = alloc_.stats().allocations - allocations;
    stats->bindings = r.b;
  }
  return outputs;
}

// The value whose buffer result v is written into, by the schedule: an update's argument, or an
// operand that dies at v's node; null for a buffer of its own.
const ir::Value* Executor::buffer_for(const ir::Value* v) const {
  const memory::Liveness& live = governor_.liveness();
  if (auto it = live.written_into.find(v); it != live.written_into.end()) return it->second;
  if (auto it = live.donor.find(v); it != live.donor.end()) return it->second;
  return nullptr;
}

void Executor::run_node(const ir::Node& n, Run& r, bool in_place) {
  const double begin = observer_ ? r.since_start() : 0;
  ir::KernelArgs args{.op = n.op().name, .attrs = &n.attrs(), .bindings = &r.b};
  for (const ir::Value* v : n.operands()) args.in.push_back(r.env.at(v).ref());
  for (const ir::Value* v : n.results()) {
    std::vector<int64_t> shape = concrete_shape(g_, *v, r.b);
    const ir::Value* buffer = in_place ? buffer_for(v) : nullptr;
    Tensor t = buffer ? r.env.at(buffer).reshaped(std::move(shape)) : Tensor::empty(v->dtype(), std::move(shape), alloc_);
    args.out.push_back(t.ref());
    r.env[v] = std::move(t);
  }
  try {
    if (alloc_.device().is_host()) {
      run_on_host(n, args, alloc_.device(), r);
    } else {
      run_on_device(n, args, r);
    }
  } catch (const Error& e) {
    rethrow_with_context(e, g_.describe(n) + ": ");
  }
  if (observer_) observer_({.node = &n, .begin_us = begin, .end_us = r.since_start(), .live_bytes = alloc_.stats().live_bytes});
}

// Host memory: the device's library GEMM, the block kernels of attention and of the head's
// cross-entropy, compiled JIT kernels for fused nodes, the reference kernel otherwise. `dev` runs
// the GEMMs inside (the executor's device, or the host's for nodes staged from a GPU).
void Executor::run_on_host(const ir::Node& n, const ir::KernelArgs& args, devices::Device& dev, Run& r) {
  const std::string& op = n.op().name;
  if (op == "matmul") return gemm(n, args.in, args.out[0], dev);
  if (op == "attention" || op == "attention_grad") return attention(n, args, dev);
  if (op == "linear_cross_entropy") return linear_cross_entropy(n, args, dev);
  if (fused_ && fused_->handles(n)) return run_fused(n, args, r);
  n.op().reference(args);
}

bool Executor::staged(const ir::Node& n) const {
  const std::string& op = n.op().name;
  return op != "matmul" && op != "reshape" && !(gpu_ && jit::GpuKernels::handles(n));
}

std::vector<std::string> Executor::staged_ops() const {
  std::set<std::string> ops;
  if (!alloc_.device().is_host())
    for (const ir::Node* n : g_.nodes())
      if (staged(*n)) ops.insert(n->op().name);
  return {ops.begin(), ops.end()};
}

// Memory the host cannot address (a GPU's): matmul through the device's library GEMM, fused nodes
// and the ops of jit/gpu_ops.h through kernels compiled for it, a reshape as a copy of its bytes;
// every other node runs on the host (run_on_host) over copies of its operands, and its results
// are copied back. Same kernels as on the CPU, so the same numbers; the copies are the price until
// the op has a GPU kernel.
void Executor::run_on_device(const ir::Node& n, const ir::KernelArgs& args, Run& r) {
  const std::string& op = n.op().name;
  devices::Device& dev = alloc_.device();
  if (!staged(n)) {
    if (op == "matmul") return gemm(n, args.in, args.out[0], dev);
    if (op == "reshape") {
      if (args.out[0].data != args.in[0].data)
        dev.copy(args.out[0].data, args.in[0].data, static_cast<size_t>(args.out[0].bytes()), devices::CopyKind::kDeviceToDevice);
      return;
    }
    if (op == "fused") ++r.stats.fused_kernels;
    return gpu_->run(n, args);
  }
  ++r.stats.host_staged_nodes;
  if (!host_) host_ = devices::make_cpu_device(dev.threads());
  std::vector<std::vector<std::byte>> host(args.in.size() + args.out.size());
  ir::KernelArgs h = args;
  for (size_t i = 0; i < args.in.size(); ++i) {
    host[i].resize(static_cast<size_t>(args.in[i].bytes()));
    dev.copy(host[i].data(), args.in[i].data, host[i].size(), devices::CopyKind::kDeviceToHost);
    h.in[i].data = host[i].data();
  }
  for (size_t o = 0; o < args.out.size(); ++o) {
    std::vector<std::byte>& b = host[args.in.size() + o];
    b.resize(static_cast<size_t>(args.out[o].bytes()));
    h.out[o].data = b.data();
  }
  dev.synchronize();
  run_on_host(n, h, *host_, r);
  for (size_t o = 0; o < args.out.size(); ++o) {
    const std::vector<std::byte>& b = host[args.in.size() + o];
    dev.copy(args.out[o].data, b.data(), b.size(), devices::CopyKind::kHostToDevice);
  }
  r.stats.staged_bytes += std::accumulate(host.begin(), host.end(), int64_t{0},
                                          [](int64_t t, const auto& b) { return t + static_cast<int64_t>(b.size()); });
}

void Executor::wait_for_compiles() {
  if (fused_) fused_->wait_for_background();
}

// Every kernel of the step's buckets first, back to back: LLVM compiles each in about two thirds
// of the time it takes between nodes, whose data have pushed its own out of the caches. (In the
// background, they are only queued here.)
void Executor::compile_kernels(Run& r) {
  for (const jit::KernelCache::Lookup& l : fused_->finished_in_background()) count_compile(l, r);
  for (const ir::Node* n : g_.nodes()) {
    if (!fused_->handles(*n)) continue;
    try {
      count_compile(fused_->prepare(*n, r.b), r);
    } catch (const Error& e) {
      rethrow_with_context(e, g_.describe(*n) + ": ");
    }
  }
}

void Executor::run_fused(const ir::Node& n, const ir::KernelArgs& args, Run& r) {
  ++r.stats.fused_kernels;
  bool interpreted = false;
  count_compile(fused_->run(n, args, &interpreted), r);
  r.stats.interpreted_kernels += interpreted;
}

void Executor::count_compile(const jit::KernelCache::Lookup& l, Run& r) {
  if (!l.compiled) return;
  ++(l.from_cache ? r.stats.kernel_cache_loads : r.stats.kernel_compiles);
  r.stats.compile_ms += l.seconds * 1e3;
  if (!l.from_cache) r.stats.kernel_compile_ms.push_back(l.seconds * 1e3);
}

void Executor::evict(const memory::Eviction& e, Run& r) {
  const ir::Value* v = governor_.candidates()[e.candidate].value;
  const double begin = observer_ ? r.since_start() : 0;
  if (e.how == memory::Regen::kReload) {
    // Into page-locked memory on a GPU: the copy runs beside the kernels that follow, and the
    // device's events order the tensor's block, once freed, after it.
    const Tensor& t = r.env.at(v);
    devices::HostBuffer host(alloc_.device(), static_cast<size_t>(t.bytes()));
    alloc_.device().copy(host.data(), t.raw(), host.size(), devices::CopyKind::kDeviceToHost);
    r.offloaded.emplace(v, std::move(host));
  }
  r.env.erase(v);
  ++r.stats.evictions;
  if (observer_) {
    observer_({.kind = StepEvent::Kind::kEvict, .value = v, .begin_us = begin, .end_us = r.since_start(),
               .live_bytes = alloc_.stats().live_bytes});
  }
}

void Executor::regenerate(const memory::RegenRun& u, const memory::MemoryPlan& plan, Run& r) {
  const memory::Candidate& c = governor_.candidates()[u.candidate];
  const double begin = observer_ ? r.since_start() : 0;
  const bool reload = u.eviction >= 0 && plan.evictions[u.eviction].how == memory::Regen::kReload;
  if (reload) {
    auto host = r.offloaded.extract(c.value);
    Tensor t = Tensor::empty(c.value->dtype(), concrete_shape(g_, *c.value, r.b), alloc_);
    alloc_.device().copy(t.raw(), host.mapped().data(), host.mapped().size(), devices::CopyKind::kHostToDevice);
    r.env[c.value] = std::move(t);
    ++r.stats.reloads;
    r.stats.reload_bytes += static_cast<int64_t>(host.mapped().size());
    r.reloaded.push_back(std::move(host.mapped()));
  } else {
    // The chain's other results are temporaries, unless the step holds them anyway or the plan
    // keeps them for a later run.
    std::set<const ir::Value*> temporaries;
    for (size_t m = 0; m < c.recompute.size(); ++m) {
      for (const ir::Value* v : c.recompute[m]->results()) {
        const bool kept = std::any_of(u.keep.begin(), u.keep.end(), [&](int j) { return governor_.candidates()[j].value == v; });
        if (v != c.value && !kept && !r.env.contains(v)) temporaries.insert(v);
      }
      run_node(*c.recompute[m], r);
      ++r.stats.recomputes;
      for (const ir::Value* v : c.drop_after[m]) {
        if (temporaries.contains(v)) r.env.erase(v);
      }
    }
    r.stats.recompute_flops += static_cast<double>(c.recompute_flops.evaluate(r.b));
  }
  for (int d : u.drop) r.env.erase(governor_.candidates()[d].value);
  if (observer_) {
    observer_({.kind = reload ? StepEvent::Kind::kReload : StepEvent::Kind::kRecompute, .value = c.value,
               .begin_us = begin, .end_us = r.since_start(), .live_bytes = alloc_.stats().live_bytes});
  }
}

// matmul through the device's library GEMM: [..., M, K] x [..., K, N] (or a shared [K, N]).
// Rows are dense, so a batch that shares B is one GEMM over its stacked rows, and sum_batch is
// one GEMM whose contraction runs over the stacked rows of both operands. With tril_a, block
// GEMMs skip A's blocks above the diagonal.
void Executor::gemm(const ir::Node& n, const std::vector<ir::TensorRef>& in, const ir::TensorRef& out,
                    devices::Device& dev) {
  const ir::TensorRef &a = in[0], &bm = in[1];
  devices::GemmArgs g;
  g.dtype = a.dtype;
  g.transpose_a = n.attrs().get_bool("transpose_a");
  g.transpose_b = n.attrs().get_bool("transpose_b");
  const ir::MatmulDims d = ir::matmul_dims(a, out, n.attrs());
  g.batch = d.batch, g.m = d.m, g.n = d.n, g.k = d.k;
  const bool tril_a = n.attrs().get_bool("tril_a");  // each A is its own square: no stacking
  if (bm.rank() == 2 && !g.transpose_a && !tril_a) g.m *= g.batch, g.batch = std::min<int64_t>(g.batch, 1);
  g.a = a.data;
  g.b = bm.data;
  g.c = out.data;
  g.batch_stride_a = g.m * g.k;
  g.batch_stride_b = bm.rank() == 2 ? 0 : g.k * g.n;
  g.batch_stride_c = g.m * g.n;
  if (g.batch == 0) return;
  if (g.k == 0) {
    const std::vector<std::byte> zeros(static_cast<size_t>(out.bytes()));
    dev.copy(out.data, zeros.data(), zeros.size(), devices::CopyKind::kHostToDevice);
    return;
  }
  // The triangular blocks copy A's diagonal blocks on the host: a GPU multiplies all of A (zero
  // above its diagonal where the tril pass marks it).
  if (tril_a && dev.is_host()) {
    devices::gemm_tril_a(dev, g);
  } else {
    dev.gemm(g);
  }
}

// The head's loss and gradients by panels of rows (devices/linear_cross_entropy.h): the
// [rows, classes] logits exist only a panel at a time. Labels are checked and counted here.
void Executor::linear_cross_entropy(const ir::Node& n, const ir::KernelArgs& args, devices::Device& dev) {
  const ir::TensorRef &h = args.in[0], &w = args.in[1], &labels = args.in[2];
  const bool tw = n.attrs().get_bool("transpose_w");
  const int64_t classes = w.shape[tw ? 0 : 1], ignore = n.attrs().get_int("ignore_index");
  std::vector<int64_t> ids(static_cast<size_t>(labels.numel()));
  for (int64_t i = 0; i < labels.numel(); ++i) ids[i] = ir::index_at(labels, i);
  const devices::LinearCrossEntropyArgs a{
      .dtype = h.dtype, .rows = labels.numel(), .d = h.shape.back(), .classes = classes, .transpose_w = tw,
      .h = h.data, .w = w.data, .labels = ids.data(), .ignore_index = ignore,
      .count = ir::count_labels(n.op().name, labels, classes, ignore)};
  devices::linear_cross_entropy(dev, a, args.out[0].data, args.out[1].data, args.out[2].data);
}

// attention and attention_grad by blocks of query rows (devices/block_attention.h): the
// [..., S, S] scores exist only a block at a time.
void Executor::attention(const ir::Node& n, const ir::KernelArgs& args, devices::Device& dev) {
  const ir::TensorRef &q = args.in[0], &v = args.in[2];
  const ir::AttentionDims s = ir::attention_dims(q, v, n.attrs());
  const devices::AttentionArgs a{.dtype = q.dtype, .heads = s.heads, .sq = s.sq, .sk = s.sk, .d = s.d, .dv = s.dv,
                                 .causal = s.causal, .scale = s.scale, .q = q.data, .k = args.in[1].data, .v = v.data};
  if (n.op().name == "attention") return devices::attention_forward(dev, a, args.out[0].data);
  devices::attention_backward(dev, a, args.in[3].data, args.out[0].data, args.out[1].data,
                              args.out[2].data);
}

}  // namespace disc::engine
