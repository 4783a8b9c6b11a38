#include "engine/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <set>

#include "base/error.h"
#include "devices/cpu/cpu_device.h"
#include "ir/binding.h"
#include "jit/gpu/gpu_ops.h"

namespace disc::engine {

// The state of one run.
struct Executor::Run {
  ir::Bindings b;
  std::map<const ir::Value*, Tensor> env;
  std::map<const ir::Value*, devices::HostBuffer> offloaded;  // evicted to host memory
  // Reloaded: kept until the step ends, since the copy back may still be reading them.
  std::vector<devices::HostBuffer> reloaded;
  // Collectives still running after their node returned (KernelContext::later), by the results
  // they write: waited for before one of them is read, copied, evicted or freed.
  struct Pending {
    const ir::Node* node;
    std::vector<devices::Collective> work;
  };
  std::map<const ir::Value*, std::shared_ptr<Pending>> pending;
  StepStats stats;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  // A step that throws still waits for its collectives before their tensors go.
  ~Run() {
    for (const auto& [v, p] : pending)
      for (const devices::Collective& c : p->work) c.wait();
  }
  double since_start() const { return us_since_start(std::chrono::steady_clock::now()); }
  double us_since_start(std::chrono::steady_clock::time_point t) const {
    return std::chrono::duration<double, std::micro>(t - start).count();
  }
};

Executor::Executor(const ir::Graph& g, memory::Allocator& alloc,
                   const memory::GovernorOptions& memory, jit::KernelCache* kernels,
                   bool background_compile, jit::GpuKernels* gpu_kernels)
    : Executor(g, alloc, memory, memory::schedule_step(g, memory), kernels, background_compile,
               gpu_kernels) {}

Executor::Executor(const ir::Graph& g, memory::Allocator& alloc,
                   const memory::GovernorOptions& memory, memory::StepSchedule schedule,
                   jit::KernelCache* kernels, bool background_compile, jit::GpuKernels* gpu_kernels)
    : g_(g), alloc_(alloc), governor_(g, memory, std::move(schedule)) {
  // Host kernels for fused nodes, unless the device compiles its own (on a device without them,
  // sim-gpu, fused nodes are staged and run on the host).
  if (kernels && !gpu_kernels)
    fused_ = std::make_unique<jit::FusedRunner>(g, *kernels, background_compile);
  const bool host = device_kind(alloc.device()) == DeviceKind::kHost;
  ctx_ = {.dev = &alloc.device(),
          .fused = gpu_kernels ? static_cast<jit::FusedKernels*>(gpu_kernels)
                   : host      ? fused_.get()
                               : nullptr,
          .gpu_ops = gpu_kernels ? &gpu_kernels->ops() : nullptr,
          .later = &later_};
  // The runners of fused kernels: the device's, and the host's for nodes staged from it.
  if (ctx_.fused) runners_.push_back(ctx_.fused);
  if (fused_ && fused_.get() != ctx_.fused) runners_.push_back(fused_.get());
  place_nodes();
}

// Each node's kernel, once: the registry's for the device; on a GPU without one, the host's
// (over copies); else the op's reference kernel.
void Executor::place_nodes() {
  const DeviceKind kind = device_kind(alloc_.device());
  for (const ir::Node* n : g_.nodes()) {
    Placement p{.kernel = KernelRegistry::instance().find(*n, ctx_)};
    if (!p.kernel && kind != DeviceKind::kHost) {
      if (!host_) {
        host_ = devices::make_cpu_device(alloc_.device().threads());
        host_ctx_ = {.dev = host_.get(), .fused = fused_.get()};
      }
      p.staged = true;
      p.host_kernel = KernelRegistry::instance().find(*n, host_ctx_);
    }
    if (!(p.staged ? p.host_kernel : p.kernel) && !n->op().reference) {
      const std::string dtype =
          n->operands().empty() ? "" : " for " + std::string(dtype_name(n->operand(0)->dtype()));
      throw InvalidArgument("op `" + n->op().name + "` has no " +
                            std::string(device_kind_name(kind)) + " kernel" + dtype +
                            " and no reference kernel yet");
    }
    if (const KernelEntry* k = p.staged ? p.host_kernel : p.kernel; k && k->prepare)
      prepared_.push_back({n, k, p.staged ? &host_ctx_ : &ctx_});
    placement_[n] = p;
  }
}

std::map<std::string, Tensor> Executor::run(std::map<std::string, Tensor>& args, StepStats* stats) {
  Run r;
  alloc_.reset_peak();
  const int64_t allocations = alloc_.stats().allocations;
  ir::ShapeOf shapes;
  for (const auto& [name, t] : args) shapes[name] = {t.dtype(), t.shape()};
  r.b = ir::bind_symbols(g_, shapes);
  const memory::MemoryPlan& plan = governor_.plan(r.b, alloc_.stats().live_bytes);
  compile_kernels(r);
  const memory::Liveness& live = governor_.liveness();

  for (const ir::Value* a : g_.arguments()) r.env[a] = args.at(a->name());
  if (ctx_.gpu_ops) ctx_.gpu_ops->checks().clear();  // what a step that threw left
  bool updated = false;
  for (int i = 0; i < live.steps(); ++i) {
    for (const memory::RegenRun& u : plan.regen_runs[i]) regenerate(u, plan, r);
    const ir::Node& n = *live.order[i];
    if (!updated && writes_an_argument(n)) {
      updated = true;
      raise_device_checks();  // a bad index found on the GPU leaves the state as it was
    }
    run_node(n, r, /*in_place=*/true);
    for (const auto& [arg, v] : live.copies_after[i]) {
      await(v, r);
      const Tensor &target = r.env.at(arg), &value = r.env.at(v);
      target.copy_from(value);
    }
    for (const ir::Value* v : live.frees_after[i]) {
      await(v, r);
      r.env.erase(v);
    }
    for (int e : plan.evict_after[i]) evict(plan.evictions[e], r);
  }
  while (!r.pending.empty()) await(r.pending.begin()->first, r);
  raise_device_checks();
  if (!r.offloaded.empty() || !r.reloaded.empty())
    alloc_.device().synchronize();  // before their memory goes
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

bool Executor::writes_an_argument(const ir::Node& n) const {
  const memory::Liveness& live = governor_.liveness();
  for (const ir::Value* v : n.results())
    if (live.written_into.contains(v)) return true;
  return false;
}

// The GPU kernels' operand checks (jit/gpu/device_checks.h) are read here, once before the step's
// first update of its state and once at its end, not after each kernel: the host waits for the
// device twice a step, not at every gather.
void Executor::raise_device_checks() {
  if (!ctx_.gpu_ops) return;
  ctx_.gpu_ops->checks().raise([&](const ir::Node& n) { return g_.describe(n); });
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
  for (const ir::Value* v : n.operands()) {
    await(v, r);
    args.in.push_back(r.env.at(v).ref());
  }
  for (const ir::Value* v : n.results()) {
    std::vector<int64_t> shape = ir::concrete_shape(g_, *v, r.b);
    const ir::Value* buffer = in_place ? buffer_for(v) : nullptr;
    Tensor t = buffer ? r.env.at(buffer).reshaped(std::move(shape))
                      : Tensor::empty(v->dtype(), std::move(shape), alloc_);
    args.out.push_back(t.ref());
    r.env[v] = std::move(t);
  }
  if (ctx_.gpu_ops) ctx_.gpu_ops->checks().set_node(&n);
  try {
    const Placement& p = placement_.at(&n);
    if (p.staged) {
      run_staged(n, p.host_kernel, args, r);
    } else {
      run_kernel(n, p.kernel, args, ctx_, r);
    }
  } catch (const Error& e) {
    hold_collectives(n, r);
    raise_device_checks();  // a bad operand an earlier kernel found comes first
    rethrow_with_context(e, g_.describe(n) + ": ");
  }
  hold_collectives(n, r);
  if (observer_)
    observer_({.node = &n,
               .begin_us = begin,
               .end_us = r.since_start(),
               .live_bytes = alloc_.stats().live_bytes});
}

// The collectives n's kernel left running, kept with its results until they are needed.
void Executor::hold_collectives(const ir::Node& n, Run& r) {
  if (later_.empty()) return;
  auto p = std::make_shared<Run::Pending>(Run::Pending{&n, std::move(later_)});
  later_.clear();
  for (const ir::Value* v : n.results()) r.pending[v] = p;
}

// Waits for the collectives that write v, if any still run: all of its node's at once. The time
// the step waited, and the collectives' own span on the communicator's thread, go to the stats
// and the observer (the difference ran beside the step's nodes).
void Executor::await(const ir::Value* v, Run& r) {
  auto it = r.pending.find(v);
  if (it == r.pending.end()) return;
  const std::shared_ptr<Run::Pending> p = it->second;
  for (const ir::Value* result : p->node->results()) r.pending.erase(result);
  const double begin = r.since_start();
  for (const devices::Collective& c : p->work) c.wait();
  const double end = r.since_start();
  double first = end, last = 0;
  try {
    for (const devices::Collective& c : p->work) {
      const devices::CollectiveSpan span = c.get();
      first = std::min(first, r.us_since_start(span.begin));
      last = std::max(last, r.us_since_start(span.end));
    }
  } catch (const Error& e) {
    rethrow_with_context(e, g_.describe(*p->node) + ": ");
  }
  r.stats.collective_wait_ms += (end - begin) / 1e3;
  r.stats.collective_ms += std::max(0.0, last - first) / 1e3;
  if (observer_) {
    observer_({.kind = StepEvent::Kind::kCollective,
               .node = p->node,
               .begin_us = first,
               .end_us = last,
               .live_bytes = alloc_.stats().live_bytes});
  }
}

void Executor::run_kernel(const ir::Node& n, const KernelEntry* k, const ir::KernelArgs& args,
                          KernelContext& ctx, Run& r) {
  if (!k) return n.op().reference(args);
  const jit::KernelRun run = k->run(n, args, ctx);
  r.stats.fused_kernels += run.fused;
  r.stats.interpreted_kernels += run.interpreted;
  count(run, r);
}

std::vector<std::string> Executor::staged_ops() const {
  std::set<std::string> ops;
  for (const auto& [n, p] : placement_)
    if (p.staged) ops.insert(n->op().name);
  return {ops.begin(), ops.end()};
}

// Memory the host cannot address (a GPU's), for an op with no kernel there: the node runs on the
// host over copies of its operands, and its results are copied back. Same kernels as on the CPU,
// so the same numbers; the copies are the price until the op has a GPU kernel.
void Executor::run_staged(const ir::Node& n, const KernelEntry* k, const ir::KernelArgs& args,
                          Run& r) {
  devices::Device& dev = alloc_.device();
  ++r.stats.host_staged_nodes;
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
  run_kernel(n, k, h, host_ctx_, r);
  for (size_t o = 0; o < args.out.size(); ++o) {
    const std::vector<std::byte>& b = host[args.in.size() + o];
    dev.copy(args.out[o].data, b.data(), b.size(), devices::CopyKind::kHostToDevice);
  }
  r.stats.staged_bytes +=
      std::accumulate(host.begin(), host.end(), int64_t{0},
                      [](int64_t t, const auto& b) { return t + static_cast<int64_t>(b.size()); });
}

void Executor::wait_for_compiles() {
  for (jit::FusedKernels* f : runners_) f->wait_for_background();
}

// Every kernel of the step's buckets first, back to back: LLVM compiles each in about two thirds
// of the time it takes between nodes, whose data have pushed its own out of the caches. (In the
// background, they are only queued here.)
void Executor::compile_kernels(Run& r) {
  for (jit::FusedKernels* f : runners_)
    for (const jit::KernelRun& k : f->finished_in_background()) count(k, r);
  for (const auto& [n, k, ctx] : prepared_) {
    try {
      count(k->prepare(*n, r.b, *ctx), r);
    } catch (const Error& e) {
      rethrow_with_context(e, g_.describe(*n) + ": ");
    }
  }
}

void Executor::count(const jit::KernelRun& k, Run& r) {
  if (!k.compiled) return;
  ++(k.from_cache ? r.stats.kernel_cache_loads : r.stats.kernel_compiles);
  r.stats.compile_ms += k.seconds * 1e3;
  if (!k.from_cache) r.stats.kernel_compile_ms.push_back(k.seconds * 1e3);
}

void Executor::evict(const memory::Eviction& e, Run& r) {
  const ir::Value* v = governor_.candidates()[e.candidate].value;
  await(v, r);
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
    observer_({.kind = StepEvent::Kind::kEvict,
               .value = v,
               .begin_us = begin,
               .end_us = r.since_start(),
               .live_bytes = alloc_.stats().live_bytes});
  }
}

void Executor::regenerate(const memory::RegenRun& u, const memory::MemoryPlan& plan, Run& r) {
  const memory::Candidate& c = governor_.candidates()[u.candidate];
  const double begin = observer_ ? r.since_start() : 0;
  const bool reload = u.eviction >= 0 && plan.evictions[u.eviction].how == memory::Regen::kReload;
  if (reload) {
    auto host = r.offloaded.extract(c.value);
    Tensor t = Tensor::empty(c.value->dtype(), ir::concrete_shape(g_, *c.value, r.b), alloc_);
    alloc_.device().copy(t.raw(), host.mapped().data(), host.mapped().size(),
                         devices::CopyKind::kHostToDevice);
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
        const bool kept = std::any_of(u.keep.begin(), u.keep.end(),
                                      [&](int j) { return governor_.candidates()[j].value == v; });
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
  for (int d : u.drop) {
    await(governor_.candidates()[d].value, r);
    r.env.erase(governor_.candidates()[d].value);
  }
  if (observer_) {
    observer_({.kind = reload ? StepEvent::Kind::kReload : StepEvent::Kind::kRecompute,
               .value = c.value,
               .begin_us = begin,
               .end_us = r.since_start(),
               .live_bytes = alloc_.stats().live_bytes});
  }
}

}  // namespace disc::engine
