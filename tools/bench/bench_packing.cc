// bench_packing: padded against packed steps on CodeAlpaca, side by side in one run, on the CPU,
// in f32 or (--precision bf16) bf16. The same examples (byte tokens with BOS and EOS, truncated at
// --max-len, in the padded batcher's order) go through three trainers from the same initial
// weights:
//   padded    B examples a step, each row padded to the batch's longest
//   packed    the same B examples a step, one stream of their tokens (data.packing: true)
//   budget    packed, whole examples while their tokens fit the padded run's mean positions a step
// For each: real tokens/s (the fastest of the timed passes after a warm-up pass; the systems'
// passes take turns), the live peak, and the smallest cap the planner finds for the largest step
// it ran; packed against padded: the largest relative difference of the per-step losses and
// gradient norms; and each packed run again under half its own uncapped peak, or its smallest cap
// where half cannot hold the parameters and optimizer state (the numbers bit for bit, and its
// tokens/s against uncapped, timed in the same rotation).
//
// usage: bench_packing [--model small|memory] [--batch 16] [--steps 8] [--repeats 2]
//                      [--max-len 512] [--data FILE] [--tokenizer FILE] [--threads N] [--seed N]
//                      [--json FILE] [--profile] [--precision f32|bf16]
//   small:  disc-train's configs/codealpaca.yaml llama (2 layers, hidden 128, byte vocab 258;
//           with --tokenizer, its vocabulary)
//   memory: bench_memory's llama (4 layers, hidden 512, vocab 32000; ids drawn at random, or
//           the tokenizer's)
//   --tokenizer: a sentencepiece model (tools/bench/codealpaca_tokenizer.sh trains one on the
//           data): a Llama tokenizer's examples are a third as long as bytes, and none is cut at
//           512, so a batch holds more padding
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "apps/data/batcher.h"
#include "apps/data/sentencepiece_tokenizer.h"
#include "base/bytes.h"
#include "batches.h"
#include "devices/cpu/openmp_spin.h"
#include "engine/trainer.h"
#include "ir/models/model.h"
#include "json_file.h"
#include "memory/governor.h"
#include "op_profile.h"
#include "timing.h"

