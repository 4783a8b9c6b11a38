#include "engine/trainer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "base/bytes.h"
#include "base/error.h"
#include "base/write_fully.h"
#include "devices/cuda/cuda_device.h"
#include "devices/gpu/gpu_device.h"
#include "devices/hip/hip_device.h"
#include "devices/simulated/simulated_device.h"
#include "engine/durable_folder.h"
#include "engine/executor.h"
#include "engine/init.h"
#include "engine/pipeline.h"
#include "engine/safetensors.h"
#include "engine/state_shards.h"
#include "ir/binding.h"
#include "ir/models/model.h"
#include "ir/passes/passes.h"
#include "ir/text_format.h"
#include "ir/training_step.h"
#include "jit/cpu/kernel_cache.h"
#include "memory/caching_allocator.h"
#include "memory/governor.h"
#include "memory/liveness.h"

namespace disc::engine {
namespace {

namespace fs = std::filesystem;

// Refuses to replace `final` unless it is a checkpoint folder: save() swaps in a whole new folder
// and must not delete what a caller keeps beside a checkpoint.
void check_replaceable(const fs::path& final) {
  std::error_code ec;
  auto st = fs::status(final, ec);
  if (!fs::exists(st)) return;
  if (!fs::is_directory(st))
    throw IoError("cannot save a checkpoint to " + final.string() +
                  ": it exists and is not a folder");
  for (const auto& e : fs::directory_iterator(final, ec)) {
    std::string name = e.path().filename().string();
    if (name != "trainer.json" && name != "state.safetensors" &&
        name.rfind("trainer.json.tmp", 0) != 0 && name.rfind("state.safetensors.tmp", 0) != 0) {
      throw InvalidArgument("cannot save a checkpoint to " + final.string() +
                            ": the folder holds other files (" + name +
                            "); save into a new folder");
    }
  }
  if (ec) throw IoError("cannot list " + final.string() + ": " + ec.message());
}

// What trainer.json holds besides the caller's extra: the steps taken, the updates applied (fewer
// when f16 loss scaling skipped some) and the loss scaler's state.
struct TrainerJson {
  int64_t step = 0, updates = 0;
  double loss_scale = 0;
  int64_t clean_steps = 0;
  std::map<std::string, std::string> extra;
};

// IoError naming the file for anything missing or malformed. A checkpoint written before the
// updates and the scaler were saved applied every step and had no scaler.
TrainerJson read_trainer_json(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw IoError("checkpoint " + fs::path(path).parent_path().string() +
                  " is incomplete: trainer.json is missing");
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    TrainerJson t{.step = j.at("step").get<int64_t>()};
    t.updates = j.value("updates", t.step);
    t.loss_scale = j.value("loss_scale", 0.0);
    t.clean_steps = j.value("loss_scale_clean_steps", int64_t{0});
    if (t.step < 0 || t.updates < 0 || t.updates > t.step)
      throw IoError(path + " is corrupt: step " + std::to_string(t.step) + ", updates " +
                    std::to_string(t.updates));
    t.extra = j.at("extra").get<std::map<std::string, std::string>>();
    return t;
  } catch (const nlohmann::json::exception& e) {
    throw IoError(path + " is corrupt (" + e.what() + "): the checkpoint cannot be resumed");
  }
}

// How an optimizer state tensor of dtype t is held (ir::OptimizerConfig::State): u8 codes are int8.
std::string state_held_as(DType t) {
  return t == DType::kU8 ? "int8" : std::string(dtype_name(t));
}

// The training step's inputs that step() fills in itself.
bool supplied_by_the_trainer(const std::string& input) {
  return input == "lr" || input == "step" || input == "loss_scale" || input == "rank" ||
         input == "apply" || input == "grad_norm.given";
}

// The bytes of the parameters and the optimizer state (or the parameters alone), as the device
// will allocate them.
int64_t state_bytes(const ir::Graph& g, bool optimizer_state = true) {
  int64_t held = 0;
  for (const ir::Value* a : g.arguments())
    if (a->role() == ir::Role::kParameter || (optimizer_state && a->role() == ir::Role::kState))
      held += static_cast<int64_t>(
          devices::allocation_size(static_cast<size_t>(memory::concrete_bytes(*a, {}))));
  return held;
}

// The bytes of the step's inputs at `b`.
int64_t input_bytes(const ir::Graph& g, const ir::Bindings& b) {
  int64_t total = 0;
  for (const ir::Value* a : g.arguments())
    if (a->role() == ir::Role::kInput) total += memory::concrete_bytes(*a, b);
  return total;
}

// A model from its graph's text (which keeps every value exact) and the names of its loss and
// parameters.
ir::models::Model model_from_text(const std::string& text, const std::string& loss,
                                  const std::vector<std::string>& params) {
  ir::models::Model m;
  m.graph = ir::parse_graph(text, "the model's graph");
  m.loss = m.graph->find_value(loss);
  for (const std::string& p : params) m.params.push_back(m.graph->find_value(p));
  return m;
}

// Whether clipping may run in two passes should one not keep the cap (OptimizerConfig::
// clip_passes 0): there is a cap, a clip, and no accumulation buffers holding the gradients anyway.
bool may_clip_in_two_passes(const TrainerOptions& o) {
  const ir::OptimizerConfig& opt = o.optimizer;
  return opt.clip_passes == 0 && opt.clip_norm > 0 && !opt.accumulate && o.memory.cap > 0;
}

// A model too large for the machine is refused before its parameters are drawn (a minute of
// work for a model that can never train), naming both numbers.
void refuse_what_the_device_cannot_hold(const ir::Graph& g, const devices::Device& device,
                                        bool optimizer_state) {
  const int64_t held = state_bytes(g, optimizer_state);
  const devices::MemoryInfo m = device.memory_info();
  if (m.free_bytes > 0 && held > m.free_bytes) {
    throw OutOfMemory("the memory of device " + device.name() + " (" + human_bytes(m.free_bytes) +
                      " free of " + human_bytes(m.total_bytes) +
                      ") cannot hold the parameters and optimizer state (" + human_bytes(held) +
                      "): train a smaller model, or on a device with more memory");
  }
}

void allow_tf32(devices::Device& dev) {
  auto* gpu = dynamic_cast<devices::GpuDevice*>(&dev);
  if (!gpu)
    throw InvalidArgument("tf32 is a mode of NVIDIA GPUs' tensor cores; " + dev.name() +
                          " computes f32 matmuls in f32: drop tf32, or train on cuda:N");
  gpu->set_tf32(true);
}

}  // namespace

