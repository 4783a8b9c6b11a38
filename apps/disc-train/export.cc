#include "export.h"

#include <filesystem>
#include <iostream>

#include "base/error.h"
#include "checkpoints.h"
#include "formats/lora_adapter.h"
#include "formats/onnx/weights.h"
#include "ir/graph.h"
#include "output_checks.h"
#include "setup.h"
#include "weights.h"

namespace disc::apps {
namespace {

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
  const std::string from = checkpoint_to_use(c, checkpoint, "export");
  std::map<std::string, engine::Tensor> params =
      from.empty() ? initial_weights(s, host) : checkpoint_parameters(s.model, from, host);
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
  std::cout << "writing " << to << " ..." << std::endl;
  const std::string what = write_llama_export(c, s, params, to, force);
  std::cout << "exported " << (from.empty() ? "the initial weights" : from) << " to " << to << " ("
            << what << ")\n";
  return 0;
}

std::string write_llama_export(const Config& c, const RunSetup& s,
                               const std::map<std::string, engine::Tensor>& params,
                               const std::string& to, bool replace) {
  const ir::models::LoraConfig& lora = s.llama->lora;
  const std::string layers = std::to_string(s.llama->layers) + " layers";
  if (!lora.on()) {
    formats::write_hf_llama(params, *s.llama, to, s.hf.get(), export_dtype(c), replace);
    return "Hugging Face llama, " + layers;
  }
  if (c.get_string("export.lora") == "adapter") {
    formats::write_peft_adapter(params, *s.llama, to, s.hf ? s.hf->dir : "", replace);
    return "PEFT LoRA adapter, r " + std::to_string(lora.rank) + ", " + layers;
  }
  auto cpu = engine::make_device("cpu", 0);
  memory::DeviceAllocator host(*cpu);
  // Without a source folder to take dtypes from, the merged weights are in the base's.
  const std::optional<DType> dtype = export_dtype(c) ? export_dtype(c)
                                     : s.hf          ? std::nullopt
                                                     : std::optional<DType>(lora.base);
  formats::write_hf_llama(formats::merge_lora(params, *s.llama, host), *s.llama, to, s.hf.get(),
                          dtype, replace);
  return "Hugging Face llama with the LoRA adapters merged, " + layers;
}

}  // namespace disc::apps
