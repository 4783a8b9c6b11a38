#include "formats/lora_adapter.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/read_file.h"
#include "engine/durable_folder.h"
#include "engine/safetensors.h"
#include "engine/trainer.h"

namespace disc::formats {
namespace fs = std::filesystem;
using engine::Tensor;
using ir::models::LlamaConfig;
using ir::models::LoraConfig;
using nlohmann::json;

namespace {

constexpr const char* kConfig = "adapter_config.json";
constexpr const char* kWeights = "adapter_model.safetensors";

// One adapted projection of one layer: disc's weight name and PEFT's module path.
struct Adapted {
  std::string weight;  // l0.wq
  std::string module;  // base_model.model.model.layers.0.self_attn.q_proj
  int64_t in, out;
};

std::vector<Adapted> adapted(const LlamaConfig& c) {
  std::vector<Adapted> out;
  for (int64_t l = 0; l < c.layers; ++l) {
    for (const ir::models::Projection& p : ir::models::lora_targets(c.lora)) {
      const std::vector<int64_t> shape = ir::models::projection_shape(c, p);
      out.push_back(
          {"l" + std::to_string(l) + "." + p.disc,
           "base_model.model.model.layers." + std::to_string(l) + "." + p.module + "." + p.hf,
           shape[0], shape[1]});
    }
  }
  return out;
}

json read_config_json(const std::string& path) {
  try {
    json j = json::parse(read_regular_file(path, "the adapter's config"));
    if (!j.is_object()) throw InvalidArgument(path + " is not a JSON object");
    return j;
  } catch (const json::exception& e) {
    throw InvalidArgument(path + " is not valid JSON (" + e.what() + ")");
  }
}

// Refuses what PEFT can write and disc does not run, naming the key.
void refuse_unsupported(const json& j, const std::string& path) {
  auto set = [&](const char* k) { return j.contains(k) && !j[k].is_null(); };
  auto is_true = [&](const char* k) { return set(k) && j[k].is_boolean() && j[k].get<bool>(); };
  auto non_empty = [&](const char* k) { return set(k) && !j[k].empty(); };
  std::string why;
  if (j.value("peft_type", "") != "LORA")
    why = "peft_type is " + (set("peft_type") ? j["peft_type"].dump() : "missing") + ", not LORA";
  else if (is_true("use_dora"))
    why = "use_dora (DoRA) is not supported";
  else if (is_true("use_rslora"))
    why = "use_rslora (scale alpha/sqrt(r)) is not supported";
  else if (is_true("fan_in_fan_out"))
    why = "fan_in_fan_out is for GPT-2's Conv1D layers, not a llama's";
  else if (set("bias") && j["bias"] != "none")
    why = "bias is " + j["bias"].dump() + "; disc trains adapters without biases (bias none)";
  else if (non_empty("rank_pattern") || non_empty("alpha_pattern"))
    why = "per-module ranks or alphas (rank_pattern, alpha_pattern) are not supported";
  else if (non_empty("modules_to_save"))
    why = "modules_to_save (fully trained extra modules) is not supported";
  else if (set("layers_to_transform"))
    why = "layers_to_transform (adapters on some layers only) is not supported";
  else if (!j.contains("target_modules") || !j["target_modules"].is_array())
    why = "target_modules must be a list of projection names (a regex is not supported)";
  else if (!j.contains("r") || !j["r"].is_number_integer() || !j.contains("lora_alpha") ||
           !j["lora_alpha"].is_number())
    why = "r (an integer) and lora_alpha (a number) must be given";
  if (!why.empty()) throw InvalidArgument(path + ": " + why);
}

}  // namespace

std::vector<PeftName> peft_names(const LlamaConfig& c) {
  std::vector<PeftName> names;
  const int64_t r = c.lora.rank;
  for (const Adapted& a : adapted(c)) {
    names.push_back({ir::models::lora_a_name(a.weight), a.module + ".lora_A.weight", {r, a.in}});
    names.push_back({ir::models::lora_b_name(a.weight), a.module + ".lora_B.weight", {a.out, r}});
  }
  return names;
}

void write_peft_adapter(const std::map<std::string, Tensor>& params, const LlamaConfig& c,
                        const std::string& dir, const std::string& base_model, bool replace) {
  fs::path final = fs::path(dir).lexically_normal();
  if (!final.has_filename()) final = final.parent_path();
  std::error_code ec;
  if (!replace && fs::exists(final, ec) &&
      (!fs::is_directory(final, ec) || !fs::is_empty(final, ec)))
    throw InvalidArgument("cannot write the adapter to " + final.string() +
                          ": it exists and is not an empty folder; name a new folder");
  std::map<std::string, Tensor> tensors;
  for (const PeftName& n : peft_names(c)) {
    auto it = params.find(n.disc);
    if (it == params.end())
      throw InvalidArgument("cannot write the adapter: the parameters lack `" + n.disc + "`");
    tensors[n.peft] = it->second;
  }
  json targets = json::array();
  for (const ir::models::Projection& p : ir::models::lora_targets(c.lora)) targets.push_back(p.hf);
  const json config = {{"peft_type", "LORA"},
                       {"task_type", "CAUSAL_LM"},
                       {"base_model_name_or_path", base_model},
                       {"r", c.lora.rank},
                       {"lora_alpha", c.lora.alpha},
                       {"lora_dropout", c.lora.dropout},
                       {"target_modules", targets},
                       {"bias", "none"},
                       {"fan_in_fan_out", false},
                       {"use_rslora", false},
                       {"use_dora", false},
                       {"init_lora_weights", true},
                       {"inference_mode", true},
                       {"modules_to_save", nullptr},
                       {"layers_to_transform", nullptr},
                       {"rank_pattern", json::object()},
                       {"alpha_pattern", json::object()}};
  engine::write_folder(final, "write the adapter to " + final.string(), [&](const fs::path& d) {
    engine::write_safetensors((d / kWeights).string(), tensors, {{"format", "pt"}});
    engine::write_text_durably((d / kConfig).string(), config.dump(2) + "\n");
  });
}

LoraConfig read_peft_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / kConfig).string();
  const json j = read_config_json(path);
  refuse_unsupported(j, path);
  LoraConfig l;
  l.rank = j["r"].get<int64_t>();
  l.alpha = j["lora_alpha"].get<double>();
  l.dropout = j.contains("lora_dropout") && j["lora_dropout"].is_number()
                  ? j["lora_dropout"].get<double>()
                  : 0.0;
  if (l.rank < 1) throw InvalidArgument(path + ": r is " + std::to_string(l.rank) + ", not >= 1");
  for (const json& t : j["target_modules"]) {
    if (!t.is_string()) throw InvalidArgument(path + ": target_modules holds " + t.dump());
    l.targets.push_back(t.get<std::string>());
  }
  try {
    ir::models::lora_targets(l);  // names only projections disc has
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(path + ": " + e.what());
  }
  return l;
}