int check_device_name(const std::string& name) {
  if (name == "cpu" || name == "sim" || name == "sim-gpu") return -1;
  for (const std::string gpu : {"cuda:", "hip:"}) {
    const size_t n = gpu.size();
    if (name.rfind(gpu, 0) == 0 && name.size() > n && name.size() < n + 4 &&
        name.find_first_not_of("0123456789", n) == std::string::npos)
      return std::stoi(name.substr(n));
  }
  throw InvalidArgument("unknown device `" + name +
                        "`; this build has: cpu, sim, sim-gpu, cuda:N (NVIDIA GPU N), hip:N (AMD "
                        "GPU N), N = 0 for the first");
}

std::unique_ptr<devices::Device> make_device(const std::string& name, int threads, bool bf16_dot) {
  const int gpu = check_device_name(name);
  if (name == "cpu") return devices::make_cpu_device(threads, bf16_dot);
  if (name == "sim" || name == "sim-gpu")
    return devices::make_simulated_device(threads,
                                          devices::make_cpu_device(1)->memory_info().total_bytes,
                                          /*addressable=*/name == "sim", bf16_dot);
  try {
    if (name.rfind("cuda:", 0) == 0) return devices::cuda::make_cuda_device(gpu, threads);
    return devices::hip::make_hip_device(gpu, threads);
  } catch (const DeviceError& e) {
    throw DeviceError(name + ": " + e.what() + "; to train on the CPU, use device.name: cpu");
  }
}

// The forward pass evaluate() runs: the model as inference sees it, dropout passing its input
// through; the pipeline's stages as the step's, less autodiff and the optimizer.
static CompiledStep compile_forward(const std::string& text, const std::string& loss,
                                    const std::vector<std::string>& params,
                                    const TrainerOptions& options) {
  ir::models::Model forward = model_from_text(text, loss, params);
  for (const ir::Node* n : forward.graph->nodes())
    if (n->op().name == "dropout") forward.graph->replace_all_uses(n->result(0), n->operand(0));
  Pipeline pipeline(options);
  pipeline.disable("training_step");
  return pipeline.run(std::move(forward));
}

