#include "weights.h"

#include <filesystem>

#include "base/error.h"
#include "checkpoints.h"
#include "engine/init.h"
#include "engine/safetensors.h"
#include "formats/lora_adapter.h"
#include "formats/onnx/weights.h"
#include "ir/binding.h"
#include "ir/graph.h"

namespace disc::apps {

std::string checkpoint_to_use(const Config& c, const std::string& named, const std::string& verb) {
  if (!named.empty()) return named;
  const std::string dir = c.get_string("checkpoint.dir");
  if (dir.empty()) return "";
  // A mistyped folder, or a run that died before its first checkpoint, must not quietly export
  // the weights the run started from.
  auto done = std::filesystem::exists(dir) ? complete_checkpoints(dir) : std::vector<std::string>{};
  if (done.empty()) {
    throw InvalidArgument("checkpoint.dir " + dir + " holds no complete checkpoint to " + verb +
                          ": name one with --checkpoint, or set checkpoint.dir='' to " + verb +
                          " the weights a run starts from");
  }
  return done.back();
}

std::map<std::string, engine::Tensor> initial_weights(const RunSetup& s, memory::Allocator& host) {
  if (s.onnx) {
    std::map<std::string, engine::Tensor> params;
    for (const ir::Value* p : s.model.params) {
      params[p->name()] = engine::Tensor::from<float>(ir::concrete_shape(*s.model.graph, *p, {}),
                                                      s.onnx->weights.at(p->name()), host);
    }
    return params;
  }
  std::map<std::string, engine::Tensor> params;
  if (s.hf) {
    for (const formats::HfName& n : formats::hf_llama_names(s.hf->config))
      params[n.disc] = formats::read_hf_weight(*s.hf, n, host);
    // New adapters: their own initialisation (the folder holds none).
    ir::models::Model adapters;
    adapters.init = s.model.init;
    for (ir::Value* p : s.model.params)
      if (!params.contains(p->name())) adapters.params.push_back(p);
    params.merge(engine::init_params(adapters, s.trainer.seed, host));
  } else {
    params = engine::init_params(s.model, s.trainer.seed, host);
  }
  if (!s.lora_from.empty())
    for (auto& [name, t] : formats::read_peft_adapter(s.lora_from, *s.llama, host))
      params[name] = t;
  return params;
}

namespace {

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

}  // namespace

std::map<std::string, engine::Tensor> checkpoint_parameters(const ir::models::Model& m,
                                                            const std::string& from,
                                                            memory::Allocator& host) {
  // The checkpoint holds optimizer state too; callers take the parameters by name. Shapes are
  // checked here: another model's checkpoint may use the same names.
  auto params = engine::read_safetensors(from + "/state.safetensors", host).tensors;
  check_parameters(m, params, from);
  return params;
}

}  // namespace disc::apps
