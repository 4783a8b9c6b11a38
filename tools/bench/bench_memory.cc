// bench_memory: what the memory governor saves and what it costs on a dynamic-shape workload,
// measured side by side in one run. The workload: Llama (4 layers, hidden 512, 8 heads, SwiGLU
// 1376, vocab 32000) trained with AdamW in f32 on the CPU. The batches take their sequence lengths
// from CodeAlpaca (one byte per token, BOS and EOS included, truncated at --max-len); their token
// ids are random in [0, vocab), since only the lengths shape the memory and the byte tokenizer's
// ids would use 258 of the 32000 rows. Each batch is padded to its own longest sequence.
//
// For each batch size, over the same batches and at the same cap (half the unoptimised peak):
//   dynamic  no governor: graph order, no cap, no remat, no backward recompute -> the unoptimised
//   peak static   every batch padded to its bucket (next power of two), schedule + remat under the
//   cap disc     dynamic shapes, schedule + remat under the cap
// (where static or disc cannot run at that cap, both run again at the smallest cap both fit),
// then tokens/s against caps for one batch size, from none down to the smallest cap the planner
// reaches, and the goals as met / not met. Each run first takes a warm-up pass over its
// batches (planning and GEMM primitives per new shape), then timed passes over the same batches.
//
// usage: bench_memory [--quick] [--batches 8,16,24] [--steps N] [--repeats N] [--threads N]
//                     [--max-len N] [--data FILE] [--curve-batch B] [--seed N] [--precision bf16]
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "apps/data/batcher.h"
#include "apps/data/synthetic.h"
#include "apps/data/text_dataset.h"
#include "base/bytes.h"
#include "base/error.h"
#include "batches.h"
#include "devices/cpu/openmp_spin.h"
#include "engine/trainer.h"
#include "ir/models/model.h"
#include "json_file.h"
#include "llama_report.h"
#include "memory/governor.h"
#include "memory/memory_plan.h"
#include "process_memory.h"
#include "timing.h"