// Everything the public header keeps out of sight.
struct Trainer::Impl {
  // The device and its allocator, owned together with every tensor made through the allocator
  // (Tensor's storage holds on to them, memory::Allocator::keep_alive): a tensor the caller keeps
  // may outlive the Trainer. The device goes last.
  struct Owned {
    std::unique_ptr<devices::Device> device;
    std::unique_ptr<memory::CachingAllocator> alloc;
  };
  std::shared_ptr<Owned> owned_;
  devices::Device* device_ = nullptr;
  memory::CachingAllocator* alloc_ = nullptr;
  CompiledStep compiled_;                         // the schedule went to the executor's governor
  std::unique_ptr<jit::KernelCache> kernels_;     // with options.jit
  std::unique_ptr<jit::GpuKernels> gpu_kernels_;  // with options.jit on a GPU
  std::unique_ptr<Executor> executor_;
  std::shared_ptr<devices::Communicator> comm_;  // the ranks of a data-parallel run (or null)
  std::map<std::string, Tensor> state_;          // parameters and optimizer state by name
  bool made_state_ = true;                       // false: TrainerOptions::make_state was off
  bool steps_ = true;  // false: TrainerOptions::optimizer_state was off (evaluate() alone)
  // The bytes of the state as the device holds them: the tensors made or, before they are (or
  // without TrainerOptions::make_state), what they will be, from the graph.
  int64_t state_held() const {
    if (state_.empty()) return state_bytes(*compiled_.model.graph, steps_);
    int64_t total = 0;
    for (const auto& [name, t] : state_)
      total += static_cast<int64_t>(devices::allocation_size(t.bytes()));
    return total;
  }
  // Throws for `what` when the trainer holds no optimizer state.
  void require_steps(const char* what) const {
    if (!steps_)
      throw InvalidArgument(std::string("this Trainer only evaluates (TrainerOptions::"
                                        "optimizer_state is false): it holds no optimizer state "
                                        "to ") +
                            what);
  }
  // Throws for `what` when the state was never made.
  void require_state(const char* what) const {
    if (!made_state_)
      throw InvalidArgument(std::string("this Trainer only plans (TrainerOptions::make_state is "
                                        "false): it has no parameters or state to ") +
                            what);
  }
  StateShards shards_;  // the state this rank holds a part of
  // evaluate(): the forward model as the Trainer got it (as text, parsed at the first call, when
  // its pass compiles), and that pass.
  struct Forward {
    std::string graph, loss;
    std::vector<std::string> params;
  } forward_;
  TrainerOptions compile_options_;  // clip_passes as the trainer chose
  std::optional<CompiledStep> eval_compiled_;
  std::unique_ptr<Executor> eval_;
  int64_t step_ = 0;
  int64_t updates_ = 0;      // steps whose updates were applied (AdamW's bias correction)
  double loss_scale_ = 0;    // f16 loss scaling (0: none)
  int64_t clean_steps_ = 0;  // finite steps in a row since the scale last changed
  int64_t growth_interval_ = 0;

  // The forward pass evaluate() runs, compiled at the first call.
  Executor& evaluator() {
    if (!eval_) {
      eval_compiled_ =
          compile_forward(forward_.graph, forward_.loss, forward_.params, compile_options_);
      eval_ = std::make_unique<Executor>(eval_compiled_->graph(), *alloc_, compile_options_.memory,
                                         std::move(*eval_compiled_->schedule), kernels_.get(),
                                         false, gpu_kernels_.get());
      eval_compiled_->schedule.reset();
    }
    return *eval_;
  }

  // Runs the compile pipeline on `model` (`configure` sees it first) and makes the executor of
  // its step.
  void compile(ir::models::Model model, const TrainerOptions& o,
               const std::function<void(Pipeline&)>& configure) {
    Pipeline pipeline(o);
    if (configure) configure(pipeline);
    compiled_ = pipeline.run(std::move(model));
    executor_ = std::make_unique<Executor>(compiled_.graph(), *alloc_, o.memory,
                                           std::move(*compiled_.schedule), kernels_.get(),
                                           o.background_compile, gpu_kernels_.get());
    compiled_.schedule.reset();  // the governor holds it now: governor().liveness(), candidates()
  }

