// bench_gpu: the memory issue's Llama workload on a GPU (4 layers, hidden 512, 8 heads, SwiGLU
// 1376, vocab 32000, AdamW, f32; batch sizes 8 to 24; CodeAlpaca's lengths, truncated at 1024),
// disc against PyTorch eager on the same model, batches and initial weights, in one run. For each
// batch size: disc without a cap, disc with a cap that holds the parameters and optimizer state
// and --cap-share of the rest of its uncapped peak (schedule, remat and offload), PyTorch eager.
// Prints peak device bytes, real tokens/s, what disc staged on the host (ops without a GPU kernel
// yet) and, for disc, its evictions and reloads.
//
// usage: bench_gpu [--device cuda:0] [--batches 8,16,24] [--steps N] [--repeats N] [--max-len N]
//                  [--cap-share 0.5] [--no-offload] [--data FILE] [--no-torch] [--torch-device
//                  cuda]
//                  [--python PATH] [--json FILE]
// --device sim-gpu runs disc's GPU path on the CPU (a check of the benchmark, not a measurement).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/bytes.h"
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

struct Options {
  std::string device = "cuda:0";
  std::vector<int64_t> batches = {8, 16, 24};
  int steps = 4;
  int repeats = 2;
  int64_t max_len = 1024;
  double cap_share = 0.5;
  bool offload = true;
  std::string data = "../shared/data/codealpaca/codealpaca.json";
  bool torch = true;
  std::string torch_device = "cuda";
  std::string python = "/usr/bin/python3";
  std::string json;
  uint64_t seed = 1;
  ir::models::LlamaConfig model{
      .vocab = 32000, .hidden = 512, .layers = 4, .heads = 8, .kv_heads = 8, .ffn = 1376};
};

struct Result {
  std::string refused;  // why it did not run; "" when it did
  double tokens_per_s = 0;
  int64_t live_peak = 0, reserved_peak = 0, evictions = 0, reloads = 0, recomputes = 0, staged = 0,
          staged_bytes = 0;
  int64_t held = 0;  // parameters, optimizer state and the largest batch's inputs
  double first_loss = 0;
};

engine::TrainerOptions trainer_options(const Options& o, const memory::GovernorOptions& memory) {
  return {.device = o.device, .seed = o.seed, .memory = memory};
}

