// The PyTorch baseline of bench_step and bench_gpu: hands the benchmark's batches and initial
// weights to tools/bench/torch_llama_step.py (tools/torch_reference.py's llama in PyTorch eager,
// and with PyTorch >= 2.0 also SDPA and torch.compile) and reads back its timings, first-step
// losses and first-step seconds. Two Pythons can run it: Debian's, with PyTorch 1.13, and the
// PyTorch 2 that tools/setup.sh --bench installs from PyPI (torch2_python finds it).
//
//   write_torch_workload(dir, trainer, {.batches = &batches, .model = cfg, .lr = 3e-4, ...});
//   TorchResult r = run_torch({.threads = 2, .repeats = 2, .compile = {"f32", "bf16"}}, dir);
//   // r.first_loss: the loss of the first batch at the initial weights, to compare with disc's
//   // r.find("compile_bf16")->unpadded.tokens_per_s: torch.compile(dynamic=True) in bf16
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apps/data/batcher.h"
#include "engine/trainer.h"
#include "ir/models/model.h"
#include "ir/training_step.h"

namespace disc::bench {

struct TorchWorkload {
  const std::vector<data::HostBatch>* batches = nullptr;
  ir::models::LlamaConfig model;
  ir::OptimizerConfig optimizer;
  double lr = 0;
  int64_t pad_to = 0;  // the padded passes pad every batch to this length
};

// Writes DIR/batches.safetensors (tokens.<i>, targets.<i>; settings as metadata `config`) and
// DIR/weights/ (Trainer::save of `initial`, which must not have stepped yet: its weights are the
// ones both sides start from). Throws InvalidArgument for what the script cannot mirror (SGD,
// tied embeddings).
void write_torch_workload(const std::string& dir, engine::Trainer& initial, const TorchWorkload& w);

struct TorchRun {
  std::string python = "/usr/bin/python3";  // Debian's, with python3-torch
  int threads = 2;
  int repeats = 1;         // timed passes per variant in one run of the script
  bool checkpoint = true;  // also with activation checkpointing per layer
  bool padded = true;      // also every batch padded to its bucket (eager f32 and checkpointed)
  bool autocast = false;   // also under torch.autocast(dtype=torch.bfloat16), unpadded
  bool sdpa = false;       // autocast's attention as F.scaled_dot_product_attention
  // Also torch.compile(dynamic=True) in these of "f32" and "bf16" (autocast + SDPA).
  std::vector<std::string> compile;
  // Also compiled bf16 with torch._functorch.config.activation_memory_budget = this.
  std::optional<double> memory_budget;
  std::string device = "cpu";  // or "cuda" (cuda:N): PyTorch on an NVIDIA GPU
};

// What the Python's PyTorch has of what TorchRun's sdpa, compile and memory_budget need (the
// script fails when asked for what it lacks).
struct TorchFeatures {
  std::string version;
  bool sdpa = false, compile = false, memory_budget = false;
};
// Throws Error when the script cannot say (no such Python, no torch).
TorchFeatures torch_features(const std::string& python);

// The Python of the PyTorch 2 peer when none is named: tools/setup.sh --bench's virtual
// environment ($DISC_TORCH2_VENV, else ~/.cache/disc-bench/torch2) when it exists, else python3 on
// PATH when its torch is 2.x. "" when neither, with `why` saying what was looked at.
std::string torch2_python(std::string& why);

struct TorchTiming {
  double tokens_per_s = 0;  // real tokens over the fastest pass's seconds
  std::vector<double> passes_tokens_per_s;
  double step_ms_median = 0;          // over every timed step
  std::vector<double> step_ms;        // every timed step
  int64_t peak_rss_bytes = 0;         // the script's peak resident memory over these passes
  int64_t peak_device_bytes = 0;      // on a GPU: the most bytes PyTorch's allocator handed out
  int64_t reserved_device_bytes = 0;  // ... and the most it reserved from the device
};

// A way of stepping beside eager f32, unpadded, from the same initial weights.
struct TorchVariant {
  // The script's JSON key: "autocast", "compile_f32", "compile_bf16", "compile_bf16_budget"
  // ("eager" for TorchResult::eager()).
  std::string key;
  std::string error;  // why it did not run (torch.compile failed); "" when it ran
  double first_loss = 0;
  double first_step_s = 0;  // the first step's wall time, compiling included
  bool sdpa = false;        // its attention was F.scaled_dot_product_attention
  // torch.compile only: graphs compiled in the first step, and after it (dynamic shapes should
  // need none for a new sequence length).
  int64_t graphs_first_step = 0, recompiles = 0;
  TorchTiming unpadded;
};

struct TorchResult {
  std::string version;
  int threads = 0;
  int64_t real_tokens = 0;  // per pass, as the script counted them
  double first_loss = 0;
  double first_step_s = 0;  // eager f32's first step
  TorchTiming unpadded, padded;
  int64_t padded_to = 0;
  // With TorchRun::checkpoint: the same with activation checkpointing per layer, from the same
  // initial weights.
  bool checkpointed = false;
  double checkpointed_first_loss = 0;
  TorchTiming checkpointed_unpadded, checkpointed_padded;
  // The further variants that ran, in the script's order: "autocast" (TorchRun::autocast),
  // "compile_f32" and "compile_bf16" (TorchRun::compile), "compile_bf16_budget"
  // (TorchRun::memory_budget).
  std::vector<TorchVariant> variants;
  // nullptr when it was not asked for; one with an error when it failed.
  const TorchVariant* find(std::string_view key) const;
  // find(), and nullptr also when it failed: a variant with timings.
  const TorchVariant* ran(std::string_view key) const;
  // Eager f32, unpadded, as a variant (key "eager"), to sit in a list of rows beside the others.
  TorchVariant eager() const;
};

// Runs the script on DIR (its progress goes to stderr); throws Error when it fails, saying how to
// run it by hand or skip it.
TorchResult run_torch(const TorchRun& run, const std::string& dir);

// Adds another run's timed passes to `into`: the fastest pass counts, the median is over every
// step of both, the peak memory is the larger (and so are recompiles), the first step the faster.
// So PyTorch can run in rounds between disc's passes.
void merge(TorchResult& into, const TorchResult& more);

// The shell command run_torch runs, for messages and for running it by hand.
std::string torch_command(const TorchRun& run, const std::string& dir);

// As a benchmark's --json holds them: timings with their spread; a variant's first step (and
// graphs and recompiles when compiled), or its error; a result with its padded and checkpointed
// passes where they ran and each variant under its key.
nlohmann::json to_json(const TorchTiming& t);
nlohmann::json to_json(const TorchVariant& v);
nlohmann::json to_json(const TorchResult& r);

}  // namespace disc::bench