  // GradScaler's rule: halve on a skipped step, double after growth_interval_ clean ones.
  void update_loss_scale(bool skipped) {
    if (skipped) {
      loss_scale_ /= 2, clean_steps_ = 0;
    } else if (++clean_steps_ == growth_interval_) {
      loss_scale_ *= 2, clean_steps_ = 0;
    }
  }
};

Trainer::Trainer(ir::models::Model model, const TrainerOptions& options,
                 const std::function<void(Pipeline&)>& configure)
    : impl_(std::make_unique<Impl>()) {
  impl_->owned_ = std::make_shared<Impl::Owned>();
  impl_->owned_->device = make_device(options.device, options.threads, options.bf16_dot);
  impl_->owned_->alloc =
      std::make_unique<memory::CachingAllocator>(*impl_->owned_->device, options.memory.cap);
  impl_->device_ = impl_->owned_->device.get();
  impl_->alloc_ = impl_->owned_->alloc.get();
  impl_->alloc_->set_owner(impl_->owned_);
  ir::check_precision(options.precision);
  if (options.tf32) allow_tf32(*impl_->device_);
  if (options.scales_loss()) {
    if (!(options.loss_scale > 0) || options.loss_scale_growth_interval < 1)
      throw InvalidArgument("loss scaling needs a scale > 0 and a growth interval >= 1, got " +
                            std::to_string(options.loss_scale) + " and " +
                            std::to_string(options.loss_scale_growth_interval));
    impl_->loss_scale_ = options.loss_scale;
    impl_->growth_interval_ = options.loss_scale_growth_interval;
  }
  impl_->steps_ = options.optimizer_state;
  TrainerOptions compile = options;
  compile.memory.offload = options.memory.offload && impl_->device_->separate_memory();
  impl_->forward_ = {ir::print_graph(*model.graph), model.loss->name(), {}};
  for (const ir::Value* p : model.params) impl_->forward_.params.push_back(p->name());
  if (options.jit) {
    impl_->kernels_ = std::make_unique<jit::KernelCache>(options.kernel_cache_dir, options.buckets);
    if (auto* gpu = dynamic_cast<devices::GpuDevice*>(impl_->device_))
      impl_->gpu_kernels_ =
          std::make_unique<jit::GpuKernels>(*gpu, options.kernel_cache_dir, options.buckets);
  }
  // Clipping in one pass, unless it is left to the trainer and one pass cannot keep the cap.
  std::optional<ir::models::Model> spare;  // a copy, to compile again
  if (may_clip_in_two_passes(compile)) {
    const Impl::Forward& f = impl_->forward_;
    spare = model_from_text(f.graph, f.loss, f.params);
    spare->init = model.init, spare->frozen = model.frozen;
  }
  int& passes = compile.optimizer.clip_passes;
  passes = std::max(passes, 1);
  impl_->compile(std::move(model), compile, configure);
  auto held = [&](const ir::Bindings& b) { return bytes_held_for(b); };
  if (spare && !impl_->executor_->governor().keeps_cap(held)) {
    passes = 2;
    impl_->compile(std::move(*spare), compile, configure);
  }
  impl_->compile_options_ = compile;
  const memory::GovernorOptions& memory = compile.memory;
  impl_->comm_ = options.communicator;
  impl_->executor_->set_communicator(impl_->comm_.get());
  impl_->shards_ = StateShards(*impl_->compiled_.model.graph, impl_->compiled_.model.params,
                               impl_->comm_.get(), options.shard_optimizer);
  refuse_what_the_device_cannot_hold(*impl_->compiled_.model.graph, *impl_->device_,
                                     options.optimizer_state);
  impl_->made_state_ = options.make_state;
  if (!options.make_state) {
    check_state(impl_->compiled_.model, *impl_->compiled_.model.graph);
  } else {
    try {
      impl_->state_ = init_params(impl_->compiled_.model, options.seed, *impl_->alloc_);
      if (options.optimizer_state)
        impl_->state_.merge(zero_state(*impl_->compiled_.model.graph, *impl_->alloc_));
    } catch (const OutOfMemory&) {
      // The allocator's own message would name one tensor; say what the cap has to hold first.
      const int64_t held = state_bytes(*impl_->compiled_.model.graph, options.optimizer_state);
      const std::string state = " cannot hold the parameters and optimizer state (" +
                                human_bytes(held) + ") before any step: ";
      if (memory.cap == 0)  // no cap: the device itself is what ran out
        throw OutOfMemory("the memory of device " + impl_->device_->name() + " (" +
                          human_bytes(impl_->device_->memory_info().total_bytes) + ")" + state +
                          "train a smaller model, or on a device with more memory");
      throw OutOfMemory("the memory cap " + human_bytes(memory.cap) + state +
                        "raise the cap (memory.cap) well above that, or train a smaller model");
    }
  }
  if (memory.cap > 0 && options.check_cap && !options.optimizer_state) {
    // What runs is the forward pass alone, with the parameters held.
    const memory::Governor& eval = impl_->evaluator().governor();
    const ir::Graph& forward = impl_->eval_compiled_->graph();
    eval.check_cap(
        [&](const ir::Bindings& b) { return impl_->state_held() + input_bytes(forward, b); });
  } else if (memory.cap > 0 && options.check_cap) {
    impl_->executor_->governor().check_cap(held);
  } else if (options.check_cap) {
    refuse_steps_the_device_cannot_run();
  }
}