namespace disc::bench {
namespace {

using nlohmann::json;

constexpr double kLr = 3e-4;
constexpr double kHalf = 0.5;  // the comparison's cap, as a share of the unoptimised peak
constexpr double kGoalThroughput = 0.85;  // (a) tokens/s at half the peak, against no cap
constexpr double kGoalFeasible = 1.25;    // (b) smallest feasible cap over the lower bound
constexpr double kGoalSpeedup = 1.3;      // (c) disc over static padding at equal cap

struct Options {
  std::vector<int64_t> batches = {8, 16, 24};
  int steps = 3;
  int repeats = 1;  // timed passes per run; the fastest counts
  int threads = 2;
  int64_t max_len = 1024;
  std::string data = "../shared/data/codealpaca/codealpaca.json";
  int64_t curve_batch = 0;  // 0: the first of `batches`
  uint64_t seed = 1;
  DType precision = DType::kF32;  // every system's (TrainerOptions::precision)
  ir::models::LlamaConfig model{
      .vocab = 32000, .hidden = 512, .layers = 4, .heads = 8, .kv_heads = 8, .ffn = 1376};
};

int threads(const Options& o) {
  return o.threads > 0 ? o.threads
                       : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// ----- data -----

std::vector<std::vector<int32_t>> load_examples(const Options& o, std::string& source) {
  return codealpaca_examples(o.data, o.max_len, o.seed, source);
}

// The static-shape bucket of a length: the next power of two, at most max_len.
int64_t bucket_bound(int64_t seq, int64_t max_len) {
  int64_t p = 1;
  while (p < seq) p *= 2;
  return std::min(p, max_len);
}

struct Workload {
  int64_t batch_size = 0;
  std::vector<data::HostBatch> dynamic, padded;  // the same rows; padded to their buckets
};

Workload make_workload(const Options& o, const std::vector<std::vector<int32_t>>& examples,
                       int64_t batch_size) {
  Workload w{.batch_size = batch_size};
  data::Batcher batcher(examples, {.batch_size = batch_size, .seed = o.seed});
  std::mt19937_64 rng(o.seed * 1000003 + static_cast<uint64_t>(batch_size));
  for (int i = 0; i < o.steps; ++i) {
    w.dynamic.push_back(randomize(batcher.next(), o.model.vocab, rng));
    w.padded.push_back(pad_to(w.dynamic.back(), bucket_bound(w.dynamic.back().seq, o.max_len)));
  }
  return w;
}

void describe_workload(const Workload& w) {
  int64_t real = 0, dyn = 0, stat = 0;
  for (size_t i = 0; i < w.dynamic.size(); ++i) {
    real += w.dynamic[i].real_tokens;
    dyn += w.dynamic[i].batch * w.dynamic[i].seq;
    stat += w.padded[i].batch * w.padded[i].seq;
  }
  std::string seqs;
  for (const auto& b : w.dynamic) seqs += (seqs.empty() ? "" : ",") + std::to_string(b.seq);
  std::printf(
      "B=%lld: %zu batches, S = %s (static buckets up to %lld); %lld real tokens; padding %.0f%% "
      "dynamic, %.0f%% static\n",
      static_cast<long long>(w.batch_size), w.dynamic.size(), seqs.c_str(),
      static_cast<long long>(longest(w.padded)), static_cast<long long>(real),
      100.0 * (dyn - real) / dyn, 100.0 * (stat - real) / stat);
}

// ----- one run: a trainer, a warm-up pass and timed passes over the same batches -----

struct Result {
  std::string refused = "not run";  // why this run did not complete ("" when it did)
  int64_t live_peak = 0, reserved_peak = 0, planned_peak = 0;
  double tokens_per_s = 0, evictions_per_step = 0, recompute_share = 0;
  // Tokens per (CPU second / threads): as if the cores were ours alone.
  double cpu_tokens_per_s = 0;
  double faults_per_step = 0;  // minor page faults: fresh pages the allocator's device mapped
  double first_visit_ms = 0;   // mean extra time of a warm-up step over the timed step of its shape
  double setup_s = 0;          // the trainer's constructor: schedule, candidates, cap check, init
  int64_t peak_rss = 0;        // the process's peak resident memory over the run
  StepSpread step_ms;          // over every timed step
  int64_t warm_compiles = 0, timed_compiles = 0;  // JIT kernels compiled (no disk cache)
  std::vector<float> losses;                      // warm-up pass, then the timed passes
  bool ran() const { return refused.empty(); }
};

struct Run {
  std::string label;
  memory::GovernorOptions memory;
  const std::vector<data::HostBatch>* batches;
  bool backward_recompute = true;  // a memory optimisation too: off for the unoptimised run
};

// Refuses a run that would not fit in the machine's free memory: an mmap'd block would pass, then
// the OOM killer would take the whole benchmark. A capped run reserves at most its cap; an uncapped
// caching allocator keeps freed blocks of every size until the step ends, and reserved up to 1.9x
// the live peak in this benchmark (19.1 GiB for 10.2 GiB live at B=16), so allow twice the plan.
std::string exceeds_machine(engine::Trainer& t, int64_t cap) {
  const ir::Bindings b = t.largest_shape();
  const int64_t need = cap > 0 ? cap : 2 * t.governor().plan(b, t.bytes_held_for(b)).peak;
  const int64_t free = t.device().memory_info().free_bytes;
  if (need <= free) return "";
  return "skipped: it may reserve " + human_bytes(need) + " and the machine has " +
         human_bytes(free) + " free";
}

// The process's CPU time and minor page faults so far. CPU time is the second measure of speed:
// on a shared machine the wall clock also counts the time other processes held the cores.
struct Usage {
  double cpu_seconds = 0;
  int64_t faults = 0;
};

Usage usage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return {seconds(u.ru_utime) + seconds(u.ru_stime), u.ru_minflt};
}

// One pass over the batches: its time and what the governor did.
struct Pass {
  double seconds = 0, cpu_seconds = 0, recompute_us = 0;
  int64_t evictions = 0, faults = 0, compiles = 0;
  std::vector<double> step_ms;
};

// Runs the batches once, adding to `r` the losses and peaks; throws OutOfMemory.
Pass run_pass(engine::Trainer& t, const std::vector<data::HostBatch>& batches,
              const std::string& label, const double& recompute_us, Result& r) {
  Pass p;
  for (size_t i = 0; i < batches.size(); ++i) {
    const data::HostBatch& hb = batches[i];
    const engine::Batch in = to_device(hb, t.allocator());
    const double recompute_before = recompute_us;
    const Usage before = usage();
    const double start = now_seconds();
    const engine::StepResult s = t.step(in, kLr);
    const double seconds = now_seconds() - start;
    const Usage after = usage();
    p.seconds += seconds;
    p.step_ms.push_back(seconds * 1e3);
    p.cpu_seconds += after.cpu_seconds - before.cpu_seconds;
    p.faults += after.faults - before.faults;
    p.recompute_us += recompute_us - recompute_before;
    p.evictions += s.stats.evictions;
    p.compiles += s.stats.kernel_compiles;
    r.losses.push_back(s.loss);
    r.live_peak = std::max(r.live_peak, s.stats.live_peak_bytes);
    r.reserved_peak = std::max(r.reserved_peak, s.stats.reserved_peak_bytes);
    r.planned_peak = std::max(r.planned_peak, s.stats.planned_peak_bytes);
    std::fprintf(stderr, "  [%s] %zu/%zu  B=%lld S=%lld  %.0f ms  loss %.4f\n", label.c_str(),
                 i + 1, batches.size(), static_cast<long long>(hb.batch),
                 static_cast<long long>(hb.seq), seconds * 1e3, s.loss);
  }
  return p;
}

// A trainer with these options, a warm-up pass, then o.repeats timed passes over the same batches;
// the fastest timed pass counts (the machine may be shared).
Result run(const Options& o, const Run& spec) {
  Result r{.refused = ""};
  const std::vector<data::HostBatch>& batches = *spec.batches;
  reset_peak_resident();  // the previous run's trainer has given its memory back
  const double t0 = now_seconds();
  std::unique_ptr<engine::Trainer> trainer;
  try {
    trainer = std::make_unique<engine::Trainer>(
        ir::models::build_llama(bounded(o.model, batches)),
        // Fused JIT kernels, as disc-train runs by default, for every system compared.
        engine::TrainerOptions{.threads = o.threads,
                               .seed = o.seed,
                               .precision = o.precision,
                               .memory = spec.memory,
                               .backward_recompute = spec.backward_recompute});
  } catch (const OutOfMemory& e) {
    r.refused = e.what();
    return r;
  }
  r.setup_s = now_seconds() - t0;
  if (r.refused = exceeds_machine(*trainer, spec.memory.cap); !r.ran()) return r;
  double recompute_us = 0;
  trainer->set_observer([&](const engine::StepEvent& e) {
    if (e.kind == engine::StepEvent::Kind::kRecompute) recompute_us += e.end_us - e.begin_us;
  });
  Pass warm, best;
  std::vector<double> step_ms;
  for (int pass = 0; pass <= o.repeats; ++pass) {
    const std::string label = spec.label + (pass ? " timed " + std::to_string(pass) : " warm-up");
    try {
      const Pass p = run_pass(*trainer, batches, label, recompute_us, r);
      if (pass == 0) warm = p;
      if (pass > 0) step_ms.insert(step_ms.end(), p.step_ms.begin(), p.step_ms.end());
      (pass == 0 ? r.warm_compiles : r.timed_compiles) += p.compiles;
      if (pass == 1 || (pass > 1 && p.seconds < best.seconds)) best = p;
    } catch (const OutOfMemory& e) {
      r.refused = label + ": " + e.what();
      return r;
    }
  }
  int64_t tokens = 0;
  for (const data::HostBatch& b : batches) tokens += b.real_tokens;
  const auto steps = static_cast<double>(batches.size());
  r.tokens_per_s = static_cast<double>(tokens) / best.seconds;
  r.cpu_tokens_per_s = static_cast<double>(tokens) / (best.cpu_seconds / threads(o));
  r.evictions_per_step = static_cast<double>(best.evictions) / steps;
  r.recompute_share = best.recompute_us * 1e-6 / best.seconds;
  r.faults_per_step = static_cast<double>(best.faults) / steps;
  r.first_visit_ms = (warm.seconds - best.seconds) * 1e3 / steps;
  r.peak_rss = peak_resident_bytes();
  r.step_ms = step_spread(step_ms);
  return r;
}

// ----- printing -----

void print_header(const char* first) {
  std::printf("  %-24s %9s %10s %10s %10s %9s %9s %7s %6s %9s %7s %9s %6s\n", first, "cap",
              "live peak", "reserved", "peak RSS", "tokens/s", "cpu tok/s", "ratio", "evict",
              "recompute", "faults", "1st visit", "setup");
}

// One table row; `base` gives the ratio column (tokens/s over the base's). Flags a run whose
// bytes exceed its plan or its cap: the governor's accounting and the allocator's disagree.
void print_row(const std::string& name, int64_t cap, const Result& r, const Result* base) {
  const std::string c = cap > 0 ? human_bytes(cap) : "none";
  if (!r.ran()) {
    std::printf("  %-24s %9s  cannot run: %s\n", name.c_str(), c.c_str(), r.refused.c_str());
    return;
  }
  char ratio[16] = "-";
  if (base && base->ran())
    std::snprintf(ratio, sizeof ratio, "%.2fx", r.tokens_per_s / base->tokens_per_s);
  std::printf("  %-24s %9s %10s %10s %10s %9.0f %9.0f %7s %6.1f %8.1f%% %6.0fk %8.2fs %5.1fs\n",
              name.c_str(), c.c_str(), human_bytes(r.live_peak).c_str(),
              human_bytes(r.reserved_peak).c_str(), human_bytes(r.peak_rss).c_str(), r.tokens_per_s,
              r.cpu_tokens_per_s, ratio, r.evictions_per_step, 100 * r.recompute_share,
              r.faults_per_step / 1e3, r.first_visit_ms / 1e3, r.setup_s);
  if (r.live_peak > r.planned_peak) {
    std::printf("    ^ live peak %s is above the plan's %s\n", human_bytes(r.live_peak).c_str(),
                human_bytes(r.planned_peak).c_str());
  }
  if (cap > 0 && r.reserved_peak > cap)
    std::printf("    ^ reserved peak %s is above the cap\n", human_bytes(r.reserved_peak).c_str());
}

// "identical on all 6 steps" or where the first difference is. The governor must not change
// numbers.
std::string compare_losses(const Result& a, const Result& b) {
  if (!a.ran() || !b.ran()) return "not compared (a run did not complete)";
  for (size_t i = 0; i < std::min(a.losses.size(), b.losses.size()); ++i) {
    if (a.losses[i] != b.losses[i]) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "DIFFER at step %zu: %.9g vs %.9g", i + 1, a.losses[i],
                    b.losses[i]);
      return buf;
    }
  }
  return "identical, bit for bit, on all " + std::to_string(a.losses.size()) + " steps";
}