namespace disc::bench {
namespace {

constexpr double kLr = 1e-3;

struct Options {
  std::string model = "small";
  int64_t batch = 16;
  int steps = 8;
  int repeats = 2;
  int64_t max_len = 512;
  std::string data = "../shared/data/codealpaca/codealpaca.json";
  std::string tokenizer;  // a sentencepiece model; "" for byte tokens
  std::shared_ptr<const data::SentencePieceTokenizer> spm;  // that model, loaded once
  int threads = 2;
  uint64_t seed = 1;
  std::string json;
  bool profile = false;  // where each uncapped run's last timed pass spends its time, per op
  std::string precision = "f32";
};

ir::models::LlamaConfig model_of(const Options& o) {
  if (o.model == "memory")
    return {.vocab = std::max<int64_t>(32000, o.spm ? o.spm->vocab_size() : 0),
            .hidden = 512,
            .layers = 4,
            .heads = 8,
            .kv_heads = 8,
            .ffn = 1376};
  return {.vocab = o.spm ? o.spm->vocab_size() : 258,
          .hidden = 128,
          .layers = 2,
          .heads = 4,
          .kv_heads = 2,
          .ffn = 344};
}

struct Result {
  double tokens_per_s = 0;
  int64_t live_peak = 0, smallest_cap = 0, positions = 0, real = 0, evictions = 0;
  int64_t largest = 0;               // positions in the largest step, which the live peak follows
  int64_t held = 0;                  // parameters, optimizer state and the largest step's inputs
  std::vector<float> losses, norms;  // the warm-up pass's (the first steps from the same weights)
};

engine::TrainerOptions options(const Options& o, int64_t cap) {
  engine::TrainerOptions t{.threads = o.threads,
                           .seed = o.seed,
                           .precision = o.precision == "bf16" ? DType::kBF16 : DType::kF32};
  t.memory.cap = cap;
  return t;
}

// One system: a trainer over its batches, the warm-up pass's numbers and the timed passes'.
struct System {
  std::string label;
  const std::vector<data::HostBatch>* batches;
  int64_t cap = 0;
  std::unique_ptr<engine::Trainer> trainer;
  Result r;
  OpProfile profile;
};

// The trainer and its warm-up pass (whose losses and norms are the comparison's).
void warm_up(const Options& o, System& s) {
  s.trainer = std::make_unique<engine::Trainer>(
      ir::models::build_llama(bounded(model_of(o), *s.batches)), options(o, s.cap));
  engine::Trainer& t = *s.trainer;
  for (const auto& hb : *s.batches) {
    const engine::StepResult st = t.step(to_device(hb, t.allocator()), kLr);
    s.r.losses.push_back(st.loss), s.r.norms.push_back(st.grad_norm);
    s.r.live_peak = std::max(s.r.live_peak, st.stats.live_peak_bytes);
    s.r.positions += hb.computed(), s.r.real += hb.real_tokens;
    s.r.largest = std::max(s.r.largest, hb.computed());
  }
}

// One timed pass; the fastest of them counts. With --profile, the last one is observed.
void timed_pass(const Options& o, System& s, bool last) {
  engine::Trainer& t = *s.trainer;
  if (o.profile && last) t.set_observer(s.profile.observer());
  double seconds = 0;
  for (const auto& hb : *s.batches) {
    const engine::Batch in = to_device(hb, t.allocator());
    const double start = now_seconds();
    const engine::StepResult st = t.step(in, kLr);
    seconds += now_seconds() - start;
    s.r.live_peak = std::max(s.r.live_peak, st.stats.live_peak_bytes);
    s.r.evictions += st.stats.evictions;
  }
  t.set_observer({});
  s.r.tokens_per_s = std::max(s.r.tokens_per_s, static_cast<double>(s.r.real) / seconds);
  std::fprintf(stderr, "  [%s] %.0f tokens/s\n", s.label.c_str(), s.r.real / seconds);
}

// The smallest cap the planner finds for the largest step of the system's batches (the cap its
// worst case needs, with T, or B and S, bounded by what the batches reach), and what that step
// holds before it runs.
void plan_memory(const Options& o, System& s) {
  engine::Trainer t(ir::models::build_llama(bounded(model_of(o), *s.batches)),
                    options(o, int64_t{1} << 40));
  const ir::Bindings worst = t.largest_shape();
  s.r.held = t.bytes_held_for(worst);
  s.r.smallest_cap = t.governor().smallest_feasible_cap(worst, s.r.held);
}

double max_relative(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst =
        std::max(worst, std::abs(double(a[i]) - b[i]) / std::max(1e-30, std::abs(double(b[i]))));
  return worst;
}

// The examples as token ids below the model's vocabulary: the tokenizer's or bytes as they are,
// or (bytes for the memory llama's 32000) drawn at random, as bench_memory does, since only the
// lengths shape the work.
std::vector<std::vector<int32_t>> examples_for(const Options& o, std::string& source) {
  if (o.spm) return codealpaca_examples(o.data, o.max_len, *o.spm, source);
  auto ex = codealpaca_examples(o.data, o.max_len, o.seed, source);
  const int64_t vocab = model_of(o).vocab;
  if (vocab <= 258) return ex;
  std::mt19937_64 rng(o.seed);
  for (auto& e : ex)
    for (int32_t& id : e) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return ex;
}

std::vector<data::HostBatch> take(data::Batcher& b, int steps) {
  std::vector<data::HostBatch> out;
  for (int i = 0; i < steps; ++i) out.push_back(b.next());
  return out;
}

int main_bench(const Options& o) {
  std::string source;
  const auto examples = examples_for(o, source);
  data::Batcher padded_batcher(examples, {.batch_size = o.batch, .seed = o.seed});
  const std::vector<data::HostBatch> padded = take(padded_batcher, o.steps);
  std::vector<data::HostBatch> packed;
  for (const auto& b : padded) packed.push_back(data::pack(b));
  int64_t positions = 0;
  for (const auto& b : padded) positions += b.computed();
  const int64_t budget = positions / o.steps;
  data::Batcher budget_batcher(
      examples, {.token_budget = budget, .packing = true, .max_rows = 1 << 20, .seed = o.seed});
  const std::vector<data::HostBatch> by_budget = take(budget_batcher, o.steps);

  std::printf(
      "bench_packing: llama %s (%lld layers, hidden %lld, vocab %lld), %s, %d threads, "
      "GOMP_SPINCOUNT=%s\n",
      o.model.c_str(), static_cast<long long>(model_of(o).layers),
      static_cast<long long>(model_of(o).hidden), static_cast<long long>(model_of(o).vocab),
      o.precision.c_str(), o.threads, openmp_spin().c_str());
  std::printf("%s\n", machine_load().c_str());
  std::printf("data: %s, max_len %lld, %d steps of B=%lld; budget run: %lld tokens a step\n",
              source.c_str(), static_cast<long long>(o.max_len), o.steps,
              static_cast<long long>(o.batch), static_cast<long long>(budget));

  // Every system is warmed up first, the capped ones at half their uncapped run's peak; then
  // the timed passes take turns, so that the machine's noise falls on each alike.
  std::vector<System> sys(5);
  sys[0] = {.label = "padded", .batches = &padded};
  sys[1] = {.label = "packed", .batches = &packed};
  sys[2] = {.label = "budget", .batches = &by_budget};
  for (int i = 0; i < 3; ++i) {
    warm_up(o, sys[i]);
    plan_memory(o, sys[i]);
  }
  for (int i : {1, 2}) {
    sys[i + 2] = {.label = sys[i].label + " capped",
                  .batches = sys[i].batches,
                  .cap = std::max(sys[i].r.live_peak / 2, sys[i].r.smallest_cap)};
    warm_up(o, sys[i + 2]);
  }
  for (int pass = 0; pass < o.repeats; ++pass)
    for (System& s : sys) timed_pass(o, s, pass + 1 == o.repeats);
  if (o.profile)
    for (int i = 0; i < 3; ++i)
      sys[i].profile.print(sys[i].label + ", last timed pass (observed)", 12);

  const Result& pad = sys[0].r;
  std::printf("\n%-8s %10s %10s %7s %12s %8s %8s %12s %8s\n", "run", "positions", "real", "real%",
              "tokens/s", "vs pad", "largest", "live peak", "vs pad");
  for (int i = 0; i < 3; ++i) {
    const Result& r = sys[i].r;
    std::printf(
        "%-8s %10lld %10lld %6.1f%% %12.0f %7.2fx %8lld %12s %7.2fx   smallest cap %s (%.2fx)\n",
        sys[i].label.c_str(), static_cast<long long>(r.positions), static_cast<long long>(r.real),
        100.0 * r.real / r.positions, r.tokens_per_s, r.tokens_per_s / pad.tokens_per_s,
        static_cast<long long>(r.largest), human_bytes(r.live_peak).c_str(),
        double(r.live_peak) / pad.live_peak, human_bytes(r.smallest_cap).c_str(),
        double(r.smallest_cap) / pad.smallest_cap);
  }
  // What packing can shrink: the parameters and optimizer state are the same in every run.
  std::printf(
      "\nlive peak above what the largest step holds as it starts (parameters, optimizer "
      "state, inputs):\n");
  for (int i = 0; i < 3; ++i) {
    const Result& r = sys[i].r;
    std::printf("%-8s %12s above %s held (%.2fx)\n", sys[i].label.c_str(),
                human_bytes(r.live_peak - r.held).c_str(), human_bytes(r.held).c_str(),
                double(r.live_peak - r.held) / (pad.live_peak - pad.held));
  }
  const double loss_diff = max_relative(sys[1].r.losses, pad.losses),
               norm_diff = max_relative(sys[1].r.norms, pad.norms);
  std::printf(
      "\npacked vs padded, step for step: losses within %.2e, gradient norms within %.2e "
      "(relative)\n",
      loss_diff, norm_diff);

  nlohmann::json out = {{"model", o.model},           {"precision", o.precision},
                        {"batch", o.batch},           {"steps", o.steps},
                        {"loss_rel_diff", loss_diff}, {"norm_rel_diff", norm_diff}};
  for (int i : {1, 2}) {
    const Result &free = sys[i].r, &capped = sys[i + 2].r;
    const bool same = capped.losses == free.losses && capped.norms == free.norms;
    std::printf(
        "%s under %s (%s): %.0f tokens/s, %.2fx uncapped, %lld evictions, "
        "losses and norms %s\n",
        sys[i].label.c_str(),
        sys[i + 2].cap == sys[i].r.live_peak / 2 ? "half its peak" : "its smallest cap",
        human_bytes(sys[i + 2].cap).c_str(), capped.tokens_per_s,
        capped.tokens_per_s / free.tokens_per_s, static_cast<long long>(capped.evictions),
        same ? "bit for bit" : "DIFFER");
    out[sys[i].label] = {
        {"tokens_per_s", free.tokens_per_s}, {"held", free.held},
        {"largest_step", free.largest},      {"live_peak", free.live_peak},
        {"smallest_cap", free.smallest_cap}, {"capped_tokens_per_s", capped.tokens_per_s},
        {"capped_same_numbers", same}};
  }
  out["padded"] = {{"tokens_per_s", pad.tokens_per_s},
                   {"held", pad.held},
                   {"largest_step", pad.largest},
                   {"live_peak", pad.live_peak},
                   {"smallest_cap", pad.smallest_cap}};
  if (!o.json.empty()) write_json(o.json, out);
  return 0;
}

}  // namespace
}  // namespace disc::bench