// Without a cap, a step that needs more than the device's memory whatever the plan can never run:
// refused now, not at step 1 (an ONNX ConstantOfShape([2^33]) planned 64 GiB and failed allocating
// it). What it needs at least: what is held before the step, plus the most that one node reads or
// writes (its operands are all alive as it starts, its results as it ends; in place, one buffer
// may be both). Linear in the graph, unlike the governor's lower bound, which weighs every
// eviction (a third of a deep graph's compile).
void Trainer::refuse_steps_the_device_cannot_run() {
  const memory::Governor& gov = impl_->executor_->governor();
  const int64_t total = impl_->device_->memory_info().total_bytes;
  for (const ir::Bindings& b : gov.worst_shapes()) {
    int64_t node_most = 0;
    auto made = [&](const auto& values) {  // arguments are in bytes_held_for
      const std::set<const ir::Value*> distinct(values.begin(), values.end());
      int64_t bytes = 0;
      for (const ir::Value* v : distinct)
        if (v->producer()) bytes += memory::concrete_bytes(*v, b);
      return bytes;
    };
    for (const ir::Node* n : step_graph().nodes())
      node_most = std::max({node_most, made(n->operands()), made(n->results())});
    const int64_t need = bytes_held_for(b) + node_most;
    if (total > 0 && need > total)
      throw OutOfMemory("the step at its largest shape (" + ir::describe_bindings(step_graph(), b) +
                        ") needs at least " + exact_bytes(need) + ", more than the " +
                        exact_bytes(total) + " of device " + impl_->device_->name() +
                        ": lower the batch size or the maximum length, or train a smaller model");
  }
}

Trainer::~Trainer() = default;
Trainer::Trainer(Trainer&&) noexcept = default;
Trainer& Trainer::operator=(Trainer&&) noexcept = default;

float Trainer::evaluate(const Batch& batch) {
  impl_->require_state("evaluate");
  std::map<std::string, Tensor> given;
  bind_batch(batch, *impl_->compiled_.model.graph, given);  // checked as step() checks it
  Executor& eval = impl_->evaluator();
  // The parameters, and the batch's inputs that the forward pass still reads (not dropout's seed).
  std::map<std::string, Tensor> args;
  for (const ir::Value* a : impl_->eval_compiled_->graph().arguments()) {
    const auto& from = a->role() == ir::Role::kParameter ? impl_->state_ : given;
    if (auto it = from.find(a->name()); it != from.end()) args[a->name()] = it->second;
  }
  const float loss = eval.run(args).at("loss").to_vector<float>()[0];
  impl_->alloc_->trim();
  return loss;
}

int64_t Trainer::steps_done() const {
  return impl_->step_;
}
const ir::Graph& Trainer::graph() const {
  return *impl_->compiled_.model.graph;
}
const ir::Graph& Trainer::step_graph() const {
  return impl_->compiled_.graph();
}
const CompiledStep& Trainer::compiled() const {
  return impl_->compiled_;
}
memory::Allocator& Trainer::allocator() {
  return *impl_->alloc_;
}
void Trainer::release_cached_memory() {
  impl_->alloc_->release_cache();
}
int Trainer::clip_passes() const {
  return impl_->compile_options_.optimizer.clip_passes;
}

int64_t Trainer::memory_cap() const {
  return impl_->executor_->governor().options().cap;
}