// ----- what the planner can reach -----

struct Feasibility {
  int64_t smallest = 0, lower_bound = 0, unplanned = 0, held = 0;
  double search_s = 0;
};

// The planner's numbers at the largest shape of the batches, with the governor's eviction
// candidates (found only under a cap with remat: hence a cap that no step reaches).
Feasibility feasibility(const Options& o, const std::vector<data::HostBatch>& batches) {
  Feasibility f;
  engine::Trainer t(ir::models::build_llama(bounded(o.model, batches)),
                    {.threads = o.threads,
                     .seed = o.seed,
                     .precision = o.precision,
                     .memory = {.cap = int64_t{1} << 60}});
  const ir::Bindings b = t.largest_shape();
  f.held = t.bytes_held_for(b);
  memory::Governor& gov = t.governor();
  const memory::MemoryPlan p =
      memory::plan_memory(t.graph(), gov.liveness(), gov.candidates(), b, f.held, {});
  f.lower_bound = p.lower_bound;
  f.unplanned = p.unplanned_peak;
  const double t0 = now_seconds();
  f.smallest = gov.smallest_feasible_cap(b, f.held);
  f.search_s = now_seconds() - t0;
  return f;
}

void print_feasibility(const char* what, const Feasibility& f, int64_t seq) {
  std::printf(
      "  %-6s at S=%-5lld held before the step %s, scheduled peak %s, lower bound %s, smallest "
      "feasible cap %s = %.3fx the bound (search %.2f s)\n",
      what, static_cast<long long>(seq), human_bytes(f.held).c_str(),
      human_bytes(f.unplanned).c_str(), human_bytes(f.lower_bound).c_str(),
      human_bytes(f.smallest).c_str(),
      static_cast<double>(f.smallest) / static_cast<double>(f.lower_bound), f.search_s);
}