// A warm-up pass, then o.repeats timed passes over the batches; the fastest counts.
Result run_disc(const Options& o, const std::vector<data::HostBatch>& batches,
                const memory::GovernorOptions& memory, const std::string& label) {
  Result r;
  try {
    engine::Trainer t(ir::models::build_llama(bounded(o.model, batches)),
                      trainer_options(o, memory));
    r.held = t.bytes_held_for(t.largest_shape());
    int64_t tokens = 0;
    for (const data::HostBatch& b : batches) tokens += b.real_tokens;
    double best = 0;
    for (int pass = 0; pass <= o.repeats; ++pass) {
      const double start = now_seconds();
      for (size_t i = 0; i < batches.size(); ++i) {
        const engine::StepResult s = t.step(to_device(batches[i], t.allocator()), kLr);
        if (pass == 0 && i == 0) r.first_loss = s.loss;
        r.live_peak = std::max(r.live_peak, s.stats.live_peak_bytes);
        r.reserved_peak = std::max(r.reserved_peak, s.stats.reserved_peak_bytes);
        if (pass == o.repeats) {
          r.evictions += s.stats.evictions, r.reloads += s.stats.reloads,
              r.recomputes += s.stats.recomputes;
          r.staged += s.stats.host_staged_nodes, r.staged_bytes += s.stats.staged_bytes;
        }
        std::fprintf(stderr, "  [disc %s %s] %zu/%zu B=%lld S=%lld loss %.4f\n", label.c_str(),
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

Result run_pytorch(const Options& o, const std::vector<data::HostBatch>& batches) {
  Result r;
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("disc-bench-gpu-" + std::to_string(::getpid())))
          .string();
  try {
    engine::Trainer initial(ir::models::build_llama(bounded(o.model, batches)),
                            trainer_options(o, {}));
    write_torch_workload(dir, initial,
                         {.batches = &batches, .model = bounded(o.model, batches), .lr = kLr});
    const TorchResult t = run_torch(
        {.python = o.python, .repeats = o.repeats, .checkpoint = false, .device = o.torch_device},
        dir);
    r.tokens_per_s = t.unpadded.tokens_per_s;
    r.live_peak = t.unpadded.peak_device_bytes;
    r.reserved_peak = t.unpadded.reserved_device_bytes;
    r.first_loss = t.first_loss;
  } catch (const Error& e) {
    r.refused = e.what();
  }
  std::filesystem::remove_all(dir);
  return r;
}

void print_row(const char* system, int64_t cap, const Result& r, const Result& base) {
  if (!r.refused.empty()) {
    std::printf("  %-14s %10s  %s\n", system, cap ? human_bytes(cap).c_str() : "none",
                r.refused.c_str());
    return;
  }
  std::printf("  %-14s %10s %10s %10s %9.0f %6.2fx %7lld %7lld %7lld %8s  %.4f\n", system,
              cap ? human_bytes(cap).c_str() : "none", human_bytes(r.live_peak).c_str(),
              human_bytes(r.reserved_peak).c_str(), r.tokens_per_s,
              base.tokens_per_s > 0 ? r.tokens_per_s / base.tokens_per_s : 0.0,
              static_cast<long long>(r.evictions), static_cast<long long>(r.reloads),
              static_cast<long long>(r.staged), human_bytes(r.staged_bytes).c_str(), r.first_loss);
}

nlohmann::json to_json(const Result& r) {
  return {{"refused", r.refused},           {"tokens_per_s", r.tokens_per_s},
          {"live_peak_bytes", r.live_peak}, {"reserved_peak_bytes", r.reserved_peak},
          {"evictions", r.evictions},       {"reloads", r.reloads},
          {"recomputes", r.recomputes},     {"host_staged_nodes", r.staged},
          {"staged_bytes", r.staged_bytes}, {"first_loss", r.first_loss}};
}

int run(const Options& o) {
  std::string source;
  const auto examples = codealpaca_examples(o.data, o.max_len, o.seed, source);
  {  // say what the device is before anything long runs
    engine::Trainer probe(
        ir::models::build_mlp({.in = 2, .classes = 2, .hidden = {2}, .max_batch = 1}),
        trainer_options(o, {}));
    std::printf("bench_gpu: %s, llama %lldx%lld, vocab %lld, data %s, %d steps x %d timed passes\n",
                probe.device().name().c_str(), static_cast<long long>(o.model.layers),
                static_cast<long long>(o.model.hidden), static_cast<long long>(o.model.vocab),
                source.c_str(), o.steps, o.repeats);
  }
  std::printf("  %-14s %10s %10s %10s %9s %7s %7s %7s %7s %8s  %s\n", "system", "cap", "live peak",
              "reserved", "tokens/s", "vs torch", "evicts", "reloads", "staged", "staged B",
              "first loss");
  nlohmann::json out = {
      {"device", o.device}, {"data", source}, {"batches", nlohmann::json::array()}};
  for (int64_t b : o.batches) {
    data::Batcher batcher(examples, {.batch_size = b, .seed = o.seed});
    std::mt19937_64 rng(o.seed * 1000003 + static_cast<uint64_t>(b));
    std::vector<data::HostBatch> batches;
    for (int i = 0; i < o.steps; ++i)
      batches.push_back(randomize(batcher.next(), o.model.vocab, rng));
    std::printf("B=%lld (longest %lld)\n", static_cast<long long>(b),
                static_cast<long long>(longest(batches)));
    const Result torch = o.torch ? run_pytorch(o, batches) : Result{.refused = "--no-torch"};
    const Result free = run_disc(o, batches, {}, "no cap");
    // The cap leaves the parameters and state their bytes and takes a share of the rest.
    const int64_t cap =
        free.held +
        static_cast<int64_t>(o.cap_share * static_cast<double>(free.live_peak - free.held));
    const Result capped = free.refused.empty()
                              ? run_disc(o, batches, {.cap = cap, .offload = o.offload}, "capped")
                              : Result{.refused = "no uncapped peak to take a share of"};
    print_row(("torch " + o.torch_device).c_str(), 0, torch, torch);
    print_row("disc", 0, free, torch);
    print_row("disc capped", cap, capped, torch);
    out["batches"].push_back({{"batch", b},
                              {"cap", cap},
                              {"torch", to_json(torch)},
                              {"disc", to_json(free)},
                              {"disc_capped", to_json(capped)}});
  }
  if (!o.json.empty()) write_json(o.json, out);
  return 0;
}

}  // namespace
}  // namespace disc::bench

int main(int argc, char** argv) {
  disc::bench::Options o;
  CLI::App app{"disc against PyTorch eager on a GPU: the memory issue's Llama workload"};
  app.add_option("--device", o.device,
                 "disc's device: cuda:N, hip:N, or sim-gpu (a check on the CPU)");
  app.add_option("--batches", o.batches, "batch sizes")->delimiter(',');
  app.add_option("--steps", o.steps, "batches per pass");
  app.add_option("--repeats", o.repeats, "timed passes (the fastest counts)");
  app.add_option("--max-len", o.max_len, "sequence lengths are truncated here");
  app.add_option("--cap-share", o.cap_share,
                 "the cap: parameters and state, and this share of the rest of the uncapped peak");
  app.add_option("--data", o.data, "CodeAlpaca's JSON (its lengths shape the batches)");
  app.add_flag("!--no-torch", o.torch, "skip PyTorch");
  app.add_flag("!--no-offload", o.offload, "capped runs regenerate by recomputing only");
  app.add_option("--torch-device", o.torch_device, "where PyTorch runs (cuda, or cpu)");
  app.add_option("--python", o.python,
                 "the Python with PyTorch (with CUDA, for --torch-device cuda)");
  app.add_option("--json", o.json, "also write the results here");
  CLI11_PARSE(app, argc, argv);
  try {
    return disc::bench::run(o);
  } catch (const disc::Error& e) {
    std::fprintf(stderr, "bench_gpu: %s\n", e.what());
    return 2;
  }
}
