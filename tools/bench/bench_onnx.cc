// bench_onnx: disc training a llama imported from ONNX next to disc's own llama of the same sizes
// and weights, side by side in one run (issue 29's benchmark: tokens/s within 5%).
//
// The model: bench_step's llama (2 layers, hidden 256, 4 heads, 4 kv heads, SwiGLU 688, vocab
// 1000) exported from PyTorch 1.13 by tools/onnx_export.py --bench FILE, with dynamic batch and
// sequence axes. The workload: bench_step's (batches of 8 sequences, lengths uniform in [32, 512],
// random ids, each batch padded to its own longest row), AdamW in f32 on the CPU, fused kernels.
// Both trainers start from the file's initializers; each takes a warm-up pass (compiling per
// shape), then rounds of timed passes, alternating, so that noise on a shared machine hits both;
// the fastest pass counts. The warm-up losses must be the same bit for bit (the imported graph
// compiles to disc's own kernels), else the run fails.
//
// usage: bench_onnx --model FILE [--steps N] [--repeats N] [--threads N] [--seed N] [--json FILE]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "batches.h"
#include "engine/pipeline.h"
#include "engine/trainer.h"
#include "formats/onnx/import.h"
#include "formats/onnx/weights.h"
#include "json_file.h"
#include "memory/governor.h"
#include "timing.h"

namespace disc::bench {
namespace {

constexpr double kLr = 3e-4;
constexpr double kGoal = 0.95;  // imported over own, tokens/s

struct Options {
  std::string model, json;
  int steps = 20, repeats = 3, threads = 2;
  uint64_t seed = 1;
  int64_t batch = 8, min_len = 32, max_len = 512;
  ir::models::LlamaConfig llama{
      .vocab = 1000, .hidden = 256, .layers = 2, .heads = 4, .kv_heads = 4, .ffn = 688};
};

struct Pass {
  double seconds = 0;
  std::vector<float> losses;
};

Pass run_pass(engine::Trainer& t, const std::vector<data::HostBatch>& batches,
              const std::string& label) {
  Pass p;
  for (const auto& b : batches) {
    const engine::Batch in = to_device(b, t.allocator());
    const double start = now_seconds();
    p.losses.push_back(t.step(in, kLr).loss);
    p.seconds += now_seconds() - start;
  }
  std::fprintf(stderr, "  [%s] %.2f s\n", label.c_str(), p.seconds);
  return p;
}

struct System {
  std::string name;
  std::unique_ptr<engine::Trainer> trainer;
  Pass warm;
  double best = 1e30;
};

int run(const Options& o) {
  const auto batches =
      uniform_batches(o.llama.vocab, o.steps, o.batch, o.min_len, o.max_len, o.seed);
  int64_t real = 0;
  for (const auto& b : batches) real += b.real_tokens;
  const engine::TrainerOptions to{.threads = o.threads, .seed = o.seed};

  onnx::ImportOptions io;
  io.inputs = {{"tokens", {o.batch, longest(batches)}}};
  onnx::Imported imported = onnx::import_file(o.model, io);
  System mine{"onnx", std::make_unique<engine::Trainer>(onnx::language_model(imported), to)};
  onnx::load_weights(imported, *mine.trainer);
  System own{"own", std::make_unique<engine::Trainer>(
                        ir::models::build_llama(bounded(o.llama, batches)), to)};
  for (const std::string& p : own.trainer->parameter_names()) {
    auto w = imported.weights.find(p);
    if (w == imported.weights.end())
      throw InvalidArgument(o.model + " has no initializer `" + p + "`: export it with " +
                            "tools/onnx_export.py --bench (bench_step's llama)");
    const engine::Tensor& t = own.trainer->parameter(p);
    own.trainer->set_parameter(
        p, engine::Tensor::from<float>(t.shape(), w->second, own.trainer->allocator()));
  }

  std::printf(
      "bench_onnx: %s (opset %lld) against disc's llama %lldx%lld, %d batches of %lld, "
      "%lld real tokens, %d threads\n  machine load: %s\n",
      o.model.c_str(), static_cast<long long>(imported.opset),
      static_cast<long long>(o.llama.layers), static_cast<long long>(o.llama.hidden), o.steps,
      static_cast<long long>(o.batch), static_cast<long long>(real), o.threads,
      machine_load().c_str());
  std::vector<System*> systems = {&own, &mine};
  for (System* s : systems) s->warm = run_pass(*s->trainer, batches, s->name + " warm-up");
  for (int r = 1; r <= o.repeats; ++r)
    for (System* s : systems)
      s->best = std::min(s->best, run_pass(*s->trainer, batches, s->name + " timed").seconds);

  const bool same = own.warm.losses == mine.warm.losses;
  auto kernels = [](engine::Trainer& t) { return t.compiled().fusion->groups.size(); };
  auto bound = [](engine::Trainer& t) {
    const ir::Bindings b = t.largest_shape();
    return t.governor().lower_bound(b, t.bytes_held_for(b));
  };
  const double own_tps = real / own.best, onnx_tps = real / mine.best;
  std::printf("\n%-28s %12s %12s %10s\n", "", "tokens/s", "kernels", "lower bound");
  for (System* s : systems)
    std::printf("%-28s %12.0f %12zu %10.1f MiB\n",
                (s == &own ? "disc llama" : "disc llama from ONNX"), real / s->best,
                kernels(*s->trainer), bound(*s->trainer) / 1048576.0);
  std::printf("\nimported / own: %.3fx tokens/s (goal >= %.2f); warm-up losses %s\n",
              onnx_tps / own_tps, kGoal, same ? "identical bit for bit" : "DIFFER");
  if (!o.json.empty()) {
    write_json(o.json, {{"bench", "bench_onnx"},
                        {"own_tokens_per_s", own_tps},
                        {"onnx_tokens_per_s", onnx_tps},
                        {"ratio", onnx_tps / own_tps},
                        {"own_kernels", kernels(*own.trainer)},
                        {"onnx_kernels", kernels(*mine.trainer)},
                        {"losses_identical", same}});
  }
  return same ? 0 : 1;
}

}  // namespace
}  // namespace disc::bench

int main(int argc, char** argv) {
  disc::bench::Options o;
  CLI::App app{"bench_onnx: disc training a llama imported from ONNX next to its own llama"};
  app.add_option("--model", o.model, "The ONNX llama (tools/onnx_export.py --bench FILE)")
      ->required();
  app.add_option("--steps", o.steps, "Batches per pass")->capture_default_str();
  app.add_option("--repeats", o.repeats, "Timed passes per system")->capture_default_str();
  app.add_option("--threads", o.threads, "CPU threads")->capture_default_str();
  app.add_option("--seed", o.seed, "Seed for the batches")->capture_default_str();
  app.add_option("--json", o.json, "Also write the figures as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  try {
    return disc::bench::run(o);
  } catch (const disc::Error& e) {
    std::fprintf(stderr, "bench_onnx: %s\n", e.what());
    return 2;
  }
}