// ----- the comparison at half the unoptimised peak, per batch size -----

struct Comparison {
  Workload w;
  Feasibility dynamic_f, padded_f;
  Result dynamic, padded, disc;
  int64_t cap = 0;
  // When static or disc cannot run at `cap`: both again at the smallest cap both fit.
  int64_t equal_cap = 0;
  Result padded_eq, disc_eq;
};

// Static and disc at half the unoptimised peak (when the unoptimised run gave one), and where
// either cannot run there, both again at the smallest cap both fit.
void run_governed(const Options& o, Comparison& c) {
  const std::string b = "B=" + std::to_string(c.w.batch_size);
  if (c.cap > 0) {
    const memory::GovernorOptions at_half{.cap = c.cap, .schedule = true, .remat = true};
    c.padded = run(o, {b + " static", at_half, &c.w.padded});
    c.disc = run(o, {b + " disc", at_half, &c.w.dynamic});
    if (c.padded.ran() && c.disc.ran()) return;
  }
  c.equal_cap = std::max(c.padded_f.smallest, c.dynamic_f.smallest);
  const memory::GovernorOptions at_equal{.cap = c.equal_cap, .schedule = true, .remat = true};
  c.padded_eq = run(o, {b + " static, equal cap", at_equal, &c.w.padded});
  c.disc_eq = run(o, {b + " disc, equal cap", at_equal, &c.w.dynamic});
}

