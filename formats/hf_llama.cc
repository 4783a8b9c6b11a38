#include "formats/hf_llama.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "base/error.h"
#include "base/finite.h"
#include "base/half.h"
#include "base/read_file.h"
#include "engine/durable_folder.h"
#include "engine/trainer.h"

namespace disc::formats {
namespace fs = std::filesystem;
using engine::make_device;
using engine::MappedTensorFile;
using engine::Tensor;
using engine::Trainer;
using engine::write_folder;
using engine::write_text_durably;
using nlohmann::json;

std::vector<HfName> hf_llama_names(const ir::models::LlamaConfig& c) {
  std::vector<HfName> names = {{"embed", "model.embed_tokens.weight", false}};
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string d = "l" + std::to_string(l) + ".", h = "model.layers." + std::to_string(l) + ".";
    names.push_back({d + "attn_norm", h + "input_layernorm.weight", false});
    for (const char* p : {"q", "k", "v", "o"})
      names.push_back({d + "w" + p, h + "self_attn." + p + "_proj.weight", true});
    names.push_back({d + "mlp_norm", h + "post_attention_layernorm.weight", false});
    for (const char* p : {"gate", "up", "down"})
      names.push_back({d + "w_" + p, h + "mlp." + p + "_proj.weight", true});
  }
  names.push_back({"final_norm", "model.norm.weight", false});
  if (!c.tied_embeddings) names.push_back({"lm_head", "lm_head.weight", true});
  return names;
}

namespace {

// The HF shape of each tensor a llama of config `c` has, by HF name.
std::map<std::string, std::vector<int64_t>> hf_shapes(const ir::models::LlamaConfig& c) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const HfName& n : hf_llama_names(c)) {
    const std::string& h = n.hf;
    std::vector<int64_t> s = {c.vocab, c.hidden};    // embed_tokens, lm_head
    if (h.ends_with("norm.weight")) s = {c.hidden};  // the layernorms and the final norm
    for (const ir::models::Projection& p : ir::models::llama_projections())
      if (h.ends_with("." + p.hf + ".weight")) {
        const std::vector<int64_t> in_out = ir::models::projection_shape(c, p);
        s = {in_out[1], in_out[0]};
      }
    shapes[h] = s;
  }
  return shapes;
}

std::string shape_text(const std::vector<int64_t>& s) {
  return json(s).dump();
}

std::string torch_dtype(DType t) {
  return t == DType::kBF16 ? "bfloat16" : t == DType::kF16 ? "float16" : "float32";
}

json parse_json(const std::string& path, const std::string& text) {
  try {
    json j = json::parse(text);
    if (!j.is_object()) throw InvalidArgument(path + " is not a JSON object");
    return j;
  } catch (const json::exception& e) {
    throw InvalidArgument(path + " is not valid JSON (" + e.what() + ")");
  }
}

// A parsed config.json with its path and text (to quote a number as written).
struct ConfigJson {
  json j;
  std::string path, text;
};

// The text of `name`'s value in a JSON object's text, when it is a number: what the user wrote,
// which a double (2^64 + 96) or an int64 cast (-9223372036854775808) no longer shows.
std::string as_written(const ConfigJson& c, const std::string& name) {
  std::smatch m;
  const std::regex number("\"" + name + "\"\\s*:\\s*(-?[0-9][0-9.eE+-]*)");
  return std::regex_search(c.text, m, number) ? m[1].str() : c.j[name].dump();
}

// config.json's key as T: InvalidArgument naming the key when it is missing (and has no default)
// or of the wrong kind: an integer must be written as one (96.5 was read as 96) and fit T.
template <typename T>
T key(const ConfigJson& c, const std::string& name, std::optional<T> fallback = std::nullopt) {
  const json& j = c.j;
  if (!j.contains(name) || j[name].is_null()) {
    if (fallback) return *fallback;
    throw InvalidArgument(c.path + " lacks `" + name + "`, which a llama's config.json gives");
  }
  const json& v = j[name];
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    const bool fits =
        (v.is_number_unsigned() && v.get<uint64_t>() <= std::numeric_limits<T>::max()) ||
        (v.is_number_integer() && !v.is_number_unsigned() &&
         v.get<int64_t>() >= std::numeric_limits<T>::min() &&
         v.get<int64_t>() <= std::numeric_limits<T>::max());
    if (!fits)
      throw InvalidArgument(c.path + ": `" + name + "` is " + as_written(c, name) +
                            ", not an integer from " +
                            std::to_string(std::numeric_limits<T>::min()) + " to " +
                            std::to_string(std::numeric_limits<T>::max()));
  }
  try {
    return v.get<T>();
  } catch (const json::exception&) {
    throw InvalidArgument(c.path + ": `" + name + "` is " + v.dump() + ", not a " +
                          (std::is_same_v<T, bool> ? "boolean" : "number"));
  }
}

