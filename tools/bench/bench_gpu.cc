// bench_gpu: the memory issue's Llama workload on a GPU (4 layers, hidden 512, 8 heads, SwiGLU
// 1376, vocab 32000, AdamW; batch sizes 8 to 24; CodeAlpaca's lengths, truncated at 1024), disc
// against PyTorch on the same model, batches and initial weights, in one run. For each batch size:
//   * PyTorch (tools/bench/torch_llama_step.py): eager f32; eager bf16 autocast with SDPA (where
//     the PyTorch has it, 2.0+); torch.compile(dynamic=True) f32 and bf16 (autocast + SDPA); the
//     compiled bf16 again with torch._functorch.config.activation_memory_budget (--no-compile
//     skips the compiled rows)
//   * disc for each --precision (f32, bf16; also tf32, f16): without a cap, packed (the same
//     examples in one stream, attention per example: docs/packing.md), and with a cap that
//   holds the
//     parameters and optimizer state and --cap-share of the rest of its uncapped peak (schedule,
//     remat and offload)
// Prints peak device bytes, real tokens/s, the ratio to torch.compile bf16 (to eager f32 without
// it), model FLOP utilisation (model_flops below, over 989 TFLOP/s), the first step's seconds
// (compiling included), what disc staged on the host (ops without a GPU kernel yet) and, for disc,
// its evictions and reloads; --json writes all of it.
//
// usage: bench_gpu [--device cuda:0] [--batches 8,16,24] [--steps N] [--repeats N] [--max-len N]
//                  [--precision f32,bf16] [--cap-share 0.5] [--no-offload] [--data FILE]
//                  [--no-torch] [--torch-compile f32,bf16,budget | --no-compile]
//                  [--torch-memory-budget 0.5] [--torch-device cuda]
//                  [--python PATH] [--json FILE]
// --device sim-gpu runs disc's GPU path on the CPU (a check of the benchmark, not a measurement).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "base/dtype.h"
#include "base/error.h"
#include "batches.h"
#include "engine/trainer.h"
#include "json_file.h"
#include "memory/governor.h"
#include "memory/memory_plan.h"
#include "timing.h"
#include "torch_eager.h"

