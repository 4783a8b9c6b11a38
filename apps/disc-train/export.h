// `disc-train export`: a run's llama as a Hugging Face folder (config.json, safetensors with HF
// names), for transformers or any HF-format consumer. The weights come from a checkpoint: the one
// named, else the newest complete one in checkpoint.dir; without any, the weights a run would start
// from (model.hf's, or the seeded initialisation, which makes a random model in HF layout).
#pragma once

#include <map>
#include <string>

#include "config.h"
#include "engine/tensor.h"
#include "setup.h"

namespace disc::apps {

// Returns the exit code (0); bad input throws as make_setup does, before anything is written.
// `to` must be outside checkpoint.dir, and new (or an empty folder) unless `force`.
int export_model(const Config& c, const std::string& to, const std::string& checkpoint, bool force);

// Writes the llama's `params` (by disc name) to `to` as export.* says: a Hugging Face folder, with
// LoRA's adapters merged into the base (in its dtype) or, with export.lora adapter, PEFT's adapter
// folder. Returns what was written, for the log line.
std::string write_llama_export(const Config& c, const RunSetup& s,
                               const std::map<std::string, engine::Tensor>& params,
                               const std::string& to, bool replace);

}  // namespace disc::apps