memory::Governor& Trainer::governor() {
  return impl_->executor_->governor();
}
std::vector<std::string> Trainer::staged_ops() const {
  return impl_->executor_->staged_ops();
}
void Trainer::set_observer(StepObserver observer) {
  impl_->executor_->set_observer(std::move(observer));
}
devices::Device& Trainer::device() {
  return *impl_->device_;
}

std::vector<std::string> Trainer::input_names() const {
  std::vector<std::string> names;
  for (const ir::Value* a : impl_->compiled_.model.graph->arguments())
    if (a->role() == ir::Role::kInput && !supplied_by_the_trainer(a->name()))
      names.push_back(a->name());
  return names;
}

ir::Bindings Trainer::largest_shape() const {
  return ir::largest_bindings(*impl_->compiled_.model.graph);
}

int64_t Trainer::bytes_held_for(const ir::Bindings& b) const {
  return impl_->state_held() + input_bytes(*impl_->compiled_.model.graph, b);
}

// `args` with `batch`'s inputs added, each checked to be one of `g`'s that the caller gives.
void Trainer::bind_batch(const Batch& batch, const ir::Graph& g,
                         std::map<std::string, Tensor>& args) const {
  for (const auto& [name, t] : batch) {
    if (impl_->state_.contains(name))
      throw InvalidArgument("batch entry `" + name + "` names a parameter, not an input");
    const ir::Value* v = g.find_value(name);
    if (v == nullptr || v->role() != ir::Role::kInput || supplied_by_the_trainer(name)) {
      std::string inputs;
      for (const std::string& i : input_names()) inputs += (inputs.empty() ? "" : ", ") + i;
      throw InvalidArgument("batch entry `" + name +
                            "` is not an input of the model; its inputs are " + inputs);
    }
    args[name] = t;
  }
}

StepResult Trainer::step(const Batch& batch, double lr) {
  return step_micro_batches({batch}, lr);
}

namespace {

// A step's figures from its micro-batches' (`later` the newest): counts and times add up, peaks
// are the largest, the bindings are the last micro-batch's.
void add_micro_batch(StepStats& total, const StepStats& later) {
  StepStats sum = later;
  for (auto field : {&StepStats::ms, &StepStats::recompute_flops, &StepStats::compile_ms,
                     &StepStats::collective_ms, &StepStats::collective_wait_ms})
    sum.*field += total.*field;
  for (auto field :
       {&StepStats::allocations, &StepStats::evictions, &StepStats::recomputes, &StepStats::reloads,
        &StepStats::reload_bytes, &StepStats::fused_kernels, &StepStats::kernel_compiles,
        &StepStats::kernel_cache_loads, &StepStats::interpreted_kernels,
        &StepStats::host_staged_nodes, &StepStats::staged_bytes})
    sum.*field += total.*field;
  for (auto field : {&StepStats::live_peak_bytes, &StepStats::reserved_peak_bytes,
                     &StepStats::planned_peak_bytes})
    sum.*field = std::max(sum.*field, total.*field);
  sum.kernel_compile_ms.insert(sum.kernel_compile_ms.begin(), total.kernel_compile_ms.begin(),
                               total.kernel_compile_ms.end());
  total = std::move(sum);
}

}  // namespace

std::map<std::string, Tensor> Trainer::run_pass(std::map<std::string, Tensor>& args,
                                                StepStats& total) {
  StepStats stats;
  std::map<std::string, Tensor> out = impl_->executor_->run(args, &stats);
  impl_->alloc_->trim();  // blocks no step reused for a few steps go back to the system
  add_micro_batch(total, stats);
  return out;
}