Comparison compare(const Options& o, const std::vector<std::vector<int32_t>>& examples,
                   int64_t batch_size) {
  Comparison c{.w = make_workload(o, examples, batch_size)};
  describe_workload(c.w);
  std::fflush(stdout);
  std::fprintf(stderr, "[B=%lld] planning: smallest feasible caps\n",
               static_cast<long long>(batch_size));
  c.dynamic_f = feasibility(o, c.w.dynamic);
  c.padded_f = feasibility(o, c.w.padded);
  c.dynamic = run(o, {"B=" + std::to_string(batch_size) + " dynamic",
                      {.cap = 0, .schedule = false, .remat = false},
                      &c.w.dynamic,
                      /*backward_recompute=*/false});
  if (c.dynamic.ran())
    c.cap = static_cast<int64_t>(kHalf * static_cast<double>(c.dynamic.live_peak));
  run_governed(o, c);
  print_feasibility("disc", c.dynamic_f, longest(c.w.dynamic));
  print_feasibility("static", c.padded_f, longest(c.w.padded));
  print_header("mode");
  print_row("dynamic, no governor", 0, c.dynamic, &c.dynamic);
  if (c.dynamic.ran()) {
    print_row("static (buckets)", c.cap, c.padded, &c.dynamic);
    print_row("disc", c.cap, c.disc, &c.dynamic);
  }
  if (c.equal_cap > 0) {
    print_row("static, equal cap", c.equal_cap, c.padded_eq, &c.dynamic);
    print_row("disc, equal cap", c.equal_cap, c.disc_eq, &c.dynamic);
  }
  std::printf("  losses, disc vs dynamic without governor: %s\n",
              compare_losses(c.disc.ran() ? c.disc : c.disc_eq, c.dynamic).c_str());
  std::printf("\n");
  std::fflush(stdout);
  return c;
}

// ----- tokens/s against the cap, for one batch size -----

// Caps from none down to the smallest feasible: shares of the unoptimised peak above it, then it.
std::vector<int64_t> curve_caps(int64_t unoptimised, int64_t smallest) {
  std::vector<int64_t> caps = {0};
  for (double share : {0.9, 0.75, 0.6, 0.5, 0.4, 0.3, 0.25, 0.2, 0.15, 0.1}) {
    const auto cap = static_cast<int64_t>(share * static_cast<double>(unoptimised));
    if (cap > smallest) caps.push_back(cap);
  }
  caps.push_back(smallest);
  return caps;
}

struct Curve {
  Result unlimited, at_half;
  // (cap, run), from no cap (0) down: disc on the dynamic batches, static on the padded ones.
  std::vector<std::pair<int64_t, Result>> points, static_points;
};

// A run the comparison already made at `cap`, if any: the curve does not repeat it.
const Result* measured(const Comparison& c, int64_t cap, bool padded) {
  if (cap == c.cap && (padded ? c.padded : c.disc).ran()) return padded ? &c.padded : &c.disc;
  if (cap == c.equal_cap && (padded ? c.padded_eq : c.disc_eq).ran())
    return padded ? &c.padded_eq : &c.disc_eq;
  return nullptr;
}

// One system's points: disc (dynamic shapes) or static (padded to buckets), both with schedule
// and remat. A cap below the system's smallest feasible one is refused without a run.
std::vector<std::pair<int64_t, Result>> curve_points(const Options& o, const Comparison& c,
                                                     const std::vector<int64_t>& caps,
                                                     bool padded) {
  const std::string label =
      std::string(padded ? "static curve B=" : "curve B=") + std::to_string(c.w.batch_size);
  const int64_t smallest = (padded ? c.padded_f : c.dynamic_f).smallest;
  const std::vector<data::HostBatch>& batches = padded ? c.w.padded : c.w.dynamic;
  std::vector<std::pair<int64_t, Result>> out;
  for (int64_t cap : caps) {
    Result r;
    if (const Result* done = measured(c, cap, padded)) {
      r = *done;
    } else if (cap > 0 && cap < smallest) {
      r.refused = "exceeds the cap: its smallest feasible cap is " + human_bytes(smallest);
    } else {
      r = run(o, {label + " cap " + (cap ? human_bytes(cap) : "none"),
                  {.cap = cap, .schedule = true, .remat = true},
                  &batches});
    }
    out.emplace_back(cap, r);
  }
  return out;
}

// Prints one system's points; with `compare`, returns whether every run's losses equal the
// dynamic run's (padded batches hold other tokens: their losses are their own, not compared).
bool print_curve(const char* system, const Comparison& c,
                 const std::vector<std::pair<int64_t, Result>>& points, bool compare) {
  const int64_t unopt = c.dynamic.live_peak;
  std::printf("%s\n", system);
  print_header("cap (share)");
  bool equal = true;
  for (const auto& [cap, r] : points) {
    char name[64];
    std::snprintf(name, sizeof name, cap == c.dynamic_f.smallest ? "%.0f%% (smallest)" : "%.0f%%",
                  100.0 * static_cast<double>(cap) / static_cast<double>(unopt));
    print_row(cap ? name : "none", cap, r, &points.front().second);
    if (compare && r.ran() && r.losses != c.dynamic.losses) {
      equal = false;
      std::printf("    ^ losses %s against the dynamic run without governor\n",
                  compare_losses(r, c.dynamic).c_str());
    }
  }
  return equal;
}