// bos_token_id or eos_token_id (-1: none). Llama 3's folders give a list of end tokens; the first
// is the one a training example ends with.
int32_t token_id(const ConfigJson& c, const std::string& name) {
  if (c.j.contains(name) && c.j[name].is_array() && !c.j[name].empty())
    return key<int32_t>({.j = {{name, c.j[name][0]}}, .path = c.path}, name);
  return key<int32_t>(c, name, -1);
}

// What disc's llama computes; a config that asks for more is refused rather than trained wrongly.
void check_supported(const ConfigJson& c) {
  const json& j = c.j;
  const std::string& path = c.path;
  auto refuse = [&](const std::string& k, const std::string& why) {
    throw InvalidArgument(path + ": `" + k + "` is " + j[k].dump() + "; " + why);
  };
  if (j.contains("model_type") && j["model_type"] != "llama")
    refuse("model_type", "disc reads llama folders only");
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    refuse("hidden_act", "disc's llama MLP is SwiGLU (silu)");
  for (const char* bias : {"attention_bias", "mlp_bias"})
    if (j.contains(bias) && j[bias] != false) refuse(bias, "disc's llama has no biases");
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    refuse("rope_scaling",
           "disc implements plain RoPE (no scaling); remove it or use another model");
}

void read_config(HfLlama& hf) {
  const std::string path = hf.dir + "/config.json";
  if (!fs::exists(path))
    throw IoError(hf.dir + " has no config.json: model.hf must name a Hugging Face model folder");
  hf.config_text = read_regular_file(path, "the model's config");
  const ConfigJson f{.j = parse_json(path, hf.config_text), .path = path, .text = hf.config_text};
  check_supported(f);
  ir::models::LlamaConfig& c = hf.config;
  c.vocab = key<int64_t>(f, "vocab_size");
  c.hidden = key<int64_t>(f, "hidden_size");
  c.ffn = key<int64_t>(f, "intermediate_size");
  c.layers = key<int64_t>(f, "num_hidden_layers");
  c.heads = key<int64_t>(f, "num_attention_heads");
  c.kv_heads = key<int64_t>(f, "num_key_value_heads", c.heads);
  c.norm_eps = key<double>(f, "rms_norm_eps");
  c.rope_theta = key<double>(f, "rope_theta", 10000.0);
  c.tied_embeddings = key<bool>(f, "tie_word_embeddings", false);
  hf.max_positions = key<int64_t>(f, "max_position_embeddings", int64_t{0});
  hf.bos_id = token_id(f, "bos_token_id");
  hf.eos_id = token_id(f, "eos_token_id");
  for (auto [k, v] : {std::pair{"vocab_size", c.vocab},
                      {"hidden_size", c.hidden},
                      {"intermediate_size", c.ffn},
                      {"num_hidden_layers", c.layers},
                      {"num_attention_heads", c.heads},
                      {"num_key_value_heads", c.kv_heads}}) {
    if (v < 1) throw InvalidArgument(path + ": `" + k + "` is " + std::to_string(v) + ", not >= 1");
  }
  const int64_t hd = c.hidden % c.heads == 0 ? c.hidden / c.heads : 0;
  if (hd == 0 || hd % 2 != 0 || c.heads % c.kv_heads != 0 ||
      key<int64_t>(f, "head_dim", hd) != hd) {
    throw InvalidArgument(path + ": hidden_size " + std::to_string(c.hidden) + ", " +
                          std::to_string(c.heads) + " heads and " + std::to_string(c.kv_heads) +
                          " key/value heads do not make equal, even-sized heads shared evenly");
  }
}