StepResult Trainer::step_micro_batches(const std::vector<Batch>& micro_batches, double lr) {
  impl_->require_state("step");
  impl_->require_steps("step");
  const ir::Graph& g = *impl_->compiled_.model.graph;
  const bool two_passes = g.find_value("grad_norm.given") != nullptr;  // clipping's
  const bool accumulating = !two_passes && g.find_value("apply") != nullptr;
  if (micro_batches.empty()) throw InvalidArgument("step: no batch given");
  if (micro_batches.size() > 1 && !accumulating)
    throw InvalidArgument("step: " + std::to_string(micro_batches.size()) +
                          " micro-batches, but this trainer accumulates no gradients: build it "
                          "with TrainerOptions::optimizer.accumulate");
  const DType t = impl_->compiled_.model.loss->dtype();
  auto scalar = [&](double v) {
    return t == DType::kF64 ? Tensor::from<double>({}, {v}, *impl_->alloc_)
                            : Tensor::from<float>({}, {static_cast<float>(v)}, *impl_->alloc_);
  };
  // What every micro-batch reads beside its batch: the state (sharing storage, so that updates
  // land in impl_->state_) and the step's scalars.
  std::map<std::string, Tensor> common = impl_->state_;
  common["lr"] = scalar(lr);
  if (g.find_value("step"))
    common["step"] = Tensor::from<int64_t>({}, {impl_->updates_ + 1}, *impl_->alloc_);
  if (g.find_value("rank"))
    common["rank"] = Tensor::from<int64_t>({}, {impl_->comm_->rank()}, *impl_->alloc_);
  if (impl_->loss_scale_ > 0) common["loss_scale"] = scalar(impl_->loss_scale_);
  StepResult r;
  std::map<std::string, Tensor> out;
  try {
    for (size_t i = 0; i < micro_batches.size(); ++i) {
      std::map<std::string, Tensor> args = common;
      bind_batch(micro_batches[i], g, args);
      if (accumulating) args["apply"] = scalar(i + 1 == micro_batches.size() ? 1.0 : 0.0);
      if (two_passes) {  // the first pass gives the norm, the second clips by it and updates
        args["apply"] = scalar(0.0), args["grad_norm.given"] = scalar(0.0);
        const Tensor norm = run_pass(args, r.stats).at("grad_norm");
        args["apply"] = scalar(1.0), args["grad_norm.given"] = norm;
      }
      out = run_pass(args, r.stats);
    }
  } catch (...) {
    // A micro-batch that failed leaves no partial sums behind for the next step to add to.
    for (auto& [name, tensor] : impl_->state_)
      if (ir::is_accumulation_state(name)) tensor.zero();
    throw;
  }
  r.step = ++impl_->step_;
  r.loss = out.at("loss").to_vector<float>()[0];
  r.grad_norm = out.at("grad_norm").to_vector<float>()[0];
  r.loss_scale = impl_->loss_scale_;
  r.skipped = r.loss_scale > 0 && !std::isfinite(r.grad_norm);
  if (!r.skipped) ++impl_->updates_;
  if (r.loss_scale > 0) impl_->update_loss_scale(r.skipped);
  return r;
}

std::vector<std::string> Trainer::parameter_names() const {
  std::vector<std::string> names;
  for (const ir::Value* p : impl_->compiled_.model.params) names.push_back(p->name());
  return names;
}

const Tensor& Trainer::parameter(const std::string& name) const {
  impl_->require_state("read");
  auto it = impl_->state_.find(name);
  if (it == impl_->state_.end())
    throw InvalidArgument("no parameter or state named `" + name + "`");
  return it->second;
}

void Trainer::set_parameter(const std::string& name, const Tensor& value) {
  const Tensor& p = parameter(name);
  if (p.dtype() != value.dtype() || p.shape() != value.shape()) {
    throw InvalidArgument("parameter `" + name + "` is " + p.describe() + ", the value " +
                          value.describe());
  }
  p.copy_from(value);
}

