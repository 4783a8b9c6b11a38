#include "export.h"

#include <filesystem>
#include <iostream>

#include "base/error.h"
#include "checkpoints.h"
#include "engine/init.h"
#include "engine/safetensors.h"
#include "formats/onnx/weights.h"
#include "ir/binding.h"
#include "ir/graph.h"
#include "setup.h"

namespace disc::apps {
namespace {

// The checkpoint to export: `named`, else the newest complete one in checkpoint.dir ("": none).
std::string checkpoint_to_export(const Config& c, const std::string& named) {
  if (!named.empty()) return named;
  const std::string dir = c.get_string("checkpoint.dir");
  if (dir.empty()) return "";
  // A mistyped folder, or a run that died before its first checkpoint, must not quietly export
  // the weights the run started from.
  auto done = std::filesystem::exists(dir) ? complete_checkpoints(dir) : std::vector<std::string>{};
  if (done.empty()) {
    throw InvalidArgument("checkpoint.dir " + dir + " holds no complete checkpoint to export: " +
                          "name one with --checkpoint, or set checkpoint.dir='' to export the " +
                          "weights a run starts from");
  }
  return done.back();
}

// The parameters a run of this config starts from.
std::map<std::string, engine::Tensor> initial_weights(const RunSetup& s, memory::Allocator& host) {
  if (s.onnx) {
    std::map<std::string, engine::Tensor> params;
    for (const ir::Value* p : s.model.params) {
      params[p->name()] = engine::Tensor::from<float>(ir::concrete_shape(*s.model.graph, *p, {}),
                                                      s.onnx->weights.at(p->name()), host);
    }
    return params;
  }
  if (!s.hf) return engine::init_params(s.model, s.trainer.seed, host);
  std::map<std::string, engine::Tensor> params;
  for (const formats::HfName& n : formats::hf_llama_names(s.hf->config))
    params[n.disc] = formats::read_hf_weight(*s.hf, n, host);
  return params;
}

// Refuses a checkpoint of another model: a parameter missing or of another shape.
void check_parameters(const ir::models::Model& m,
                      const std::map<std::string, engine::Tensor>& params,
                      const std::string& from) {
  for (const ir::Value* p : m.params) {
    auto it = params.find(p->name());
    std::vector<int64_t> shape;
    for (const ir::DimExpr& d : p->shape()) shape.push_back(d.constant().value_or(-1));
    if (it == params.end() || it->second.shape() != shape) {
      throw InvalidArgument("checkpoint " + from + (it == params.end() ? " lacks `" : " holds `") +
                            p->name() + "`" +
                            (it == params.end() ? "" : " as " + it->second.describe()) +
                            ", which the config's model has as " + p->type().str() +
                            ": it belongs to another run (name it with --checkpoint)");
    }
  }
}

// Refuses a target inside checkpoint.dir, and one that holds something already unless `force`:
// the ONNX export overwrote a file silently where the Hugging Face export refused a folder.
void check_target(const Config& c, const std::string& to, bool force) {
  check_outside_checkpoints(c, "--to", to);
  std::error_code ec;
  const bool taken = std::filesystem::exists(to, ec) &&
                     (!std::filesystem::is_directory(to, ec) || !std::filesystem::is_empty(to, ec));
  if (taken && !force)
    throw InvalidArgument("--to " + to + " exists" +
                          (std::filesystem::is_directory(to, ec) ? " and is not empty" : "") +
                          ": name a new one, or pass --force to replace it");
}

}  // namespace

int export_model(const Config& c, const std::string& to, const std::string& checkpoint,
                 bool force) {
  check_target(c, to, force);
  RunSetup s = make_setup(c);
  if (!s.llama && !s.onnx)
    throw InvalidArgument(
        "export writes a Hugging Face llama or, for model.onnx, the ONNX model: "
        "model.family must be llama");
  auto cpu = engine::make_device("cpu", 0);
  memory::DeviceAllocator host(*cpu);
  const std::string from = checkpoint_to_export(c, checkpoint);
  std::map<std::string, engine::Tensor> params;
  if (from.empty()) {
    params = initial_weights(s, host);
  } else {
    // The checkpoint holds optimizer state too; write_hf_llama takes the parameters by name and
    // refuses a checkpoint that lacks one. Shapes are checked here: another model's checkpoint
    // may use the same names.
    params = engine::read_safetensors(from + "/state.safetensors", host).tensors;
    check_parameters(s.model, params, from);
  }
  if (s.onnx) {  // the imported file again, its initializers replaced by these weights
    if (!to.ends_with(".onnx"))
      throw InvalidArgument("--to " + to + ": model.onnx exports an ONNX file; name it FILE.onnx");
    std::map<std::string, engine::Tensor> weights;  // a checkpoint holds optimizer state too
    for (const ir::Value* p : s.model.params) weights[p->name()] = params.at(p->name());
    params = std::move(weights);
    onnx::export_weights(s.onnx->source, params, to);
    std::cout << "exported " << (from.empty() ? "the initial weights" : from) << " to " << to
              << " (" << s.onnx->source << " with " << params.size() << " trained initializers)\n";
    return 0;
  }
  // A billion-parameter model takes a while to convert and write: say what is coming.
  std::cout << "writing " << formats::hf_llama_names(*s.llama).size() << " tensors to " << to
            << " ..." << std::endl;
  formats::write_hf_llama(params, *s.llama, to, s.hf.get(), export_dtype(c), force);
  std::cout << "exported " << (from.empty() ? "the initial weights" : from) << " to " << to
            << " (Hugging Face llama, " << s.llama->layers << " layers)\n";
  return 0;
}

}  // namespace disc::apps