namespace disc::bench {
namespace {

constexpr double kLr = 3e-4;
// The dense bf16 peak of an H100 / H200 SXM, the MFU's denominator for every row (f32 ones too).
constexpr double kPeakFlops = 989e12;

struct Options {
  std::string device = "cuda:0";
  std::vector<int64_t> batches = {8, 16, 24};
  int steps = 4;
  int repeats = 2;
  int64_t max_len = 1024;
  std::vector<std::string> precisions = {"f32", "bf16"};
  double cap_share = 0.5;
  bool offload = true;
  std::string data = "../shared/data/codealpaca/codealpaca.json";
  bool torch = true;
  std::vector<std::string> compiled = {"f32", "bf16", "budget"};  // the torch.compile rows
  double torch_memory_budget = 0.5;
  std::string torch_device = "cuda";
  std::string python = "/usr/bin/python3";
  std::string json;
  uint64_t seed = 1;
  ir::models::LlamaConfig model{
      .vocab = 32000, .hidden = 512, .layers = 4, .heads = 8, .kv_heads = 8, .ffn = 1376};
};

struct Result {
  std::string system;   // the row's name
  std::string refused;  // why it did not run; "" when it did
  double tokens_per_s = 0;
  int64_t live_peak = 0, reserved_peak = 0, evictions = 0, reloads = 0, recomputes = 0, staged = 0,
          staged_bytes = 0;
  int64_t held = 0;  // parameters, optimizer state and the largest batch's inputs
  double first_loss = 0;
  // The first step's wall time, compiling included: disc's Trainer construction (its compile
  // pipeline) and first step (its JIT kernels); PyTorch's first step (torch.compile's tracing and
  // Inductor's kernels for the compiled rows).
  double first_step_s = 0;
  int64_t recompiles = -1;  // torch.compile rows: graphs compiled after the first step
  bool disc = false;        // a disc row: evictions, reloads and staging are counted
};

// Model FLOPs of one pass over the batches, matmuls only. Forward + backward = 3x the forward,
// whose FLOPs per real token (a target the loss counts) in a row of S tokens are
//   2 * layers * hidden * (2 * hidden + 2 * kv_dim + 3 * ffn)  the q, o, k, v projections; SwiGLU
//   + 2 * hidden * vocab                                       the head
//   + layers * 2 * 2 * S * hidden / 2                          attention's q k^T and p v, causal
// with kv_dim = kv_heads * hidden / heads and S = the row's real targets + 1 (its length).
constexpr const char* kFlopsFormula =
    "model FLOPs/token = 3 * [2*L*h*(2h + 2kv + 3ffn) + 2*h*vocab + L*2*2*S*h/2], S the row's "
    "length";

double model_flops(const ir::models::LlamaConfig& m, const std::vector<data::HostBatch>& batches) {
  const double h = static_cast<double>(m.hidden), layers = static_cast<double>(m.layers);
  const double kv = static_cast<double>(m.kv_heads * (m.hidden / m.heads));
  const double per_token = 2 * layers * h * (2 * h + 2 * kv + 3 * static_cast<double>(m.ffn)) +
                           2 * h * static_cast<double>(m.vocab);
  const int32_t ignore = data::BatchSpec{}.ignore_index;
  double forward = 0;
  for (const data::HostBatch& b : batches) {
    for (int64_t row = 0; row < b.batch; ++row) {
      const auto first = b.targets.begin() + row * b.seq;
      const double t = static_cast<double>(
          std::count_if(first, first + b.seq, [&](int32_t target) { return target != ignore; }));
      forward += t * (per_token + layers * 2 * 2 * (t + 1) * h / 2);
    }
  }
  return 3 * forward;
}

// A disc row's precision: f32, bf16 or f16, or tf32 (f32 with TrainerOptions::tf32).
struct Precision {
  std::string name = "f32";
  DType dtype = DType::kF32;
  bool tf32 = false;
};

engine::TrainerOptions trainer_options(const Options& o, const memory::GovernorOptions& memory,
                                       const Precision& p = {}) {
  return {
      .device = o.device, .seed = o.seed, .precision = p.dtype, .tf32 = p.tf32, .memory = memory};
}

// A warm-up pass, then o.repeats timed passes over the batches; the fastest counts.
Result run_disc(const Options& o, const std::vector<data::HostBatch>& batches,
                const Precision& precision, const memory::GovernorOptions& memory,
                const std::string& label) {
  Result r{.system = label, .disc = true};
  try {
    const double construct = now_seconds();
    engine::Trainer t(ir::models::build_llama(bounded(o.model, batches)),
                      trainer_options(o, memory, precision));
    r.held = t.bytes_held_for(t.largest_shape());
    int64_t tokens = 0;
    for (const data::HostBatch& b : batches) tokens += b.real_tokens;
    double best = 0;
    for (int pass = 0; pass <= o.repeats; ++pass) {
      const double start = now_seconds();
      for (size_t i = 0; i < batches.size(); ++i) {
        const engine::StepResult s = t.step(to_device(batches[i], t.allocator()), kLr);
        if (pass == 0 && i == 0) {
          r.first_loss = s.loss;
          r.first_step_s = now_seconds() - construct;
        }
        r.live_peak = std::max(r.live_peak, s.stats.live_peak_bytes);
        r.reserved_peak = std::max(r.reserved_peak, s.stats.reserved_peak_bytes);
        if (pass == o.repeats) {
          r.evictions += s.stats.evictions, r.reloads += s.stats.reloads,
              r.recomputes += s.stats.recomputes;
          r.staged += s.stats.host_staged_nodes, r.staged_bytes += s.stats.staged_bytes;
        }
        std::fprintf(stderr, "  [%s %s] %zu/%zu B=%lld S=%lld loss %.4f\n", label.c_str(),
                     pass ? ("timed " + std::to_string(pass)).c_str() : "warm-up", i + 1,
                     batches.size(), static_cast<long long>(batches[i].batch),
                     static_cast<long long>(batches[i].seq), s.loss);
      }
      const double seconds = now_seconds() - start;
      if (pass > 0) best = std::max(best, static_cast<double>(tokens) / seconds);
    }
    r.tokens_per_s = best;
  } catch (const Error& e) {
    r.refused = e.what();
  }
  return r;
}

// The PyTorch rows: the script's variant ("" for eager f32), the row's name, and why it is missing
// when this PyTorch lacks what it needs ("" when it has it or the row is not asked for).
struct TorchRow {
  const char* variant;
  std::string system, lacks;
};

bool asked(const Options& o, const std::string& row) {
  return std::find(o.compiled.begin(), o.compiled.end(), row) != o.compiled.end();
}

std::vector<TorchRow> torch_rows(const Options& o, const TorchFeatures& f) {
  const std::string old = "PyTorch " + f.version + " lacks ";
  std::vector<TorchRow> rows = {
      {"", "torch eager f32", ""},
      {"autocast", f.sdpa ? "torch eager bf16 sdpa" : "torch eager bf16", ""}};
  const std::string no_compile = f.compile ? "" : old + "torch.compile (2.0+)";
  if (asked(o, "f32")) rows.push_back({"compile_f32", "torch compile f32", no_compile});
  if (asked(o, "bf16")) rows.push_back({"compile_bf16", "torch compile bf16", no_compile});
  char budget[48];
  std::snprintf(budget, sizeof budget, "torch compile bf16 b=%g", o.torch_memory_budget);
  if (asked(o, "budget"))
    rows.push_back({"compile_bf16_budget", budget,
                    f.memory_budget ? "" : old + "activation_memory_budget (2.4+)"});
  return rows;
}

// One run of the script for every PyTorch row; a row whose run failed carries the failure.
std::vector<Result> run_pytorch(const Options& o, const std::vector<data::HostBatch>& batches,
                                const TorchFeatures& f) {
  const std::vector<TorchRow> rows = torch_rows(o, f);
  std::vector<Result> out;
  for (const TorchRow& row : rows) out.push_back({.system = row.system, .refused = row.lacks});
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("disc-bench-gpu-" + std::to_string(::getpid())))
          .string();
  try {
    engine::Trainer initial(ir::models::build_llama(bounded(o.model, batches)),
                            trainer_options(o, {}));
    write_torch_workload(dir, initial,
                         {.batches = &batches, .model = bounded(o.model, batches), .lr = kLr});
    std::vector<std::string> compile;
    for (const char* t : {"f32", "bf16"})
      if (f.compile && asked(o, t)) compile.push_back(t);
    const TorchResult t =
        run_torch({.python = o.python,
                   .repeats = o.repeats,
                   .checkpoint = false,
                   .autocast = true,
                   .sdpa = f.sdpa,
                   .compile = compile,
                   .memory_budget = f.compile && f.memory_budget && asked(o, "budget")
                                        ? std::optional(o.torch_memory_budget)
                                        : std::nullopt,
                   .device = o.torch_device},
                  dir);
    const TorchVariant eager = t.eager();
    for (size_t i = 0; i < rows.size(); ++i) {
      Result& r = out[i];
      if (!r.refused.empty()) continue;
      const std::string_view variant = rows[i].variant;
      const TorchVariant* v = variant.empty() ? &eager : t.find(variant);
      if (!v || !v->error.empty()) {  // a torch.compile that failed says why
        r.refused = v ? v->error : "the script returned no " + std::string(variant);
        continue;
      }
      r.tokens_per_s = v->unpadded.tokens_per_s;
      r.live_peak = v->unpadded.peak_device_bytes;
      r.reserved_peak = v->unpadded.reserved_device_bytes;
      r.first_loss = v->first_loss;
      r.first_step_s = v->first_step_s;
      if (variant.starts_with("compile")) r.recompiles = v->recompiles;
    }
  } catch (const Error& e) {
    for (Result& r : out)
      if (r.refused.empty()) r.refused = e.what();
  }
  std::filesystem::remove_all(dir);
  return out;
}

void print_header(const std::string& base) {
  std::printf("  %-24s %10s %10s %10s %9s %7s %6s %8s %7s %7s %7s %8s  %s\n", "system", "cap",
              "live peak", "reserved", "tokens/s", "ratio", "MFU", "first s", "evicts", "reloads",
              "staged", "staged B", "first loss");
  std::printf(
      "  ratio: tokens/s over %s's; MFU: tokens/s * model FLOPs/token / %.0f TFLOP/s (dense bf16 "
      "peak),\n  %s;\n  first s: the first step's seconds, compiling included (disc: with its "
      "Trainer's construction); b=: torch._functorch.config.activation_memory_budget\n",
      base.c_str(), kPeakFlops / 1e12, kFlopsFormula);
}

void print_row(int64_t cap, const Result& r, const Result* base, double flops_per_token) {
  if (!r.refused.empty()) {
    std::printf("  %-24s %10s  %s\n", r.system.c_str(), cap ? human_bytes(cap).c_str() : "none",
                r.refused.c_str());
    return;
  }
  char ratio[16] = "-";
  if (base && base->tokens_per_s > 0)
    std::snprintf(ratio, sizeof ratio, "%.2fx", r.tokens_per_s / base->tokens_per_s);
  std::printf("  %-24s %10s %10s %10s %9.0f %7s %5.1f%% %8.2f", r.system.c_str(),
              cap ? human_bytes(cap).c_str() : "none", human_bytes(r.live_peak).c_str(),
              human_bytes(r.reserved_peak).c_str(), r.tokens_per_s, ratio,
              100 * r.tokens_per_s * flops_per_token / kPeakFlops, r.first_step_s);
  if (r.disc)
    std::printf(" %7lld %7lld %7lld %8s", static_cast<long long>(r.evictions),
                static_cast<long long>(r.reloads), static_cast<long long>(r.staged),
                human_bytes(r.staged_bytes).c_str());
  else
    std::printf(" %7s %7s %7s %8s", "-", "-", "-", "-");
  std::printf("  %.4f", r.first_loss);
  if (r.recompiles >= 0) std::printf("  recompiles %lld", static_cast<long long>(r.recompiles));
  std::printf("\n");
}

nlohmann::json to_json(int64_t cap, const Result& r, double flops_per_token) {
  nlohmann::json j = {{"system", r.system},
                      {"refused", r.refused},
                      {"cap", cap},
                      {"tokens_per_s", r.tokens_per_s},
                      {"mfu", r.tokens_per_s * flops_per_token / kPeakFlops},
                      {"first_step_s", r.first_step_s},
                      {"live_peak_bytes", r.live_peak},
                      {"reserved_peak_bytes", r.reserved_peak},
                      {"evictions", r.evictions},
                      {"reloads", r.reloads},
                      {"recomputes", r.recomputes},
                      {"host_staged_nodes", r.staged},
                      {"staged_bytes", r.staged_bytes},
                      {"first_loss", r.first_loss}};
  if (r.recompiles >= 0) j["recompiles"] = r.recompiles;
  return j;
}

std::vector<Precision> parse_precisions(const std::vector<std::string>& names) {
  std::vector<Precision> out;
  for (const std::string& n : names) {
    const std::optional<DType> t = n == "tf32" ? DType::kF32 : parse_dtype(n);
    if (!t || !is_float(*t) || *t == DType::kF64)
      throw InvalidArgument("--precision " + n +
                            " is no training precision: use f32, tf32, bf16 or f16");
    out.push_back({.name = n, .dtype = *t, .tf32 = n == "tf32"});
  }
  return out;
}

// What the Python's PyTorch has; a failed check is every PyTorch row's reason.
TorchFeatures probe_torch(const Options& o, std::string& failed) {
  if (!o.torch) {
    failed = "--no-torch";
    return {};
  }
  try {
    return torch_features(o.python);
  } catch (const Error& e) {
    failed = e.what();
    return {};
  }
}

int run(const Options& o) {
  const std::vector<Precision> precisions = parse_precisions(o.precisions);
  std::string source;
  const auto examples = codealpaca_examples(o.data, o.max_len, o.seed, source);
  std::string torch_failed;
  const TorchFeatures features = probe_torch(o, torch_failed);
  {  // say what the device is before anything long runs
    engine::Trainer probe(
        ir::models::build_mlp({.in = 2, .classes = 2, .hidden = {2}, .max_batch = 1}),
        trainer_options(o, {}));
    std::printf("bench_gpu: %s, llama %lldx%lld, vocab %lld, data %s, %d steps x %d timed passes\n",
                probe.device().name().c_str(), static_cast<long long>(o.model.layers),
                static_cast<long long>(o.model.hidden), static_cast<long long>(o.model.vocab),
                source.c_str(), o.steps, o.repeats);
    std::printf("host: %s\n", machine_load().c_str());
  }
  if (torch_failed.empty())
    std::printf("PyTorch %s on %s (SDPA %s, torch.compile %s)\n", features.version.c_str(),
                o.torch_device.c_str(), features.sdpa ? "yes" : "no",
                features.compile ? "yes" : "no");
  // The base of the ratios: torch.compile bf16 where it runs, else eager f32.
  const bool compiled_base = torch_failed.empty() && asked(o, "bf16") && features.compile;
  const std::string base_name = compiled_base ? "torch compile bf16" : "torch eager f32";
  print_header(base_name);
  nlohmann::json out = {{"device", o.device},
                        {"data", source},
                        {"ratio_base", base_name},
                        {"peak_flops", kPeakFlops},
                        {"flops_formula", kFlopsFormula},
                        {"batches", nlohmann::json::array()}};
  if (torch_failed.empty())
    out["torch"] = {{"version", features.version},
                    {"device", o.torch_device},
                    {"sdpa", features.sdpa},
                    {"compile", features.compile},
                    {"memory_budget", o.torch_memory_budget}};
  for (int64_t b : o.batches) {
    data::Batcher batcher(examples, {.batch_size = b, .seed = o.seed});
    std::mt19937_64 rng(o.seed * 1000003 + static_cast<uint64_t>(b));
    std::vector<data::HostBatch> batches;
    for (int i = 0; i < o.steps; ++i)
      batches.push_back(randomize(batcher.next(), o.model.vocab, rng));
    int64_t tokens = 0;
    for (const data::HostBatch& hb : batches) tokens += hb.real_tokens;
    const double flops_per_token = model_flops(o.model, batches) / static_cast<double>(tokens);
    std::printf("B=%lld (longest %lld), %.3g model FLOPs/token\n", static_cast<long long>(b),
                static_cast<long long>(longest(batches)), flops_per_token);
    std::vector<std::pair<int64_t, Result>> rows;  // (cap, result), in print order
    for (Result& r : torch_failed.empty()
                         ? run_pytorch(o, batches, features)
                         : std::vector<Result>{{.system = "torch", .refused = torch_failed}})
      rows.emplace_back(0, std::move(r));
    std::vector<data::HostBatch> packed;  // the same examples, no padding (data.packing)
    for (const data::HostBatch& hb : batches) packed.push_back(data::pack(hb));
    for (const Precision& precision : precisions) {
      const std::string name = "disc " + precision.name;
      const Result free = run_disc(o, batches, precision, {}, name);
      rows.emplace_back(0, free);
      rows.emplace_back(0, run_disc(o, packed, precision, {}, name + " packed"));
      if (o.cap_share <= 0) continue;  // no capped row
      // The cap leaves the parameters and state their bytes and takes a share of the rest.
      const int64_t cap =
          free.held +
          static_cast<int64_t>(o.cap_share * static_cast<double>(free.live_peak - free.held));
      Result capped = free.refused.empty()
                          ? run_disc(o, batches, precision, {.cap = cap, .offload = o.offload},
                                     name + " capped")
                          : Result{.system = name + " capped",
                                   .refused = "no uncapped peak to take a share of",
                                   .disc = true};
      rows.emplace_back(cap, std::move(capped));
    }
    const Result* base = nullptr;
    for (const auto& [cap, r] : rows)
      if (r.system == base_name && r.refused.empty()) base = &r;
    nlohmann::json rows_json = nlohmann::json::array();
    for (const auto& [cap, r] : rows) {
      print_row(cap, r, base, flops_per_token);
      rows_json.push_back(to_json(cap, r, flops_per_token));
      if (base && base->tokens_per_s > 0)
        rows_json.back()["ratio"] = r.tokens_per_s / base->tokens_per_s;
    }
    out["batches"].push_back({{"batch", b},
                              {"real_tokens_per_pass", tokens},
                              {"model_flops_per_token", flops_per_token},
                              {"rows", rows_json}});
  }
  if (!o.json.empty()) write_json(o.json, out);
  return 0;
}

}  // namespace
}  // namespace disc::bench