void Trainer::save(const std::string& dir, const std::map<std::string, std::string>& extra) const {
  impl_->require_state("save");
  impl_->require_steps("save");
  for (const auto& [name, t] : impl_->state_) {
    if (ir::is_accumulation_state(name)) continue;  // empty between steps, and not saved
    if (int64_t bad = t.count_nonfinite(); bad > 0) {
      throw InvalidArgument("cannot save a checkpoint to " + dir + ": `" + name + "` holds " +
                            std::to_string(bad) +
                            " NaN or infinite values (the training diverged); resume from an "
                            "earlier checkpoint, with a lower learning rate");
    }
  }
  // A sharded optimizer's parts, joined in host memory: every rank takes part, rank 0 writes.
  std::unique_ptr<devices::Device> host;
  std::unique_ptr<memory::CachingAllocator> host_memory;
  std::map<std::string, Tensor> whole = impl_->state_;
  if (!impl_->shards_.empty()) {
    host = devices::make_cpu_device(1);
    host_memory = std::make_unique<memory::CachingAllocator>(*host, 0);
    whole = impl_->shards_.gather(impl_->state_, *host_memory);
    if (impl_->comm_->rank() != 0) return;
  }
  // Gradient accumulation's buffers are empty between steps: nothing a resume needs.
  std::erase_if(whole, [](const auto& entry) { return ir::is_accumulation_state(entry.first); });
  fs::path final = fs::path(dir).lexically_normal();
  if (!final.has_filename()) final = final.parent_path();  // "ck/step-1/"
  if (final.empty() || final.filename() == "." || final.filename() == "..") {
    throw InvalidArgument("cannot save a checkpoint to `" + dir +
                          "`: name a folder, e.g. ckpt/step-100");
  }
  if (final.parent_path().empty()) final = fs::path(".") / final;
  check_replaceable(final);
  std::string meta;
  try {
    nlohmann::json j{{"step", impl_->step_},
                     {"updates", impl_->updates_},
                     {"graph", impl_->compiled_.model.graph->name()},
                     {"extra", extra}};
    if (impl_->loss_scale_ > 0) {
      j["loss_scale"] = impl_->loss_scale_;
      j["loss_scale_clean_steps"] = impl_->clean_steps_;
    }
    meta = j.dump(2) + "\n";
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument("checkpoint extra data must be UTF-8 text: " + std::string(e.what()));
  }
  // Only a complete checkpoint gets the final name; an older one of the same step goes first.
  write_folder(final, "put checkpoint " + final.string() + " in place", [&](const fs::path& dir) {
    write_safetensors((dir / "state.safetensors").string(), whole,
                      {{"graph", impl_->compiled_.model.graph->name()}});
    write_text_durably((dir / "trainer.json").string(), meta);
  });
}

std::map<std::string, std::string> Trainer::saved_extra(const std::string& dir) {
  return read_trainer_json(dir + "/trainer.json").extra;
}

std::map<std::string, std::string> Trainer::load(const std::string& dir) {
  impl_->require_state("load into");
  impl_->require_steps("load into");
  TrainerJson saved = read_trainer_json(dir + "/trainer.json");
  TensorFile file = read_safetensors(dir + "/state.safetensors", *impl_->alloc_);
  // Every tensor is checked before any is copied: a checkpoint that does not fit leaves the
  // trainer as it was.
  for (const auto& [name, t] : impl_->state_) {
    if (ir::is_accumulation_state(name)) continue;  // not saved: empty between steps
    auto it = file.tensors.find(name);
    if (it == file.tensors.end()) {
      throw InvalidArgument("checkpoint " + dir + " lacks `" + name +
                            "`: it belongs to a different model");
    }
    const ir::Value* arg = graph().find_value(name);
    if (it->second.dtype() != t.dtype() && arg && arg->role() == ir::Role::kState) {
      throw InvalidArgument(
          "checkpoint " + dir + " holds `" + name + "` as " + it->second.describe() +
          ": its optimizer state is " + state_held_as(it->second.dtype()) + ", this run's " +
          state_held_as(t.dtype()) + "; resume it with the optimizer state it was written with");
    }
    if (it->second.dtype() != t.dtype() ||
        it->second.shape() != impl_->shards_.saved_shape(name, t)) {
      throw InvalidArgument("checkpoint " + dir + " holds `" + name + "` as " +
                            it->second.describe() + ", the model has " + t.describe() +
                            ": it belongs to a different model");
    }
    if (int64_t bad = it->second.count_nonfinite(); bad > 0) {
      throw IoError("checkpoint " + dir + " holds " + std::to_string(bad) +
                    " NaN or infinite values in `" + name + "`: it cannot be trained from");
    }
  }
  for (const auto& [name, t] : impl_->state_)
    if (!ir::is_accumulation_state(name)) impl_->shards_.take_part(name, file.tensors.at(name), t);
  impl_->step_ = saved.step;
  impl_->updates_ = saved.updates;
  // A checkpoint of a run without loss scaling starts the scaler afresh.
  if (impl_->loss_scale_ > 0 && saved.loss_scale > 0)
    impl_->loss_scale_ = saved.loss_scale, impl_->clean_steps_ = saved.clean_steps;
  return saved.extra;
}

std::map<std::string, Tensor> parameters_of(const Trainer& trainer) {
  std::map<std::string, Tensor> params;
  for (const std::string& name : trainer.parameter_names()) params[name] = trainer.parameter(name);
  return params;
}

}  // namespace disc::engine