// The weight files and which tensor each holds: model.safetensors, or the index's weight_map.
// With both, the single file, as transformers loads it (the index may be a leftover).
void open_weights(HfLlama& hf) {
  const std::string index = hf.dir + "/model.safetensors.index.json";
  std::map<std::string, std::string> wanted;  // tensor -> file, from the index
  std::set<std::string> names;
  if (fs::exists(hf.dir + "/model.safetensors")) {
    names.insert("model.safetensors");
  } else if (fs::exists(index)) {
    hf.sharded = true;
    const json j = parse_json(index, read_regular_file(index, "the weights' index"));
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      throw InvalidArgument(index + " lacks its `weight_map` (tensor name -> file)");
    for (const auto& [tensor, file] : j["weight_map"].items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
        throw InvalidArgument(index + ": `" + tensor + "` maps to " + file.dump() +
                              ", not a file name in the folder");
      wanted[tensor] = file.get<std::string>();
      names.insert(file.get<std::string>());
    }
  } else {
    throw IoError(hf.dir + " has neither model.safetensors nor model.safetensors.index.json");
  }
  for (const std::string& name : names) {
    hf.files.push_back(std::make_unique<MappedTensorFile>(hf.dir + "/" + name));
    for (const auto& [tensor, entry] : hf.files.back()->tensors()) {
      // Older conversions saved RoPE's frequencies as a buffer; they follow from rope_theta.
      if (tensor.ends_with("rotary_emb.inv_freq")) continue;
      auto it = wanted.find(tensor);
      if (hf.sharded && (it == wanted.end() || it->second != name))
        throw InvalidArgument(hf.files.back()->path() + " holds `" + tensor + "`, which " + index +
                              (it == wanted.end() ? " does not name" : " puts in " + it->second));
      if (!hf.tensors.emplace(tensor, HfLlama::Stored{hf.files.back().get(), &entry}).second)
        throw InvalidArgument(hf.dir + ": `" + tensor + "` is in two weight files");
    }
  }
  for (const auto& [tensor, file] : wanted) {
    if (!hf.tensors.contains(tensor) && !tensor.ends_with("rotary_emb.inv_freq"))
      throw InvalidArgument(index + " puts `" + tensor + "` in " + file +
                            ", which does not hold it (an incomplete or mixed-up download?)");
  }
}

// config.json's layer count against the tensors the folder holds, before anything is sized by it:
// `num_hidden_layers: 4294967298` for a folder of 21 tensors grew a table of names to 24 GB.
void check_layer_count(const HfLlama& hf) {
  const ir::models::LlamaConfig& c = hf.config;
  const int64_t per_layer = 9, outside = c.tied_embeddings ? 2 : 3;  // embed, norm (, lm_head)
  const int64_t held = static_cast<int64_t>(hf.tensors.size());
  if (c.layers <= (held - outside) / per_layer) return;  // at most what the folder holds
  throw InvalidArgument(hf.dir + "/config.json: `num_hidden_layers` is " +
                        std::to_string(c.layers) + ", but the weight files hold " +
                        std::to_string(held) + " tensors, enough for " +
                        std::to_string(std::max<int64_t>(0, (held - outside) / per_layer)) +
                        " layers (a llama layer has " + std::to_string(per_layer) +
                        "): fix num_hidden_layers, or complete the download");
}

// Exactly the tensors config.json's llama has, each of its shape and a float dtype.
void check_tensors(const HfLlama& hf) {
  check_layer_count(hf);
  const auto shapes = hf_shapes(hf.config);
  for (const auto& [name, stored] : hf.tensors) {
    auto it = shapes.find(name);
    if (it == shapes.end()) {
      throw InvalidArgument(
          stored.file->path() + ": `" + name + "` is no parameter of a llama with config.json's " +
          (name == "lm_head.weight" ? "tie_word_embeddings (true: the head is the embedding)"
                                    : "sizes (" + std::to_string(hf.config.layers) + " layers)"));
    }
    const auto& e = *stored.entry;
    if (e.shape != it->second) {
      throw InvalidArgument(stored.file->path() + ": `" + name + "` is " + shape_text(e.shape) +
                            ", but config.json's sizes need " + shape_text(it->second));
    }
    if (e.dtype != DType::kF32 && e.dtype != DType::kBF16 && e.dtype != DType::kF16)
      throw InvalidArgument(stored.file->path() + ": `" + name + "` is " +
                            std::string(dtype_name(e.dtype)) +
                            "; weights must be f32, bf16 or f16");
  }
  for (const auto& [name, shape] : shapes) {
    if (!hf.tensors.contains(name))
      throw InvalidArgument(hf.dir + " lacks `" + name + "` " + shape_text(shape) +
                            ", which a llama with config.json's sizes has");
  }
}

