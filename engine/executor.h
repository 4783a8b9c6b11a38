// Runs a training step on concrete tensors, following the memory governor: binds the symbols from
// the argument shapes (refusing bad inputs), takes the memory plan for these shapes, then walks
// the governor's schedule. Each node's results are allocated through the allocator and its kernel
// runs: the one the kernel registry (engine/kernels/kernel_registry.h) gives for its op, device
// kind and dtype, resolved once when the executor is made, or the op's reference kernel. Values are
// freed after their last use, updates are copied into their arguments as soon as nothing reads
// the old value, and the plan's evictions and regenerations (recompute or reload) happen between
// the nodes. A collective (all_reduce) runs on the communicator's thread beside the nodes that
// follow it, until a node reads its results.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/kernels/kernel_registry.h"
#include "engine/step_stats.h"
#include "engine/tensor.h"
#include "ir/graph.h"
#include "jit/cpu/fused_runner.h"
#include "jit/gpu/gpu_kernels.h"
#include "memory/allocator.h"
#include "memory/governor.h"

namespace disc::engine {

class Executor {
 public:
  // The graph must outlive the executor. With `kernels` (which must outlive it too), `fused` nodes
  // run as compiled kernels on a host device; without, through the kernel IR interpreter. A step
  // compiles its kernels before its first node; with `background_compile`, a thread of the
  // executor's own compiles them and the step interprets the nodes whose kernel is not ready yet
  // (jit/cpu/fused_runner.h). Compiles finished in the background count in the next step's stats.
  // On a GPU, `gpu_kernels` (which must outlive the executor) runs fused nodes and the ops it has
  // kernels for; a node whose op has no kernel there runs on the host over copies (run_staged).
  Executor(const ir::Graph& g, memory::Allocator& alloc, const memory::GovernorOptions& memory = {},
           jit::KernelCache* kernels = nullptr, bool background_compile = false,
           jit::GpuKernels* gpu_kernels = nullptr);
  // The same with the graph's schedule and eviction candidates computed already (the compile
  // pipeline's, engine/pipeline.h).
  Executor(const ir::Graph& g, memory::Allocator& alloc, const memory::GovernorOptions& memory,
           memory::StepSchedule schedule, jit::KernelCache* kernels = nullptr,
           bool background_compile = false, jit::GpuKernels* gpu_kernels = nullptr);

  // The kernel contexts' addresses are kept (prepared_): an executor stays where it is made.
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // `args` holds every graph argument by name; updates are written into those tensors.
  // Returns the graph's outputs by name.
  std::map<std::string, Tensor> run(std::map<std::string, Tensor>& args,
                                    StepStats* stats = nullptr);
  // With background compilation: waits until every kernel queued so far is compiled.
  void wait_for_compiles();
  // The ranks the step's collectives (all_reduce) sum over; null: one process.
  void set_communicator(devices::Communicator* comm) { ctx_.comm = host_ctx_.comm = comm; }
  // Observe every event of the following runs (an empty function stops it).
  void set_observer(StepObserver observer) { observer_ = std::move(observer); }
  memory::Governor& governor() { return governor_; }
  // On a device whose memory the host cannot address: the ops of the graph that have no kernel
  // there and run on the host over copies (run_staged), each once, sorted. Empty on the host.
  std::vector<std::string> staged_ops() const;

 private:
  struct Run;
  // Where a node runs, resolved once: its kernel on the device (null: none), or, when its tensors
  // are on a GPU that has none, staged to the host and run there by host_kernel (null: the
  // reference kernel).
  struct Placement {
    const KernelEntry* kernel = nullptr;
    bool staged = false;
    const KernelEntry* host_kernel = nullptr;
  };
  void place_nodes();
  // In the step's schedule (in_place), results go where the liveness says (Liveness::donor,
  // written_into); a regeneration's reruns allocate their own.
  void run_node(const ir::Node& n, Run& r, bool in_place = false);
  const ir::Value* buffer_for(const ir::Value* v) const;
  // Whether n writes a result into an argument's buffer (an update of the state).
  bool writes_an_argument(const ir::Node& n) const;
  void raise_device_checks();
  void evict(const memory::Eviction& e, Run& r);
  void regenerate(const memory::RegenRun& u, const memory::MemoryPlan& plan, Run& r);
  // n's kernel (or its reference) on `ctx`'s device, counted in r's stats.
  void run_kernel(const ir::Node& n, const KernelEntry* k, const ir::KernelArgs& args,
                  KernelContext& ctx, Run& r);
  void hold_collectives(const ir::Node& n, Run& r);
  void await(const ir::Value* v, Run& r);
  // n on the host over copies of its operands, its results copied back to the device.
  void run_staged(const ir::Node& n, const KernelEntry* k, const ir::KernelArgs& args, Run& r);
  void compile_kernels(Run& r);
  void count(const jit::KernelRun& k, Run& r);

  const ir::Graph& g_;
  memory::Allocator& alloc_;
  memory::Governor governor_;
  StepObserver observer_;
  std::unique_ptr<jit::FusedRunner> fused_;  // with a kernel cache and no GPU kernels
  KernelContext ctx_;                        // the device's kernels run with it
  std::vector<devices::Collective> later_;   // ctx_.later: what the node run last left running
  std::unique_ptr<devices::Device> host_;    // runs the nodes staged from a device on the host
  KernelContext host_ctx_;                   // ... with this
  std::unordered_map<const ir::Node*, Placement> placement_;
  std::vector<jit::FusedKernels*> runners_;  // the runners of fused kernels, each once
  // The nodes whose kernel compiles ahead (KernelEntry::prepare), in graph order.
  struct Prepared {
    const ir::Node* node;
    const KernelEntry* kernel;
    KernelContext* ctx;
  };
  std::vector<Prepared> prepared_;
};

}  // namespace disc::engine