int main(int argc, char** argv) {
  disc::bench::Options o;
  CLI::App app{
      "disc (f32, bf16) against PyTorch eager and torch.compile on a GPU: the memory issue's Llama "
      "workload"};
  app.add_option("--device", o.device,
                 "disc's device: cuda:N, hip:N, or sim-gpu (a check on the CPU)");
  app.add_option("--batches", o.batches, "batch sizes")->delimiter(',');
  app.add_option("--steps", o.steps, "batches per pass");
  app.add_option("--repeats", o.repeats, "timed passes (the fastest counts)");
  app.add_option("--max-len", o.max_len, "sequence lengths are truncated here");
  app.add_option("--precision", o.precisions,
                 "disc's precisions (TrainerOptions::precision), each uncapped and capped")
      ->delimiter(',');
  app.add_option("--cap-share", o.cap_share,
                 "the cap: parameters and state, and this share of the rest of the uncapped peak "
                 "(0: no capped rows)");
  app.add_option("--data", o.data, "CodeAlpaca's JSON (its lengths shape the batches)");
  app.add_flag("!--no-torch", o.torch, "skip PyTorch");
  app.add_option("--torch-compile", o.compiled,
                 "the torch.compile rows: f32, bf16, budget (bf16 with the memory budget)")
      ->delimiter(',')
      ->check(CLI::IsMember({"f32", "bf16", "budget"}));
  bool no_compile = false;
  app.add_flag("--no-compile", no_compile, "skip PyTorch's torch.compile rows");
  app.add_option(
         "--torch-memory-budget", o.torch_memory_budget,
         "the last torch.compile bf16 row's torch._functorch.config.activation_memory_budget")
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("!--no-offload", o.offload, "capped runs regenerate by recomputing only");
  app.add_option("--torch-device", o.torch_device, "where PyTorch runs (cuda, or cpu)");
  app.add_option("--python", o.python,
                 "the Python with PyTorch (with CUDA, for --torch-device cuda; 2.0+ for SDPA and "
                 "torch.compile)");
  app.add_option("--json", o.json, "also write the results here");
  CLI11_PARSE(app, argc, argv);
  if (no_compile) o.compiled.clear();
  try {
    return disc::bench::run(o);
  } catch (const disc::Error& e) {
    std::fprintf(stderr, "bench_gpu: %s\n", e.what());
    return 2;
  }
}
