// The embedding API: train a fixed-topology model whose batch shapes change every step.
//
//   #include <disc/engine/trainer.h>
//   using namespace disc;
//   engine::TrainerOptions opt;                        // device, threads, seed, optimizer, memory
//   cap engine::Trainer trainer(ir::models::build_llama({}), opt); engine::Batch batch = ...; //
//   "tokens", "targets": i32[B, S], any B, S engine::StepResult r = trainer.step(batch,
//   /*lr=*/3e-4); std::printf("loss %.4f, peak %lld bytes\n", r.loss, (long
//   long)r.stats.live_peak_bytes); trainer.save("ckpt/step-000100", {{"data_cursor", "1234"}});
//
// With options.memory.cap set, no step holds more device bytes than the cap (allocator caches
// included): the governor schedules, evicts and regenerates to keep it, and the constructor
// refuses a cap that the largest batch the graph admits cannot fit in.
//
// Errors are disc exceptions (base/error.h): InvalidArgument, ShapeError (a batch that violates
// the graph's symbolic shapes), OutOfMemory, IoError. Nothing aborts the host process.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "devices/device.h"
#include "engine/executor.h"
#include "engine/options.h"
#include "engine/pipeline.h"
#include "engine/tensor.h"
#include "ir/models/model.h"
#include "ir/training_step.h"
#include "memory/caching_allocator.h"

namespace disc::engine {

using Batch = std::map<std::string, Tensor>;

struct StepResult {
  int64_t step = 0;  // 1 for the first step
  float loss = 0;
  float grad_norm = 0;
  StepStats stats;
};

class Trainer {
 public:
  // Builds the training step from a model through the compile pipeline (engine/pipeline.h) and
  // initialises its parameters from options.seed. `configure`, when given, sees the pipeline
  // before it runs (to print a stage's result, as `disc-train plan --dump-after` does).
  Trainer(ir::models::Model model, const TrainerOptions& options,
          const std::function<void(Pipeline&)>& configure = nullptr);

  // One training step on `batch` (the model's inputs by name) at learning rate `lr`.
  StepResult step(const Batch& batch, double lr);

  int64_t steps_done() const { return step_; }
  const ir::Graph& graph() const { return *compiled_.model.graph; }
  // The graph the executor runs: graph() with its fused groups as `fused` nodes when options.jit.
  const ir::Graph& step_graph() const { return compiled_.graph(); }
  // What the compile pipeline made (engine/pipeline.h): the graph, the fusion plan (the schedule
  // and candidates are the governor's now: governor()).
  const CompiledStep& compiled() const { return compiled_; }
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
  // under its final name is always complete. Refuses (InvalidArgument) a state that holds NaN or
  // infinite values: a diverged run never writes a checkpoint.
  void save(const std::string& dir, const std::map<std::string, std::string>& extra = {}) const;
  // Restores a checkpoint written by save(); returns its `extra`. Throws IoError for a missing,
  // incomplete or damaged checkpoint (a tensor failing its checksum, or NaN or infinite values)
  // and InvalidArgument when it belongs to a different model.
  std::map<std::string, std::string> load(const std::string& dir);

 private:
  CompiledStep compiled_;  // the schedule went to the executor's governor
  std::unique_ptr<devices::Device> device_;
  std::unique_ptr<memory::CachingAllocator> alloc_;
  std::unique_ptr<jit::KernelCache> kernels_;     // with options.jit
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