// Every weight finite: a NaN or infinity in a downloaded or exported weight would make the run
// "diverge at step 1" and blame the learning rate.
void check_finite(const HfLlama& hf) {
  for (const auto& [name, stored] : hf.tensors) {
    const NonFinite bad = non_finite(stored.entry->dtype, stored.entry->bytes);
    if (bad.count > 0)
      throw InvalidArgument(stored.file->path() + ": `" + name + "` holds " + bad.str() +
                            ": the file is damaged or was exported from a diverged run; " +
                            "download or export it again");
  }
}

// A row-major [rows, cols] matrix as [cols, rows].
std::vector<float> transpose(const std::vector<float>& m, size_t rows, size_t cols) {
  std::vector<float> t(m.size());
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) t[c * rows + r] = m[r * cols + c];
  return t;
}

// A stored tensor as f32, [rows, cols] transposed to [cols, rows] when asked.
std::vector<float> to_f32(const MappedTensorFile::Entry& e, bool transposed) {
  const size_t n = e.bytes.size() / static_cast<size_t>(dtype_size(e.dtype));
  std::vector<float> flat(n);
  if (e.dtype == DType::kF32) {
    std::memcpy(flat.data(), e.bytes.data(), e.bytes.size());
  } else {  // the mapped bytes need not be aligned for uint16_t
    std::vector<uint16_t> bits(n);
    std::memcpy(bits.data(), e.bytes.data(), e.bytes.size());
    half_to_f32(e.dtype, bits.data(), flat.data(), static_cast<int64_t>(n));
  }
  if (!transposed) return flat;
  return transpose(flat, static_cast<size_t>(e.shape[0]), static_cast<size_t>(e.shape[1]));
}

// `values` (f32, in disc's layout) as a host tensor of HF's layout and `dtype`.
Tensor to_stored(std::vector<float> values, std::vector<int64_t> shape, bool transposed,
                 DType dtype, memory::Allocator& host) {
  if (transposed) {
    values = transpose(values, static_cast<size_t>(shape[0]), static_cast<size_t>(shape[1]));
    std::swap(shape[0], shape[1]);
  }
  if (dtype == DType::kF32) return Tensor::from<float>(shape, values, host);
  std::vector<uint16_t> half(values.size());
  f32_to_half(dtype, values.data(), half.data(), static_cast<int64_t>(values.size()));
  Tensor t = Tensor::empty(dtype, shape, host);
  t.upload(half.data());
  return t;
}

// config.json for a folder disc made from scratch: what transformers writes for this llama.
std::string make_config(const ir::models::LlamaConfig& c, DType dtype) {
  json j = {{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"hidden_act", "silu"},
            {"attention_bias", false},
            {"mlp_bias", false},
            {"rope_scaling", nullptr},
            {"vocab_size", c.vocab},
            {"hidden_size", c.hidden},
            {"intermediate_size", c.ffn},
            {"num_hidden_layers", c.layers},
            {"num_attention_heads", c.heads},
            {"num_key_value_heads", c.kv_heads},
            {"rms_norm_eps", c.norm_eps},
            {"rope_theta", c.rope_theta},
            {"tie_word_embeddings", c.tied_embeddings},
            {"max_position_embeddings", c.max_seq},
            {"torch_dtype", torch_dtype(dtype)}};
  return j.dump(2) + "\n";
}

}  // namespace

HfLlama open_hf_llama(const std::string& dir) {
  HfLlama hf;
  hf.dir = dir;
  if (!fs::is_directory(dir))
    throw IoError("model.hf is " + dir +
                  ", which is not a folder: name a Hugging Face model folder");
  read_config(hf);
  open_weights(hf);
  check_tensors(hf);
  check_finite(hf);
  return hf;
}

Tensor read_hf_weight(const HfLlama& hf, const HfName& name, memory::Allocator& alloc) {
  const auto& e = *hf.tensors.at(name.hf).entry;
  std::vector<int64_t> shape = e.shape;
  if (name.transposed) std::swap(shape[0], shape[1]);
  return Tensor::from<float>(shape, to_f32(e, name.transposed), alloc);
}