void check_peft_adapter(const std::string& dir, const LlamaConfig& c) {
  const std::string path = (fs::path(dir) / kWeights).string();
  const engine::MappedTensorFile file(path);  // the header alone: no tensor is read
  std::map<std::string, engine::MappedTensorFile::Entry> left = file.tensors();
  for (const PeftName& n : peft_names(c)) {
    auto it = left.find(n.peft);
    if (it == left.end())
      throw InvalidArgument(path + " lacks `" + n.peft + "`, an adapter that the base (" +
                            std::to_string(c.layers) + " layers) and " + kConfig +
                            "'s target_modules call for");
    if (it->second.shape != n.shape)
      throw InvalidArgument(
          path + ": `" + n.peft + "` is " + std::string(dtype_name(it->second.dtype)) +
          json(it->second.shape).dump() +
          ", where the base and r = " + std::to_string(c.lora.rank) + " make it " +
          json(n.shape).dump() + ": the adapter belongs to another base model");
    left.erase(it);
  }
  if (!left.empty())
    throw InvalidArgument(path + " holds `" + left.begin()->first + "`, which is no " +
                          "adapter of this base (its layers and " + kConfig +
                          "'s target_modules say which there are)");
}

std::map<std::string, Tensor> read_peft_adapter(const std::string& dir, const LlamaConfig& c,
                                                memory::Allocator& alloc) {
  check_peft_adapter(dir, c);
  engine::TensorFile file = engine::read_safetensors((fs::path(dir) / kWeights).string(), alloc);
  std::map<std::string, Tensor> out;
  for (const PeftName& n : peft_names(c))
    out[n.disc] = engine::as_dtype(file.tensors.at(n.peft), DType::kF32, alloc);
  return out;
}

void load_peft_adapter(const std::string& dir, const LlamaConfig& c, engine::Trainer& trainer) {
  for (auto& [name, t] : read_peft_adapter(dir, c, trainer.allocator()))
    trainer.set_parameter(name, t);
}

std::map<std::string, Tensor> merge_lora(const std::map<std::string, Tensor>& params,
                                         const LlamaConfig& c, memory::Allocator& alloc) {
  std::map<std::string, Tensor> merged;
  for (const auto& [name, t] : params)
    if (!name.ends_with(".lora_A") && !name.ends_with(".lora_B"))
      merged[name] = engine::as_dtype(t, DType::kF32, alloc);
  const int64_t r = c.lora.rank;
  const float scale = static_cast<float>(c.lora.scale());
  for (const Adapted& a : adapted(c)) {
    const std::vector<float> A = params.at(ir::models::lora_a_name(a.weight)).to_vector<float>(),
                             B = params.at(ir::models::lora_b_name(a.weight)).to_vector<float>();
    std::vector<float> w = merged.at(a.weight).to_vector<float>();  // [in, out]
    std::vector<float> bt(static_cast<size_t>(r * a.out));          // B^T [r, out]: rows contiguous
    for (int64_t o = 0; o < a.out; ++o)
      for (int64_t k = 0; k < r; ++k) bt[k * a.out + o] = B[o * r + k];
    for (int64_t i = 0; i < a.in; ++i)
      for (int64_t k = 0; k < r; ++k) {
        const float f = scale * A[k * a.in + i];
        float* row = w.data() + i * a.out;
        const float* b = bt.data() + k * a.out;
        for (int64_t o = 0; o < a.out; ++o) row[o] += f * b[o];
      }
    // A new tensor: merged[a.weight] may share the caller's f32 parameter.
    merged[a.weight] = Tensor::from<float>(merged.at(a.weight).shape(), w, alloc);
  }
  return merged;
}

}  // namespace disc::formats