Curve curve(const Options& o, const Comparison& c) {
  Curve out;
  const std::vector<int64_t> caps = curve_caps(c.dynamic.live_peak, c.dynamic_f.smallest);
  out.points = curve_points(o, c, caps, false);
  out.static_points = curve_points(o, c, caps, true);
  out.unlimited = out.points.front().second;
  for (const auto& [cap, r] : out.points) {
    if (cap == c.cap) out.at_half = r;
  }
  std::printf(
      "tokens/s against the cap, B=%lld; share of the unoptimised peak %s; ratio against no cap\n",
      static_cast<long long>(c.w.batch_size), human_bytes(c.dynamic.live_peak).c_str());
  bool equal = print_curve("disc (dynamic shapes, schedule + remat)", c, out.points, true);
  print_curve("static (padded to buckets, schedule + remat)", c, out.static_points, false);
  std::printf("  disc's losses at every cap vs dynamic without governor: %s\n\n",
              equal ? "identical, bit for bit" : "DIFFER (see above)");
  std::fflush(stdout);
  return out;
}

// ----- goals -----
// Judged on wall-clock tokens/s; the same ratio in CPU time follows in brackets, since a shared
// machine slows runs unevenly.

double cpu_ratio(const Result& x, const Result& base) {
  return x.cpu_tokens_per_s / base.cpu_tokens_per_s;
}