void load_hf_weights(const HfLlama& hf, Trainer& trainer) {
  for (const HfName& n : hf_llama_names(hf.config)) {
    const DType held = trainer.parameter(n.disc).dtype();  // a LoRA base stays 16-bit
    trainer.set_parameter(n.disc, engine::as_dtype(read_hf_weight(hf, n, trainer.allocator()), held,
                                                   trainer.allocator()));
  }
}

namespace {

// The folder `dir` may become: absent, or an empty folder (InvalidArgument otherwise).
void check_new_folder(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  if (!fs::is_directory(dir, ec) || !fs::is_empty(dir, ec))
    throw InvalidArgument("cannot export to " + dir.string() +
                          ": it exists and is not an empty folder; name a new folder");
}

// Refuses, before anything is written, a weight that `dtype` cannot hold.
void check_exportable(const std::string& name, const std::vector<float>& values, DType dtype) {
  if (std::string why = unrepresentable(values, dtype); !why.empty())
    throw InvalidArgument("cannot export `" + name + "` as " + std::string(dtype_name(dtype)) +
                          ": " + why + "; export as f32 or bf16 (export.dtype), or an earlier " +
                          "checkpoint (--checkpoint); nothing was written");
}

// What else makes the source folder a whole model (the tokenizer, the generation config, the
// model card), so the written one is too. Never other weights (PyTorch .bin shards, adapters,
// GGUF): beside the new safetensors they would be the old model, which some loaders prefer.
void copy_other_files(const HfLlama& source, const fs::path& to) {
  for (const auto& e : fs::directory_iterator(source.dir)) {
    const std::string name = e.path().filename().string();
    const bool keep = name.starts_with("tokenizer") || name.starts_with("special_tokens_map") ||
                      name.starts_with("generation_config") || name.starts_with("chat_template") ||
                      name.starts_with("README") || name.starts_with("LICENSE") ||
                      name.ends_with(".model");
    if (e.is_regular_file() && keep) fs::copy_file(e.path(), to / name);
  }
}

}  // namespace

void write_hf_llama(const std::map<std::string, Tensor>& params, const ir::models::LlamaConfig& c,
                    const std::string& dir, const HfLlama* source, std::optional<DType> dtype,
                    bool replace) {
  fs::path final = fs::path(dir).lexically_normal();
  if (!final.has_filename()) final = final.parent_path();
  if (final.parent_path().empty()) final = fs::path(".") / final;
  if (!replace) check_new_folder(final);
  // Which file each tensor goes to, and as what.
  std::map<std::string, std::vector<HfName>> files;
  for (const HfName& n : hf_llama_names(c)) {
    if (!params.contains(n.disc))
      throw InvalidArgument("cannot export: the parameters lack `" + n.disc + "` (" + n.hf + ")");
    const DType t = dtype ? *dtype : source ? source->tensors.at(n.hf).entry->dtype : DType::kF32;
    check_exportable(n.hf, params.at(n.disc).to_vector<float>(), t);
    files[source ? fs::path(source->tensors.at(n.hf).file->path()).filename().string()
                 : "model.safetensors"]
        .push_back(n);
  }
  auto cpu = make_device("cpu", 1);
  memory::DeviceAllocator host(*cpu);
  write_folder(final, "export to " + final.string(), [&](const fs::path& dir) {
    json weight_map = json::object();
    int64_t total = 0;
    for (const auto& [file, names] : files) {
      std::map<std::string, Tensor> out;
      for (const HfName& n : names) {
        const Tensor& p = params.at(n.disc);
        DType t = dtype ? *dtype : source ? source->tensors.at(n.hf).entry->dtype : DType::kF32;
        out[n.hf] = to_stored(p.to_vector<float>(), p.shape(), n.transposed, t, host);
        total += out[n.hf].bytes();
        weight_map[n.hf] = file;
      }
      write_safetensors((dir / file).string(), out, {{"format", "pt"}});
    }
    std::string config = source ? source->config_text : make_config(c, dtype.value_or(DType::kF32));
    if (source && dtype) {
      json j = json::parse(config);
      j["torch_dtype"] = torch_dtype(*dtype);
      config = j.dump(2) + "\n";
    }
    write_text_durably((dir / "config.json").string(), config);
    if (source && source->sharded) {
      json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
      write_text_durably((dir / "model.safetensors.index.json").string(), index.dump(2) + "\n");
    }
    if (source) copy_other_files(*source, dir);
  });
}

}  // namespace disc::formats
