// Hugging Face Llama folders, read into disc's llama and written back: config.json plus weights
// in safetensors, one `model.safetensors` or shards that `model.safetensors.index.json` names.
// Weights are mapped, not copied into RAM, and converted tensor by tensor (bf16, f16 or f32 on
// disk; f32 in the trainer). HF stores a linear layer's weight as [out, in]; disc's as [in, out].
//
//   formats::HfLlama hf = formats::open_hf_llama("TinyLlama-1.1B");  // config and every header
//   ir::models::LlamaConfig c = hf.config;  // the sizes; the caller sets max_batch, max_seq
//   engine::Trainer trainer(ir::models::build_llama(c), options);
//   formats::load_hf_weights(hf, trainer);
//   ...
//   formats::write_hf_llama(engine::parameters_of(trainer), c, "tuned", &hf, std::nullopt);
//
// Every problem with a folder is one InvalidArgument or IoError that names the file and the
// tensor or key: a missing, extra or misshapen tensor, a config.json key disc cannot honour
// (rope_scaling, biases, another activation), an index that names a file or tensor that is not
// there, a truncated shard.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/safetensors.h"
#include "engine/tensor.h"
#include "ir/models/model.h"

namespace disc::engine {
class Trainer;
}

namespace disc::formats {

// A disc llama parameter and its Hugging Face tensor: lN.wq is model.layers.N.self_attn.q_proj
// .weight, stored transposed.
struct HfName {
  std::string disc, hf;
  bool transposed = false;
};
// In disc's parameter order; without lm_head when the embeddings are tied.
std::vector<HfName> hf_llama_names(const ir::models::LlamaConfig& c);

struct HfLlama {
  std::string dir;
  ir::models::LlamaConfig config;    // sizes from config.json; max_batch and max_seq left default
  int32_t bos_id = -1, eos_id = -1;  // config.json's bos_token_id, eos_token_id (-1: none)
  int64_t max_positions = 0;         // max_position_embeddings (0: not given)
  std::string config_text;           // config.json as read: an export copies it
  bool sharded = false;              // weights named by model.safetensors.index.json
  std::vector<std::unique_ptr<engine::MappedTensorFile>> files;
  // Each HF tensor by name: its file and entry, checked against the config.
  struct Stored {
    const engine::MappedTensorFile* file;
    const engine::MappedTensorFile::Entry* entry;
  };
  std::map<std::string, Stored> tensors;
};

// Reads config.json and the weights' headers, and checks that the folder holds exactly the
// tensors a llama of that config has, each of its shape and of a float dtype.
HfLlama open_hf_llama(const std::string& dir);

// One of the folder's weights in disc's name and layout, as f32.
engine::Tensor read_hf_weight(const HfLlama& hf, const HfName& name, memory::Allocator& alloc);

// The folder's weights into the trainer's parameters (converted to their dtype, transposed where
// HF stores [out, in]). The trainer must have been built from hf.config's sizes.
void load_hf_weights(const HfLlama& hf, engine::Trainer& trainer);

// Writes a Hugging Face folder at `dir` from disc parameters (by disc name): config.json, and
// the weights with HF names and layouts. With `source`, its config.json is copied, each tensor
// goes to the file it came from (and the index is written again) in its dtype on disk; without,
// config.json is made from `c` and the weights go to one model.safetensors as f32. `dtype`, when
// given (f32, bf16, f16), overrides the dtype of every tensor. The folder is written beside
// `dir` under a hidden name and renamed into place when complete; `dir` must not exist or be
// empty (InvalidArgument) unless `replace`, so a folder is never half replaced. A weight that
// `dtype` cannot hold (NaN, infinity, beyond f16's range) is refused before anything is written.
void write_hf_llama(const std::map<std::string, engine::Tensor>& params,
                    const ir::models::LlamaConfig& c, const std::string& dir, const HfLlama* source,
                    std::optional<DType> dtype, bool replace = false);

}  // namespace disc::formats
