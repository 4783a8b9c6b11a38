// The embedding API: train a fixed-topology model whose batch shapes change every step.
//
//   #include <disc/engine/trainer.h>
//   #include <disc/ir/models/model.h>
//   using namespace disc;
//   engine::TrainerOptions opt;  // device, threads, seed, optimizer, memory cap
//   engine::Trainer trainer(ir::models::build_llama({}), opt);
//   engine::Batch batch = {  // the model's inputs: "tokens", "targets": i32[B, S], any B, S
//       {"tokens", engine::Tensor::from<int32_t>({B, S}, tokens, trainer.allocator())},
//       {"targets", engine::Tensor::from<int32_t>({B, S}, targets, trainer.allocator())}};
//   engine::StepResult r = trainer.step(batch, /*lr=*/3e-4);
//   trainer.save("ckpt/step-000100", {{"data_cursor", "1234"}});
//
// With options.memory.cap set, no step holds more device bytes than the cap (allocator caches
// included): the governor schedules, evicts and regenerates to keep it, and the constructor
// refuses a cap that the largest batch the graph admits cannot fit in.
//
// Errors are disc exceptions (base/error.h): InvalidArgument, ShapeError (a batch that violates
// the graph's symbolic shapes), OutOfMemory, IoError. Nothing aborts the host process.
//
// This header pulls in no compiler, JIT or planner: what it names from them (the graph, the
// governor, the pipeline) is declared here and defined in their own headers.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "devices/device.h"
#include "engine/options.h"
#include "engine/step_stats.h"
#include "engine/tensor.h"
#include "ir/dim_expr.h"

// The public API names these; their headers (the graph, the planner, the compile pipeline) are
// for callers that look inside.
namespace disc::ir {
class Graph;
namespace models {
struct Model;
}
}  // namespace disc::ir
namespace disc::memory {
class Governor;
}

namespace disc::engine {

class Pipeline;
struct CompiledStep;

using Batch = std::map<std::string, Tensor>;

struct StepResult {
  int64_t step = 0;  // 1 for the first step
  float loss = 0;
  float grad_norm = 0;    // of the unscaled gradients; inf or NaN on a skipped step
  double loss_scale = 0;  // f16: the scale this step ran with (0: no loss scaling)
  bool skipped = false;   // f16: the gradients held an inf or NaN, so nothing changed
  StepStats stats;
};

class Trainer {
 public:
  // Builds the training step from a model through the compile pipeline (engine/pipeline.h) and
  // initialises its parameters from options.seed. `configure`, when given, sees the pipeline
  // before it runs (to print a stage's result, as `disc-train plan --dump-after` does). Refuses
  // (OutOfMemory) parameters and optimizer state that the device cannot hold, before it
  // allocates them. The model's graph is the trainer's to change or replace (a compile for
  // clipping in two passes starts from a copy): read it back through graph().
  Trainer(ir::models::Model model, const TrainerOptions& options,
          const std::function<void(Pipeline&)>& configure = nullptr);
  ~Trainer();
  Trainer(Trainer&&) noexcept;
  Trainer& operator=(Trainer&&) noexcept;

  // One training step on `batch` (the model's inputs by name, each once; InvalidArgument for a
  // name that is no input) at learning rate `lr`.
  StepResult step(const Batch& batch, double lr);
  // One optimizer step over several micro-batches (gradient accumulation, which the trainer must
  // be built for: TrainerOptions::optimizer.accumulate). Each runs forward and backward and adds
  // its gradients; the last applies their mean over every micro-batch's counted targets (so K
  // micro-batches of B rows step as one batch of K*B rows would, within rounding), in the memory
  // of one micro-batch. The result's loss is that mean; its stats add the micro-batches' up.
  StepResult step_micro_batches(const std::vector<Batch>& micro_batches, double lr);

  // The model's loss on `batch` with the parameters as they are: the forward pass alone, with no
  // gradient and no update, under the same memory cap (the parameters and optimizer state stay
  // held). The same mean over the batch's counted targets that step() reports. The forward pass
  // compiles (as the step did, less autodiff and the optimizer) at the first call.
  float evaluate(const Batch& batch);