// printf into a string.
template <typename... Args>
std::string format(const char* f, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

std::string goal_a(const Comparison& c) {
  const long long b = c.w.batch_size;
  if (!c.dynamic.ran()) {
    return format("(a) B=%lld: not evaluated: the unoptimised run did not run", b);
  } else if (!c.disc.ran()) {
    const bool below = c.cap < c.dynamic_f.lower_bound;
    return format(
        "(a) B=%lld: %s: disc cannot run at %s, half the unoptimised peak: %s the lower bound "
        "%s; the smallest feasible cap is %s",
        b, verdict(false), human_bytes(c.cap).c_str(), below ? "below" : "above",
        human_bytes(c.dynamic_f.lower_bound).c_str(), human_bytes(c.dynamic_f.smallest).c_str());
  } else {
    const double a = c.disc.tokens_per_s / c.dynamic.tokens_per_s;
    return format(
        "(a) B=%lld: at %s (half the unoptimised peak) disc reaches %.0f%% [%.0f%%] of the "
        "uncapped dynamic run's tokens/s (goal >= %.0f%%): %s",
        b, human_bytes(c.cap).c_str(), 100 * a, 100 * cpu_ratio(c.disc, c.dynamic),
        100 * kGoalThroughput, verdict(a >= kGoalThroughput));
  }
}

std::string goal_c(const Comparison& c) {
  const long long b = c.w.batch_size;
  if (c.disc.ran() && c.padded.ran()) {
    const double s = c.disc.tokens_per_s / c.padded.tokens_per_s;
    return format(
        "(c) B=%lld: at %s disc runs %.2fx [%.2fx] the static padded run's tokens/s (goal >= "
        "%.1fx): %s",
        b, human_bytes(c.cap).c_str(), s, cpu_ratio(c.disc, c.padded), kGoalSpeedup,
        verdict(s >= kGoalSpeedup));
  } else if (c.disc_eq.ran() && c.padded_eq.ran()) {
    const double s = c.disc_eq.tokens_per_s / c.padded_eq.tokens_per_s;
    const char* at_half = c.cap == 0     ? "no half-peak cap (no unoptimised run)"
                          : c.disc.ran() ? "at half the peak only disc runs"
                                         : "at half the peak neither runs";
    return format(
        "(c) B=%lld: %s; at %s, the smallest cap both fit, disc runs %.2fx [%.2fx] static (goal "
        ">= %.1fx): %s",
        b, at_half, human_bytes(c.equal_cap).c_str(), s, cpu_ratio(c.disc_eq, c.padded_eq),
        kGoalSpeedup, verdict(s >= kGoalSpeedup));
  }
  return format("(c) B=%lld: %s: no cap at which both static and disc ran", b, verdict(false));
}

// The goals' verdicts, one line each.
std::vector<std::string> goals(const std::vector<Comparison>& cs, const Comparison& cc,
                               const Curve& cv) {
  std::vector<std::string> out;
  for (const Comparison& c : cs) out.push_back(goal_a(c));
  if (cv.unlimited.ran() && cv.at_half.ran()) {
    const double a = cv.at_half.tokens_per_s / cv.unlimited.tokens_per_s;
    out.push_back(format(
        "(a) curve B=%lld: half the peak against disc's own uncapped run: %.0f%% [%.0f%%]: %s",
        static_cast<long long>(cc.w.batch_size), 100 * a, 100 * cpu_ratio(cv.at_half, cv.unlimited),
        verdict(a >= kGoalThroughput)));
  }
  for (const Comparison& c : cs) {
    const double ratio =
        static_cast<double>(c.dynamic_f.smallest) / static_cast<double>(c.dynamic_f.lower_bound);
    out.push_back(format(
        "(b) B=%lld: smallest feasible cap %s = %.3fx the lower bound %s (goal <= %.2fx): %s",
        static_cast<long long>(c.w.batch_size), human_bytes(c.dynamic_f.smallest).c_str(), ratio,
        human_bytes(c.dynamic_f.lower_bound).c_str(), kGoalFeasible,
        verdict(ratio <= kGoalFeasible)));
  }
  for (const Comparison& c : cs) out.push_back(goal_c(c));
  return out;
}

// ----- JSON -----

json to_json(const Result& r) {
  json j = {{"ran", r.ran()}};
  if (!r.ran()) {
    j["refused"] = r.refused;
    return j;
  }
  j.update({{"live_peak_bytes", r.live_peak},
            {"reserved_peak_bytes", r.reserved_peak},
            {"peak_rss_bytes", r.peak_rss},
            {"tokens_per_s", r.tokens_per_s},
            {"cpu_tokens_per_s", r.cpu_tokens_per_s},
            {"evictions_per_step", r.evictions_per_step},
            {"recompute_share", r.recompute_share},
            {"faults_per_step", r.faults_per_step},
            {"warmup_compiles", r.warm_compiles},
            {"timed_compiles", r.timed_compiles}});
  j.update(spread_json(r.step_ms));
  return j;
}

json to_json(const Feasibility& f) {
  return {{"held_bytes", f.held},
          {"scheduled_peak_bytes", f.unplanned},
          {"lower_bound_bytes", f.lower_bound},
          {"smallest_cap_bytes", f.smallest}};
}

json run_json(const std::string& system, int64_t cap, const Result& r) {
  json j = to_json(r);
  j["system"] = system;
  j["cap_bytes"] = cap;
  return j;
}

json to_json(const Comparison& c) {
  std::vector<int64_t> seqs, padded;
  int64_t real = 0;
  for (const auto& b : c.w.dynamic) seqs.push_back(b.seq), real += b.real_tokens;
  for (const auto& b : c.w.padded) padded.push_back(b.seq);
  json runs = json::array({run_json("dynamic, no governor", 0, c.dynamic)});
  if (c.cap > 0) {
    runs.push_back(run_json("static (buckets), schedule + remat", c.cap, c.padded));
    runs.push_back(run_json("disc, schedule + remat", c.cap, c.disc));
  }
  if (c.equal_cap > 0) {
    runs.push_back(run_json("static (buckets), schedule + remat", c.equal_cap, c.padded_eq));
    runs.push_back(run_json("disc, schedule + remat", c.equal_cap, c.disc_eq));
  }
  return {{"batch", c.w.batch_size},
          {"seqs", seqs},
          {"padded_seqs", padded},
          {"real_tokens", real},
          {"half_cap_bytes", c.cap},
          {"equal_cap_bytes", c.equal_cap},
          {"disc_feasibility", to_json(c.dynamic_f)},
          {"static_feasibility", to_json(c.padded_f)},
          {"runs", runs}};
}

json report(const Options& o, const std::string& source, const std::vector<Comparison>& cs,
            const Comparison& cc, const Curve& cv, const std::vector<std::string>& verdicts) {
  json workload = llama_json(o.model);
  workload.update({{"max_len", o.max_len},
                   {"steps", o.steps},
                   {"threads", o.threads},
                   {"seed", o.seed},
                   {"data", source}});
  json j = {{"workload", workload},
            {"machine_load", machine_load()},
            {"batches", json::array()},
            {"goals", verdicts}};
  for (const Comparison& c : cs) j["batches"].push_back(to_json(c));
  json points = json::array();
  for (const auto& [cap, r] : cv.points)
    points.push_back(run_json("disc, schedule + remat", cap, r));
  for (const auto& [cap, r] : cv.static_points)
    points.push_back(run_json("static (buckets), schedule + remat", cap, r));
  j["curve"] = {{"batch", cc.w.batch_size},
                {"unoptimised_peak_bytes", cc.dynamic.live_peak},
                {"points", points}};
  return j;
}

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = std::min(s.find(',', start), s.size());
    try {
      out.push_back(std::stoll(s.substr(start, comma - start)));
    } catch (const std::exception&) {
      throw InvalidArgument("--batches `" + s +
                            "`: expected sizes separated by commas, e.g. 8,16,24");
    }
    if (out.back() < 1) throw InvalidArgument("--batches: a batch size must be >= 1");
    start = comma + 1;
  }
  return out;
}

