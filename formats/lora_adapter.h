// LoRA adapters of disc's llama (ir/models/lora.h) as Hugging Face PEFT writes and reads them, and
// merged into the base weights:
//   DIR/adapter_config.json         peft_type LORA, r, lora_alpha, target_modules, lora_dropout,
//                                   bias none, task_type CAUSAL_LM, base_model_name_or_path
//   DIR/adapter_model.safetensors   base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight
//                                   [r, in] and ...lora_B.weight [out, r], per adapted projection
// disc's adapter parameters (l0.wq.lora_A, l0.wq.lora_B) have PEFT's layouts: nothing is
// transposed on the way in or out.
//
//   formats::write_peft_adapter(engine::parameters_of(trainer), llama, "adapter", "TinyLlama");
//   llama.lora = formats::read_peft_config("adapter");   // a later run, from the same folder
//   formats::load_peft_adapter("adapter", llama, trainer);
//
// Every problem with a folder is one InvalidArgument or IoError naming the file and the key or
// tensor: a config PEFT wrote for something disc does not run (DoRA, rsLoRA, per-module ranks,
// biases, a regex of targets), a tensor missing, extra or of another shape.
#pragma once

#include <map>
#include <string>

#include "engine/tensor.h"
#include "ir/models/model.h"

namespace disc::engine {
class Trainer;
}

namespace disc::formats {

// A disc adapter parameter and its PEFT tensor name.
struct PeftName {
  std::string disc, peft;
  std::vector<int64_t> shape;  // A [rank, in], B [out, rank]
};
// Every adapter `c` (its lora) adds, A before B, layer by layer.
std::vector<PeftName> peft_names(const ir::models::LlamaConfig& c);

// Writes the adapters among `params` (by disc name) to a new folder `dir` (it must not exist or be
// empty unless `replace`), whole or not at all. `base_model` goes in base_model_name_or_path.
void write_peft_adapter(const std::map<std::string, engine::Tensor>& params,
                        const ir::models::LlamaConfig& c, const std::string& dir,
                        const std::string& base_model, bool replace = false);

// adapter_config.json's rank, alpha, dropout and targets (base left as the caller sets it).
ir::models::LoraConfig read_peft_config(const std::string& dir);

// Checks the folder's adapter file against the llama `c` (whose lora must be read_peft_config's)
// from its header alone: every adapter there, none else, each of its shape.
void check_peft_adapter(const std::string& dir, const ir::models::LlamaConfig& c);

// The folder's adapters, as f32 by disc name, after check_peft_adapter.
std::map<std::string, engine::Tensor> read_peft_adapter(const std::string& dir,
                                                        const ir::models::LlamaConfig& c,
                                                        memory::Allocator& alloc);
void load_peft_adapter(const std::string& dir, const ir::models::LlamaConfig& c,
                       engine::Trainer& trainer);

// The base weights among `params` (by disc name, any float dtype), as f32, with each adapter
// merged in: W [in, out] + scale * A^T B^T. What a merged export writes.
std::map<std::string, engine::Tensor> merge_lora(
    const std::map<std::string, engine::Tensor>& params, const ir::models::LlamaConfig& c,
    memory::Allocator& alloc);

}  // namespace disc::formats