  int64_t steps_done() const;
  const ir::Graph& graph() const;
  // The graph the executor runs: graph() with its fused groups as `fused` nodes when options.jit.
  const ir::Graph& step_graph() const;
  // What the compile pipeline made (engine/pipeline.h): the graph, the fusion plan (the schedule
  // and candidates are the governor's now: governor()).
  const CompiledStep& compiled() const;
  // The model's inputs by name, as a batch must give them (e.g. "tokens", "targets").
  std::vector<std::string> input_names() const;
  std::vector<std::string> parameter_names() const;
  const Tensor& parameter(const std::string& name) const;
  // Copies `value` into the parameter (same dtype and shape, else InvalidArgument).
  void set_parameter(const std::string& name, const Tensor& value);
  // Where batch tensors are made (Tensor::from<int32_t>({B, S}, values, trainer.allocator())).
  // Tensors keep the allocator and the device alive: they may outlive the Trainer.
  memory::Allocator& allocator();
  // Gives the allocator's cached free blocks back to the device (the next step reserves afresh):
  // memory for other work between phases, or another trainer in the same process.
  void release_cached_memory();
  memory::Governor& governor();
  // The memory cap the step keeps (0: none): the governor plans under it and the allocator
  // refuses past it, both from TrainerOptions::memory.cap, which nothing else reads again.
  int64_t memory_cap() const;
  // The passes clipping takes (ir::OptimizerConfig::clip_passes as the trainer chose: 2 where the
  // cap needs it), 1 without clipping.
  int clip_passes() const;
  // On a GPU, the ops that have no GPU kernel yet and run on the host over copies.
  std::vector<std::string> staged_ops() const;
  // The largest batch: every symbol at its upper bound, or under a limit such as a token budget,
  // the worst case whose values hold the most (governor().worst_shapes() lists them all).
  ir::Bindings largest_shape() const;
  // Bytes held as a step at `b` starts: parameters, optimizer state and the step's inputs.
  int64_t bytes_held_for(const ir::Bindings& b) const;
  void set_observer(StepObserver observer);
  devices::Device& device();

  // Writes parameters and optimizer state to DIR/state.safetensors and the step count plus
  // `extra` (the caller's data cursor, RNG and schedule state) to DIR/trainer.json. Both are
  // written into a hidden sibling `.NAME.partial`, synced, and renamed into place, so a folder
  // under its final name is always complete. Refuses (InvalidArgument) a state that holds NaN or
  // infinite values: a diverged run never writes a checkpoint. With the optimizer state sharded
  // over several ranks (TrainerOptions::shard_optimizer), every rank calls save() at the same
  // step: the ranks' parts are joined, and rank 0 alone writes the whole state.
  void save(const std::string& dir, const std::map<std::string, std::string>& extra = {}) const;
  // Restores a checkpoint written by save(); returns its `extra`. Throws IoError for a missing,
  // incomplete or damaged checkpoint (a tensor failing its checksum, or NaN or infinite values)
  // and InvalidArgument when it belongs to a different model. With a sharded optimizer state,
  // each rank takes its part of the whole state the checkpoint holds.
  std::map<std::string, std::string> load(const std::string& dir);
  // The `extra` a checkpoint's trainer.json holds, without loading its state (to check what run
  // it belongs to first). IoError when trainer.json is missing or corrupt.
  static std::map<std::string, std::string> saved_extra(const std::string& dir);

 private:
  void refuse_steps_the_device_cannot_run();
  // One run of the step graph over `args`, its stats added into `total`.
  std::map<std::string, Tensor> run_pass(std::map<std::string, Tensor>& args, StepStats& total);
  void bind_batch(const Batch& batch, const ir::Graph& g,
                  std::map<std::string, Tensor>& args) const;

  struct Impl;  // the compiled step, the executor, the kernels (engine/trainer.cc)
  std::unique_ptr<Impl> impl_;
};

// The devices this build can create: "cpu", "sim" (the CPU with its memory counted as a
// separate device pool, so that offload can be tried without a GPU), "sim-gpu" (the same, with
// memory the host cannot address: the engine's GPU path, without a GPU), "cuda:N" (NVIDIA GPU N)
// and "hip:N" (AMD GPU N), through drivers loaded at run time: DeviceError says why there is none.
// bf16_dot: TrainerOptions::bf16_dot (CPU devices only).
std::unique_ptr<devices::Device> make_device(const std::string& name, int threads,
                                             bool bf16_dot = true);
// The trainer's parameters by name (sharing its storage): what exports write.
std::map<std::string, Tensor> parameters_of(const Trainer& trainer);
// Throws InvalidArgument for a name make_device does not know; returns N for "cuda:N" and
// "hip:N", else -1.
int check_device_name(const std::string& name);

}  // namespace disc::engine