void print_setup(const Options& o, const std::string& source) {
  std::printf("bench_memory: %s; AdamW, precision %s, cpu, %d threads\n",
              llama_line(o.model).c_str(), std::string(dtype_name(o.precision)).c_str(), o.threads);
  std::printf("data: %s, truncated at %lld; token ids random in [0, %lld) with the real lengths\n",
              source.c_str(), static_cast<long long>(o.max_len),
              static_cast<long long>(o.model.vocab));
  std::printf(
      "each run: its own trainer (same seed), a warm-up pass over its %d batches, then %d timed "
      "pass(es) over the same batches, the fastest counting\n",
      o.steps, o.repeats);
  std::printf("%s\n", machine_load().c_str());
  std::printf(
      "columns: cap = %.0f%% of the dynamic run's live peak; tokens/s = real (non-pad) target "
      "tokens per second; ratio against the first row;\n"
      "  evict = evictions per step; recompute = time regenerating / step time; faults = minor "
      "page faults per step;\n"
      "  1st visit = warm-up step minus timed step (planning, primitives, first touch); setup = "
      "the trainer's constructor;\n  peak RSS = the process's peak resident memory over the run "
      "(its trainer's, with the libraries')\n\n",
      100 * kHalf);
}

}  // namespace
}  // namespace disc::bench

int main(int argc, char** argv) {
  disc::devices::cpu::run_again_with_short_openmp_spin(argv);
  using namespace disc;
  bench::Options o;
  CLI::App app{
      "bench_memory: the memory governor's peak, throughput and feasibility on a dynamic-shape "
      "workload"};
  std::string batches = "8,16,24";
  std::string json_path;
  bool quick = false;
  app.add_option("--batches", batches, "Batch sizes, comma-separated")->capture_default_str();
  app.add_option("--steps", o.steps, "Batches per run (each run takes them twice: warm-up, timed)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--repeats", o.repeats,
                 "Timed passes per run after the warm-up; the fastest counts")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--threads", o.threads, "CPU threads (0: every hardware thread)")
      ->capture_default_str();
  app.add_option("--max-len", o.max_len, "Truncate sequences to this many tokens")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 20));
  app.add_option("--data", o.data,
                 "CodeAlpaca JSON, relative to the working directory or the source tree")
      ->capture_default_str();
  app.add_option("--curve-batch", o.curve_batch,
                 "Batch size for the tokens/s-against-cap curve (default: the first)");
  app.add_option("--seed", o.seed, "Seed for the batches and the parameters")
      ->capture_default_str();
  app.add_option("--json", json_path, "Also write the figures as JSON to this file");
  std::string precision = "f32";
  app.add_option("--precision", precision, "Every system's matmul dtype: f32 or bf16")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16"}));
  app.add_flag(
      "--quick", quick,
      "A small model (2 layers, hidden 256, vocab 1000), B=4, max-len 256: runs in seconds");
  CLI11_PARSE(app, argc, argv);
  try {
    o.precision = *parse_dtype(precision);
    if (quick) {
      o.model = {.vocab = 1000, .hidden = 256, .layers = 2, .heads = 4, .kv_heads = 4, .ffn = 688};
      if (app.count("--batches") == 0) batches = "4";
      if (app.count("--max-len") == 0) o.max_len = 256;
      if (app.count("--steps") == 0) o.steps = 2;
    }
    o.model.max_seq = o.max_len;
    std::vector<int64_t> sizes = bench::parse_list(batches);
    if (o.curve_batch == 0) o.curve_batch = sizes.front();
    if (std::find(sizes.begin(), sizes.end(), o.curve_batch) == sizes.end())
      sizes.push_back(o.curve_batch);
    std::string source;
    const auto examples = bench::load_examples(o, source);
    bench::print_setup(o, source);
    std::vector<bench::Comparison> cs;
    const double t0 = bench::now_seconds();
    for (int64_t b : sizes) cs.push_back(bench::compare(o, examples, b));
    const auto& cc = *std::find_if(cs.begin(), cs.end(),
                                   [&](const auto& c) { return c.w.batch_size == o.curve_batch; });
    if (!cc.dynamic.ran())
      throw OutOfMemory("the curve needs the unoptimised run at B=" +
                        std::to_string(o.curve_batch));
    const bench::Curve cv = bench::curve(o, cc);
    const std::vector<std::string> verdicts = bench::goals(cs, cc, cv);
    std::printf("goals (tokens/s ratios on the wall clock [in CPU time])\n");
    for (const std::string& line : verdicts) std::printf("  %s\n", line.c_str());
    if (!json_path.empty())
      bench::write_json(json_path, bench::report(o, source, cs, cc, cv, verdicts));
    std::printf("\ntotal %.0f s; %s\n", bench::now_seconds() - t0, bench::machine_load().c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_memory: %s\n", e.what());
    return 1;
  }
  return 0;
}