int main(int argc, char** argv) {
  disc::devices::cpu::run_again_with_short_openmp_spin(argv);  // as disc-train runs
  disc::bench::Options o;
  CLI::App app{"Padded against packed steps on CodeAlpaca, side by side"};
  app.add_option("--model", o.model, "small (configs/codealpaca.yaml's llama) or memory (4x512)")
      ->check(CLI::IsMember({"small", "memory"}));
  app.add_option("--batch", o.batch, "examples a step (data.batch_size)")
      ->check(CLI::PositiveNumber);
  app.add_option("--steps", o.steps, "steps per pass")->check(CLI::PositiveNumber);
  app.add_option("--repeats", o.repeats, "timed passes (the fastest counts)")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-len", o.max_len, "tokens per example at most")->check(CLI::PositiveNumber);
  app.add_option("--data", o.data, "CodeAlpaca's JSON file");
  app.add_option("--tokenizer", o.tokenizer,
                 "a sentencepiece model for the data (tools/bench/codealpaca_tokenizer.sh); "
                 "default: byte tokens");
  app.add_option("--threads", o.threads, "CPU threads");
  app.add_option("--seed", o.seed, "batch order and initial weights");
  app.add_option("--json", o.json, "also write the figures to this JSON file");
  app.add_flag("--profile", o.profile, "also print where each uncapped run's time goes, per op");
  app.add_option("--precision", o.precision, "f32 or bf16 (TrainerOptions::precision)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  CLI11_PARSE(app, argc, argv);
  try {
    if (!o.tokenizer.empty())
      o.spm = std::make_shared<const disc::data::SentencePieceTokenizer>(o.tokenizer);
    return disc::bench::main_bench(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_packing: %s\n", e.what());
    return 1;
  }
}
