#include "torch_eager.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "command.h"
#include "engine/safetensors.h"
#include "timing.h"

namespace disc::bench {
namespace {

// Debian's python3-torch finds a BLAS through this folder; without it, PyTorch falls back to the
// reference BLAS and would be an unfairly slow baseline.
constexpr const char* kOpenBlas = "/usr/lib/x86_64-linux-gnu/openblas-openmp";

// The script's unpadded variants beside eager f32 (checkpointed, with its padded passes, is apart).
constexpr const char* kVariantKeys[] = {"autocast", "compile_f32", "compile_bf16",
                                        "compile_bf16_budget"};

std::string script_path() {
  return std::string(DISC_SOURCE_DIR) + "/tools/bench/torch_llama_step.py";
}

nlohmann::json settings(const TorchWorkload& w) {
  const auto& m = w.model;
  const auto& o = w.optimizer;
  return {{"model",
           {{"vocab", m.vocab},
            {"hidden", m.hidden},
            {"layers", m.layers},
            {"heads", m.heads},
            {"kv_heads", m.kv_heads},
            {"ffn", m.ffn},
            {"norm_eps", m.norm_eps},
            {"rope_theta", m.rope_theta}}},
          {"optimizer",
           {{"lr", w.lr},
            {"beta1", o.beta1},
            {"beta2", o.beta2},
            {"eps", o.eps},
            {"weight_decay", o.weight_decay},
            {"clip_norm", o.clip_norm}}},
          {"max_len", w.pad_to}};
}

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

TorchTiming timing(const nlohmann::json& j) {
  return {.tokens_per_s = j.at("tokens_per_s").get<double>(),
          .passes_tokens_per_s = j.at("passes_tokens_per_s").get<std::vector<double>>(),
          .step_ms_median = j.at("step_ms_median").get<double>(),
          .step_ms = j.value("step_ms", std::vector<double>{}),
          .peak_rss_bytes = j.value("peak_rss_bytes", int64_t{0}),
          .peak_device_bytes = j.value("peak_device_bytes", int64_t{0}),
          .reserved_device_bytes = j.value("reserved_device_bytes", int64_t{0})};
}

TorchResult parse(const std::string& out) {
  const nlohmann::json j = nlohmann::json::parse(out);
  TorchResult r{.version = j.at("torch").get<std::string>(),
                .threads = j.at("threads").get<int>(),
                .real_tokens = j.at("real_tokens").get<int64_t>(),
                .first_loss = j.at("first_loss").get<double>(),
                .first_step_s = j.value("first_step_s", 0.0),
                .unpadded = timing(j.at("unpadded"))};
  if (j.contains("padded")) {
    r.padded = timing(j.at("padded"));
    r.padded_to = j.at("padded_to").get<int64_t>();
  }
  if (j.contains("checkpointed")) {
    const nlohmann::json& c = j.at("checkpointed");
    r.checkpointed = true;
    r.checkpointed_first_loss = c.at("first_loss").get<double>();
    r.checkpointed_unpadded = timing(c.at("unpadded"));
    if (c.contains("padded")) r.checkpointed_padded = timing(c.at("padded"));
  }
  for (const char* key : kVariantKeys) {
    if (!j.contains(key)) continue;
    const nlohmann::json& v = j.at(key);
    if (v.contains("error")) {
      r.variants.push_back({.key = key, .error = v.at("error").get<std::string>()});
      continue;
    }
    r.variants.push_back({.key = key,
                          .first_loss = v.at("first_loss").get<double>(),
                          .first_step_s = v.value("first_step_s", 0.0),
                          .sdpa = v.value("sdpa", false),
                          .graphs_first_step = v.value("graphs_first_step", int64_t{0}),
                          .recompiles = v.value("recompiles", int64_t{0}),
                          .unpadded = timing(v.at("unpadded"))});
  }
  return r;
}

}  // namespace

void write_torch_workload(const std::string& dir, engine::Trainer& initial,
                          const TorchWorkload& w) {
  if (w.optimizer.kind != ir::OptimizerConfig::Kind::kAdamW)
    throw InvalidArgument("the PyTorch baseline mirrors AdamW only; use AdamW or pass --no-torch");
  if (w.model.tied_embeddings)
    throw InvalidArgument(
        "torch_reference.py's llama has an untied lm_head; untie or pass --no-torch");
  if (initial.steps_done() != 0)
    throw InvalidArgument("write_torch_workload needs the trainer before its first step");
  std::filesystem::create_directories(dir);
  std::map<std::string, engine::Tensor> tensors;
  const auto& bs = *w.batches;
  for (size_t i = 0; i < bs.size(); ++i) {
    const std::vector<int64_t> shape = {bs[i].batch, bs[i].seq};
    tensors["tokens." + std::to_string(i)] =
        engine::Tensor::from<int32_t>(shape, bs[i].tokens, initial.allocator());
    tensors["targets." + std::to_string(i)] =
        engine::Tensor::from<int32_t>(shape, bs[i].targets, initial.allocator());
  }
  engine::write_safetensors(
      dir + "/batches.safetensors", tensors,
      {{"config", settings(w).dump()}, {"batches", std::to_string(bs.size())}});
  initial.save(dir + "/weights");
}

std::string torch_command(const TorchRun& run, const std::string& dir) {
  std::string flags;
  if (run.checkpoint) flags += " --checkpoint";
  if (!run.padded) flags += " --pad-to -1";
  if (run.autocast) flags += " --autocast";
  if (run.sdpa) flags += " --sdpa";
  for (size_t i = 0; i < run.compile.size(); ++i)
    flags += (i ? "," : " --compile ") + run.compile[i];
  if (run.memory_budget) flags += " --memory-budget " + std::to_string(*run.memory_budget);
  if (run.device != "cpu") flags += " --device " + quoted(run.device);
  return "LD_LIBRARY_PATH=" + std::string(kOpenBlas) + " " + quoted(run.python) + " " +
         quoted(script_path()) + " --dir " + quoted(dir) + " --threads " +
         std::to_string(run.threads) + " --repeats " + std::to_string(run.repeats) + flags;
}

TorchFeatures torch_features(const std::string& python) {
  const std::string cmd = "LD_LIBRARY_PATH=" + std::string(kOpenBlas) + " " + quoted(python) + " " +
                          quoted(script_path()) + " --features";
  int status = 0;
  const std::string out = read_command(cmd, status);
  const std::string how = "; run it by hand (" + cmd + ") or pass --no-torch";
  if (status != 0)
    throw Error("the PyTorch baseline's feature check failed (exit " +
                std::to_string(exit_code(status)) + ")" + how);
  try {
    const nlohmann::json j = nlohmann::json::parse(out);
    return {.version = j.at("torch").get<std::string>(),
            .sdpa = j.at("sdpa").get<bool>(),
            .compile = j.at("compile").get<bool>(),
            .memory_budget = j.at("memory_budget").get<bool>()};
  } catch (const nlohmann::json::exception& e) {
    throw Error("the PyTorch baseline's feature check printed no valid result (" +
                std::string(e.what()) + ")" + how);
  }
}

std::string torch2_python(std::string& why) {
  const char* venv = std::getenv("DISC_TORCH2_VENV");
  const char* home = std::getenv("HOME");
  const std::string python =
      (venv && *venv ? std::string(venv)
                     : std::string(home ? home : "") + "/.cache/disc-bench/torch2") +
      "/bin/python";
  if (std::filesystem::exists(python)) return python;
  why = "no " + python + " (tools/setup.sh --bench makes it), and python3 on PATH has ";
  try {
    const TorchFeatures f = torch_features("python3");
    if (std::atoi(f.version.c_str()) >= 2) return "python3";
    why += "PyTorch " + f.version;
  } catch (const Error&) {
    why += "no torch";
  }
  return "";
}

TorchResult run_torch(const TorchRun& run, const std::string& dir) {
  const std::string cmd = torch_command(run, dir);
  int status = 0;
  const std::string out = read_command(cmd, status);
  const std::string how = "; to see why, run it by hand (" + cmd +
                          "; the folder is kept only with --workdir), or pass --no-torch";
  if (status != 0 || out.empty())
    throw Error("the PyTorch baseline failed (exit " + std::to_string(exit_code(status)) + ")" +
                how);
  try {
    return parse(out);
  } catch (const nlohmann::json::exception& e) {
    throw Error("the PyTorch baseline printed no valid result (" + std::string(e.what()) + ")" +
                how);
  }
}

const TorchVariant* TorchResult::find(std::string_view key) const {
  for (const TorchVariant& v : variants)
    if (v.key == key) return &v;
  return nullptr;
}

const TorchVariant* TorchResult::ran(std::string_view key) const {
  const TorchVariant* v = find(key);
  return v && v->error.empty() ? v : nullptr;
}

TorchVariant TorchResult::eager() const {
  return {
      .key = "eager", .first_loss = first_loss, .first_step_s = first_step_s, .unpadded = unpadded};
}

namespace {

void merge(TorchTiming& into, const TorchTiming& more) {
  into.tokens_per_s = std::max(into.tokens_per_s, more.tokens_per_s);
  into.passes_tokens_per_s.insert(into.passes_tokens_per_s.end(), more.passes_tokens_per_s.begin(),
                                  more.passes_tokens_per_s.end());
  into.step_ms.insert(into.step_ms.end(), more.step_ms.begin(), more.step_ms.end());
  into.step_ms_median = percentile(into.step_ms, 0.5);
  into.peak_rss_bytes = std::max(into.peak_rss_bytes, more.peak_rss_bytes);
  into.peak_device_bytes = std::max(into.peak_device_bytes, more.peak_device_bytes);
  into.reserved_device_bytes = std::max(into.reserved_device_bytes, more.reserved_device_bytes);
}

// A first step that did not run counts as 0 seconds; the faster one that ran counts.
double faster(double a, double b) {
  return a > 0 && b > 0 ? std::min(a, b) : std::max(a, b);
}

}  // namespace

void merge(TorchResult& into, const TorchResult& more) {
  merge(into.unpadded, more.unpadded);
  merge(into.padded, more.padded);
  merge(into.checkpointed_unpadded, more.checkpointed_unpadded);
  merge(into.checkpointed_padded, more.checkpointed_padded);
  into.first_step_s = faster(into.first_step_s, more.first_step_s);
  for (const TorchVariant& m : more.variants) {
    auto it = std::find_if(into.variants.begin(), into.variants.end(),
                           [&](const TorchVariant& v) { return v.key == m.key; });
    if (it == into.variants.end()) {
      into.variants.push_back(m);
      continue;
    }
    // A variant that failed in any round stays failed, with the first error: the rounds where it
    // ran would be only part of the timings.
    if (!it->error.empty()) continue;
    if (!m.error.empty()) {
      *it = m;
      continue;
    }
    merge(it->unpadded, m.unpadded);
    it->first_step_s = faster(it->first_step_s, m.first_step_s);
    it->recompiles = std::max(it->recompiles, m.recompiles);
  }
}

nlohmann::json to_json(const TorchTiming& t) {
  return {{"tokens_per_s", t.tokens_per_s},
          {"passes_tokens_per_s", t.passes_tokens_per_s},
          {"step_ms_median", t.step_ms_median},
          {"step_ms_p10", percentile(t.step_ms, 0.1)},
          {"step_ms_p90", percentile(t.step_ms, 0.9)},
          {"peak_rss_bytes", t.peak_rss_bytes}};
}

nlohmann::json to_json(const TorchVariant& v) {
  if (!v.error.empty()) return {{"error", v.error}};
  nlohmann::json j = {{"first_loss", v.first_loss},
                      {"first_step_s", v.first_step_s},
                      {"sdpa", v.sdpa},
                      {"unpadded", to_json(v.unpadded)}};
  if (v.key.starts_with("compile"))
    j.update({{"graphs_first_step", v.graphs_first_step}, {"recompiles", v.recompiles}});
  return j;
}

nlohmann::json to_json(const TorchResult& r) {
  nlohmann::json j = {{"version", r.version},
                      {"threads", r.threads},
                      {"first_loss", r.first_loss},
                      {"first_step_s", r.first_step_s},
                      {"unpadded", to_json(r.unpadded)}};
  if (r.padded_to > 0) j.update({{"padded_to", r.padded_to}, {"padded", to_json(r.padded)}});
  if (r.checkpointed) {
    j["checkpointed"] = {{"first_loss", r.checkpointed_first_loss},
                         {"unpadded", to_json(r.checkpointed_unpadded)}};
    if (r.padded_to > 0) j["checkpointed"]["padded"] = to_json(r.checkpointed_padded);
  }
  for (const TorchVariant& v : r.variants) j[v.key] = to_json(v);
  return j;
}

}  // namespace disc::bench
