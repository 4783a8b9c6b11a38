// The embedding API: train a fixed-topology model whose batch shapes change every step.
//
//   #include <disc/engine/trainer.h>
//   using namespace disc;
//   engine::TrainerOptions opt;                        // device, threads, seed, optimizer, memory cap
//   engine::Trainer trainer(ir::models::build_llama({}), opt);
//   engine::Batch batch = ...;                          // "tokens", "targets": i32[B, S], any B, S
//   engine::StepResult r = trainer.step(batch, /*lr=*/3e-4);
//   std::printf("loss %.4f, peak %lld bytes\n", r.loss, (long long)r.stats.live_peak_bytes);
//   trainer.save("ckpt/step-000100", {{"data_cursor", "1234"}});
//
// With options.memory.cap set, no step holds more device bytes than the cap (allocator caches
// included): the governor schedules, evicts and regenerates to keep it, and the constructor
// refuses a cap that the largest batch the graph admits cannot fit in.
//
// Errors are disc exceptions (ir/error.h): InvalidArgument, ShapeError (a batch that violates
// the graph's symbolic shapes), OutOfMemory, IoError. Nothing aborts the host process.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "devices/device.h"
#include "engine/executor.h"
#include "engine/tensor.h"
#include "memory/caching_allocator.h"
#include "ir/models/model.h"
#include "ir/training_step.h"

namespace disc::engine {

using Batch = std::map<std::string, Tensor>;

struct TrainerOptions {
  std::string device = "cpu";
  int threads = 0;                 // 0: every hardware thread
  uint64_t seed = 0;               // parameter initialisation
  ir::OptimizerConfig optimizer;   // AdamW with weight decay 0.01 by default
  memory::GovernorOptions memory;  // the cap on device bytes (0: none), scheduling, remat, offload
  bool jit = true;                 // fused JIT kernels for memory-bound ops (false: reference kernels only)
  bool fuse_attention = true;      // attention as one op run by blocks of query rows (ir/passes/attention.cc)
  // A linear layer and cross-entropy (the model's head) as one op run by chunks of rows, without
  // the [..., classes] logits (ir/passes/linear_cross_entropy.cc).
  bool fuse_cross_entropy = true;
  // Memory-bound forward values that the backward reads (SwiGLU's silu) made again there from
  // values it reads anyway, instead of held from the forward (ir/passes/backward_recompute.cc).
  bool backward_recompute = true;
  std::vector<int64_t> buckets;    // shape-bucket boundaries ([]: powers of two; used by the JIT)
  std::string kernel_cache_dir;    // on-disk kernel cache ("": none; used by the JIT)
  // Compile new buckets' kernels on a thread of their own and interpret those nodes meanwhile: no
  // step waits for a compile, but which nodes ran interpreted (other rounding) depends on timing,
  // so runs are no longer bit-identical (engine/executor.h).
  bool background_compile = false;
  // Refuse a memory cap that the largest shape cannot keep, before the first step. `disc-train
  // plan` turns it off to show where such a cap fails.
  bool check_cap = true;
};

struct StepResult {
  int64_t step = 0;  // 1 for the first step
  float loss = 0;
  float grad_norm = 0;
  StepStats stats;
};

class Trainer {
 public:
  // Builds the training step from a model and initialises its parameters from options.seed.
  Trainer(ir::models::Model model, const TrainerOptions& options);

  // One training step on `batch` (the model's inputs by name) at learning rate `lr`.
  StepResult step(const Batch& batch, double lr);

  int64_t steps_done() const { return step_; }
  const ir::Graph& graph() const { return *model_.graph; }
  // The graph the executor runs: graph() with its fused groups as `fused` nodes when options.jit.
  const ir::Graph& step_graph() const { return fused_ ? *fused_ : *model_.graph; }
  std::vector<std::string> parameter_names() const;
  const Tensor& parameter(const std::string& name) const;
  // Copies `value` into the parameter (same dtype and shape, else InvalidArgument).
  void set_parameter(const std::string& name, const Tensor& value);
  memory::Allocator& allocator() { return *alloc_; }
  // Gives the allocator's cached free blocks back to the device (the next step reserves afresh):
  // memory for other work between phases, or another trainer in the same process.
  void release_cached_memory() { alloc_->release_cache(); }
  memory::Governor& governor() { return executor_->governor(); }
  // On a GPU, the ops that have no GPU kernel yet and run on the host over copies.
  std::vector<std::string> staged_ops() const { return executor_->staged_ops(); }
  // Every symbol at its upper bound: the batch that needs the most memory.
  ir::Bindings largest_shape() const;
  // Bytes held as a step at `b` starts: parameters, optimizer state and the step's inputs.
  int64_t bytes_held_for(const ir::Bindings& b) const;
  void set_observer(StepObserver observer) { executor_->set_observer(std::move(observer)); }
  devices::Device& device() { return *device_; }

  // Writes parameters and optimizer state to DIR/state.safetensors and the step count plus
  // `extra` (the caller's data cursor, RNG and schedule state) to DIR/trainer.json. Both are
  // written into a hidden sibling `.NAME.partial`, synced, and renamed into place, so a folder
  // under its final name is always complete.
  void save(const std::string& dir, const std::map<std::string, std::string>& extra = {}) const;
  // Restores a checkpoint written by save(); returns its `extra`. Throws IoError for a missing or
  // incomplete checkpoint and InvalidArgument when it belongs to a different model.
  std::map<std::string, std::string> load(const std::string& dir);

 private:
  ir::models::Model model_;
  std::unique_ptr<ir::Graph> fused_;  // with options.jit
  std::unique_ptr<devices::Device> device_;
  std::unique_ptr<memory::CachingAllocator> alloc_;
  std::unique_ptr<jit::KernelCache> kernels_;  // with options.jit
  std::unique_ptr<jit::GpuKernels> gpu_kernels_;  // with options.jit on a GPU
  std::unique_ptr<Executor> executor_;
  std::map<std::string, Tensor> state_;  // parameters and optimizer state by name
  int64_t step_ = 0;
};

// The devices this build can create: "cpu", "sim" (the CPU with its memory counted as a
// separate device pool, so that offload can be tried without a GPU), "sim-gpu" (the same, with
// memory the host cannot address: the engine's GPU path, without a GPU), "cuda:N" (NVIDIA GPU N)
// and "hip:N" (AMD GPU N), through drivers loaded at run time: DeviceError says why there is none.
std::unique_ptr<devices::Device> make_device(const std::string& name, int threads);
// Throws InvalidArgument for a name make_device does not know; returns N for "cuda:N" and
// "hip:N", else -1.
int check_device_name(const std::string& name);

}  // namespace disc::engine
