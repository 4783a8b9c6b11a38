#include "engine/trainer.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/init.h"
#include "devices/simulated/simulated_device.h"
#include "engine/safetensors.h"
#include "ir/error.h"

namespace disc::engine {
namespace {

void write_text_atomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw IoError("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace

std::unique_ptr<devices::Device> make_device(const std::string& name, int threads) {
  if (name == "cpu") return devices::make_cpu_device(threads);
  if (name == "sim") return devices::make_simulated_device(threads, devices::make_cpu_device(1)->memory_info().total_bytes);
  throw InvalidArgument("unknown device `" + name + "`; this build has: cpu, sim");
}

Trainer::Trainer(ir::models::Model model, const TrainerOptions& options) : model_(std::move(model)) {
  device_ = make_device(options.device, options.threads);
  alloc_ = std::make_unique<memory::CachingAllocator>(*device_, options.memory.cap);
  ir::build_training_step(*model_.graph, model_.loss, model_.params, options.optimizer);
  memory::GovernorOptions memory = options.memory;
  memory.offload = memory.offload && device_->separate_memory();
  executor_ = std::make_unique<Executor>(*model_.graph, *alloc_, memory);
  state_ = init_params(model_, options.seed, *alloc_);
  state_.merge(zero_state(*model_.graph, *alloc_));
  if (memory.cap > 0) executor_->governor().check_cap(largest_shape(), bytes_held_for(largest_shape()));
}

ir::Bindings Trainer::largest_shape() const {
  const ir::ShapeGraph& shapes = model_.graph->shapes();
  ir::Bindings b;
  for (const ir::Symbol* s : shapes.symbols()) {
    if (shapes.is_independent(s->name)) b[s->name] = s->hi / s->multiple_of * s->multiple_of;
  }
  return shapes.complete_and_check(b);
}

int64_t Trainer::bytes_held_for(const ir::Bindings& b) const {
  int64_t total = 0;
  for (const auto& [name, t] : state_) total += static_cast<int64_t>(devices::allocation_size(t.bytes()));
  for (const ir::Value* a : model_.graph->arguments()) {
    if (a->role() == ir::Role::kInput) total += memory::concrete_bytes(*a, b);
  }
  return total;
}

StepResult Trainer::step(const Batch& batch, double lr) {
  std::map<std::string, Tensor> args = state_;  // shares storage: updates land in state_
  for (const auto& [name, t] : batch) {
    if (state_.contains(name)) throw InvalidArgument("batch entry `" + name + "` names a parameter, not an input");
    args[name] = t;
  }
  ir::DType t = model_.loss->dtype();
  args["lr"] = t == ir::DType::kF64 ? Tensor::from<double>({}, {lr}, *alloc_)
                                    : Tensor::from<float>({}, {static_cast<float>(lr)}, *alloc_);
  if (model_.graph->find_value("step")) args["step"] = Tensor::from<int64_t>({}, {step_ + 1}, *alloc_);
  StepResult r;
  auto out = executor_->run(args, &r.stats);
  alloc_->trim();  // blocks this step did not reuse go back to the system
  r.step = ++step_;
  r.loss = out.at("loss").data<float>()[0];
  r.grad_norm = out.at("grad_norm").data<float>()[0];
  return r;
}

std::vector<std::string> Trainer::parameter_names() const {
  std::vector<std::string> names;
  for (const ir::Value* p : model_.params) names.push_back(p->name());
  return names;
}

const Tensor& Trainer::parameter(const std::string& name) const {
  auto it = state_.find(name);
  if (it == state_.end()) throw InvalidArgument("no parameter or state named `" + name + "`");
  return it->second;
}

void Trainer::set_parameter(const std::string& name, const Tensor& value) {
  const Tensor& p = parameter(name);
  if (p.dtype() != value.dtype() || p.shape() != value.shape()) {
    throw InvalidArgument("parameter `" + name + "` is " + p.describe() + ", the value " + value.describe());
  }
  std::memcpy(p.raw(), value.raw(), p.bytes());
}

void Trainer::save(const std::string& dir, const std::map<std::string, std::string>& extra) const {
  std::filesystem::create_directories(dir);
  write_safetensors(dir + "/state.safetensors", state_, {{"graph", model_.graph->name()}});
  nlohmann::json j = {{"step", step_}, {"graph", model_.graph->name()}, {"extra", extra}};
  write_text_atomically(dir + "/trainer.json", j.dump(2) + "\n");
}

std::map<std::string, std::string> Trainer::load(const std::string& dir) {
  std::ifstream in(dir + "/trainer.json");
  if (!in) throw IoError("no complete checkpoint in " + dir + " (trainer.json is missing)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw IoError(dir + "/trainer.json is not valid JSON: " + e.what());
  }
  TensorFile file = read_safetensors(dir + "/state.safetensors", *alloc_);
  for (const auto& [name, t] : state_) {
    auto it = file.tensors.find(name);
    if (it == file.tensors.end()) {
      throw InvalidArgument("checkpoint " + dir + " lacks `" + name + "`: it belongs to a different model");
    }
    set_parameter(name, it->second);
  }
  step_ = j.at("step").get<int64_t>();
  return j.at("extra").get<std::map<std::string, std::string>>();
}

}  // namespace disc::engine
