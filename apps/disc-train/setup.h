// Turns a validated config into what a run needs: the examples, the batcher and the model.
// Everything that can fail on bad input happens here, before a run writes anything.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/data/batcher.h"
#include "config.h"
#include "engine/trainer.h"
#include "formats/hf_llama.h"
#include "formats/onnx/import.h"
#include "ir/models/model.h"

namespace disc::apps {

struct RunSetup {
  std::vector<std::vector<int32_t>> examples;
  std::vector<int32_t> loss_start;  // data.train_on response: each example's prompt length
  // eval.path's examples and their loss starts (empty without eval.path).
  std::vector<std::vector<int32_t>> eval_examples;
  std::vector<int32_t> eval_loss_start;
  data::BatchSpec batching;
  int64_t vocab = 0;    // the data's token range
  int64_t max_len = 0;  // the longest sequence the data can give (bounds S)
  ir::models::Model model;
  std::optional<ir::models::LlamaConfig> llama;  // the llama's sizes (family llama)
  std::shared_ptr<const formats::HfLlama> hf;    // model.hf, opened: its weights load after build
  std::shared_ptr<const onnx::Imported> onnx;    // model.onnx, imported: its initializers load too
  std::string lora_from;  // model.lora.from, resolved: its adapters load after build too
  engine::TrainerOptions trainer;
  std::string tokenizer;   // json, jsonl, text: the tokenizer's describe()
  std::string data_notes;  // what loading let pass: "2 records lack some of data.fields, ..."
  std::string describe;    // one line: "llama 2x128, 4,535 json examples, vocab 258"
};

RunSetup make_setup(const Config& c);

// A batch's tensors as the model takes them: tokens and targets ([B, S], or packed [T] with
// positions and offsets), and, where the graph has dropout, its seed for this step.
engine::Batch to_tensors(const data::HostBatch& hb, engine::Trainer& t, const ir::Graph& g,
                         int64_t seed, int64_t step);

// The weights of model.hf or model.onnx, and model.lora.from's adapters, into the trainer (nothing
// otherwise), with a log line each.
void load_initial_weights(const RunSetup& s, engine::Trainer& trainer);

// export.dtype as a dtype to force (nullopt: `source`).
std::optional<DType> export_dtype(const Config& c);

// jit.cache_dir with `auto` resolved: $XDG_CACHE_HOME/disc/kernels, else ~/.cache/disc/kernels.
std::string kernel_cache_dir(const Config& c);

// An input path from the config: a relative path that does not exist from the working directory
// resolves against the config file's folder, so a config and its data can travel together.
// Outputs (metrics, traces, checkpoints) are always relative to the working directory.
std::string resolve_path(const Config& c, const std::string& path);

}  // namespace disc::apps
