// bench_step: a training step of Llama, disc with fused JIT kernels against disc with reference
// kernels against PyTorch 1.13 eager, side by side in one run (issue 6, "Benchmarks").
//
// The workload: Llama (2 layers, hidden 256, 4 heads, 4 kv heads, SwiGLU 688, vocab 1000) trained
// with AdamW in f32 on the CPU; batches of 8 sequences with lengths uniform in [32, 512] and random
// token ids (seeded), each batch padded only to its own longest row; targets are the next token.
//
//   disc unfused  TrainerOptions::jit, fuse_attention and fuse_cross_entropy false: every op runs
//                 its reference kernel (matmuls through the library GEMM), attention as matmul,
//                 mask, softmax, the head as matmul and cross_entropy
//   disc fused    all three true: JIT kernels with an on-disk kernel cache in a fresh folder,
//                 attention as one op (devices/cpu/block_attention.h), the head's matmul and
//                 cross-entropy as one op (devices/cpu/linear_cross_entropy.h)
//   disc bf16     disc fused with TrainerOptions::precision bf16 (ir/passes/autocast.cc): bf16
//                 matmuls with f32 sums; norms, softmax, attention and the loss in f32
//   PyTorch       tools/bench/torch_llama_step.py: the same model (tools/torch_reference.py), the
//                 same initial weights and batches, AdamW with disc's settings; unpadded, then
//                 every batch padded to its power-of-two bucket (at most 512); both again with
//                 activation checkpointing per layer; and unpadded under
//                 torch.autocast(dtype=torch.bfloat16), the row disc bf16 compares with
//
// Each disc system takes a warm-up pass over the batches (compiling and planning per new shape),
// then rounds of timed passes (unfused, fused, PyTorch; unfused, fused, PyTorch; ...), so that
// noise on the shared machine hits every system; the fastest timed pass counts. Each PyTorch round
// is one run of the script (its own warm-up, then its timed passes per variant). PyTorch's
// first-step loss must equal disc's within 1e-4 relative (same weights, same batch), else the run
// fails.
// Compile figures (fused): median compile time per kernel over the warm-up, compiles in the timed
// passes, and a fresh trainer rerunning with the same kernel cache, which must compile nothing;
// with --epoch, the same over one epoch of the CodeAlpaca sample (batch 8, truncated at 512).
//
// usage: bench_step [--quick] [--steps N] [--repeats N] [--threads N] [--seed N]
//                   [--buckets 64,128,...] [--epoch] [--data FILE] [--json FILE]
//                   [--no-torch] [--no-bf16] [--torch-repeats N] [--python PATH] [--workdir DIR]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "apps/data/batcher.h"
#include "apps/data/synthetic.h"
#include "apps/data/text_dataset.h"
#include "base/error.h"
#include "batches.h"
#include "devices/cpu/openmp_spin.h"
#include "engine/trainer.h"
#include "json_file.h"
#include "llama_report.h"
#include "op_profile.h"
#include "process_memory.h"
#include "timing.h"
#include "torch_eager.h"

namespace disc::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kLr = 3e-4;
constexpr double kGoalFused = 1.45;      // fused over unfused: FusionStitching's average speedup
constexpr double kGoalTorch = 2.0;       // fused disc over PyTorch eager, unpadded against unpadded
constexpr double kGoalCompileMs = 5.0;   // median compile time per kernel
constexpr double kLossTolerance = 1e-4;  // relative, as tests/engine/torch_reference_test.cc allows
// The bf16 issue's goals: disc bf16 over disc f32 (fused) and over PyTorch's bf16 autocast, in
// tokens/s; disc bf16's tracked peak over disc f32's.
constexpr double kGoalBf16OverF32 = 1.5, kGoalBf16OverTorch = 2.0, kGoalBf16Peak = 0.6;
// PyTorch eager as issue 6 measured it on this machine (real tokens/s): a sanity check of ours.
constexpr double kIssueTorchUnpadded = 10600, kIssueTorchPadded = 5400;

struct Options {
  int steps = 20;
  int repeats = 3;  // timed passes per disc system
  int threads = 2;
  uint64_t seed = 1;
  int64_t batch = 8, min_len = 32, max_len = 512;
  std::vector<int64_t> buckets;  // TrainerOptions::buckets ([]: powers of two)
  bool epoch = false;
  std::string data = "../shared/data/codealpaca/codealpaca.json";
  bool torch = true;
  bool bf16 = true;  // the disc bf16 and PyTorch bf16 autocast rows
  TorchRun torch_run;
  std::string workdir;  // "": a fresh temporary folder, removed at the end
  std::string json;
  bool profile = false;  // time per op in each disc system's last timed pass
  ir::models::LlamaConfig model{
      .vocab = 1000, .hidden = 256, .layers = 2, .heads = 4, .kv_heads = 4, .ffn = 688};
};

// ----- workload -----

int64_t real_tokens(const std::vector<data::HostBatch>& bs) {
  int64_t n = 0;
  for (const auto& b : bs) n += b.real_tokens;
  return n;
}

void describe_workload(const Options& o, const std::vector<data::HostBatch>& bs) {
  int64_t padded = 0, bucketed = 0;
  std::string seqs;
  for (const auto& b : bs) {
    padded += b.batch * b.seq;
    bucketed += b.batch * std::min<int64_t>(std::bit_ceil(static_cast<uint64_t>(b.seq)), o.max_len);
    seqs += (seqs.empty() ? "" : ",") + std::to_string(b.seq);
  }
  const auto real = static_cast<double>(real_tokens(bs));
  const auto full = static_cast<double>(bucketed);
  std::printf("batches: %zu of B=%lld, S = %s\n", bs.size(), static_cast<long long>(o.batch),
              seqs.c_str());
  std::printf(
      "  %.0f real tokens (targets that count); padding %.0f%% padded to each batch's longest, "
      "%.0f%% padded to buckets (powers of two, at most %lld)\n\n",
      real, 100.0 * (static_cast<double>(padded) - real) / static_cast<double>(padded),
      100.0 * (full - real) / full, static_cast<long long>(o.max_len));
}

// ----- disc runs -----

engine::TrainerOptions trainer_options(const Options& o, bool jit, const std::string& cache,
                                       DType precision = DType::kF32) {
  return {.threads = o.threads,
          .seed = o.seed,
          .precision = precision,
          .jit = jit,
          .fuse_attention = jit,  // unfused: no fusion of any kind
          .fuse_cross_entropy = jit,
          .buckets = o.buckets,
          .kernel_cache_dir = cache};
}

std::unique_ptr<engine::Trainer> make_trainer(const Options& o, bool jit, const std::string& cache,
                                              DType precision = DType::kF32) {
  ir::models::LlamaConfig c = o.model;
  c.max_batch = o.batch;
  c.max_seq = o.max_len;
  return std::make_unique<engine::Trainer>(ir::models::build_llama(c),
                                           trainer_options(o, jit, cache, precision));
}

// One pass over batches: its time, losses and JIT counters.
struct Pass {
  double seconds = 0;
  std::vector<double> step_ms;
  std::vector<float> losses;
  int64_t compiles = 0, cache_loads = 0, kernels_per_step = 0;
  double compile_ms = 0;
  std::vector<double> kernel_compile_ms;  // each kernel compiled: emission and code generation
  int64_t tracked_peak_bytes = 0;         // the most bytes the allocator reserved in a step
};

void add_step(Pass& p, const engine::StepResult& s, double seconds) {
  p.seconds += seconds;
  p.step_ms.push_back(seconds * 1e3);
  p.losses.push_back(s.loss);
  p.compiles += s.stats.kernel_compiles;
  p.cache_loads += s.stats.kernel_cache_loads;
  p.compile_ms += s.stats.compile_ms;
  p.kernels_per_step = std::max(p.kernels_per_step, s.stats.fused_kernels);
  p.tracked_peak_bytes = std::max(p.tracked_peak_bytes, s.stats.reserved_peak_bytes);
  p.kernel_compile_ms.insert(p.kernel_compile_ms.end(), s.stats.kernel_compile_ms.begin(),
                             s.stats.kernel_compile_ms.end());
}

// Runs the batches once; prints a progress line to stderr every `every` steps.
Pass run_pass(engine::Trainer& t, const std::vector<data::HostBatch>& batches,
              const std::string& label, size_t every = 1) {
  Pass p;
  for (size_t i = 0; i < batches.size(); ++i) {
    const engine::Batch in = to_device(batches[i], t.allocator());
    const double start = now_seconds();
    const engine::StepResult s = t.step(in, kLr);
    const double seconds = now_seconds() - start;
    add_step(p, s, seconds);
    if ((i + 1) % every == 0 || i + 1 == batches.size())
      std::fprintf(stderr, "  [%s] %zu/%zu  B=%lld S=%lld  %.0f ms  loss %.4f  compiles %lld\n",
                   label.c_str(), i + 1, batches.size(), static_cast<long long>(batches[i].batch),
                   static_cast<long long>(batches[i].seq), seconds * 1e3, s.loss,
                   static_cast<long long>(s.stats.kernel_compiles));
  }
  return p;
}

struct System {
  std::string name;
  std::unique_ptr<engine::Trainer> trainer;
  Pass warm;
  std::vector<Pass> timed;
  // Over an untimed pass, every system's cache given back first: the process's peak resident
  // memory and the most bytes this system's allocator reserved in a step.
  int64_t peak_rss_bytes = 0, tracked_peak_bytes = 0;
  OpProfile profile;  // of the last timed pass, with --profile
};

// The process's peak resident memory over one more pass of each system, after the other systems
// have given their cached blocks back and a pass has refilled this system's cache: the system's
// own steady-state memory, plus the others' parameters and optimizer state and the libraries.
// Untimed: the refilling pass faults its pages in afresh.
void measure_resident(const std::vector<data::HostBatch>& batches, std::vector<System*> systems) {
  for (System* s : systems) {
    for (System* other : systems) {
      if (other != s) other->trainer->release_cached_memory();
    }
    run_pass(*s->trainer, batches, s->name + " refill after the others' release", batches.size());
    reset_peak_resident();
    const Pass p = run_pass(*s->trainer, batches, s->name + " resident memory", batches.size());
    s->peak_rss_bytes = peak_resident_bytes();
    s->tracked_peak_bytes = p.tracked_peak_bytes;
  }
}

// Warm-up passes, then rounds of timed passes, one per system in turn, each round closed by
// `after_round` (PyTorch's passes, so that they alternate with disc's too), then a pass each for
// resident memory.
void run_systems(const Options& o, const std::vector<data::HostBatch>& batches,
                 std::vector<System*> systems, const std::function<void()>& after_round) {
  for (System* s : systems) s->warm = run_pass(*s->trainer, batches, s->name + " warm-up");
  for (int r = 1; r <= o.repeats; ++r) {
    for (System* s : systems) {
      if (o.profile && r == o.repeats) s->trainer->set_observer(s->profile.observer());
      s->timed.push_back(run_pass(*s->trainer, batches, s->name + " timed " + std::to_string(r)));
      s->trainer->set_observer({});
    }
    after_round();
  }
  measure_resident(batches, systems);
}

// What the table shows of a disc system.
struct Summary {
  double tokens_per_s = 0, slowest_tokens_per_s = 0;  // fastest and slowest timed pass
  StepSpread step_ms;                                 // over every timed step
  int64_t warm_compiles = 0, timed_compiles = 0, timed_cache_loads = 0;
  double first_loss = 0;
  int64_t tracked_peak_bytes = 0, peak_rss_bytes = 0;  // System's, over its memory pass
};

Summary summarize(const System& s, int64_t tokens) {
  Summary r{.warm_compiles = s.warm.compiles,
            .first_loss = s.warm.losses.front(),
            .tracked_peak_bytes = s.tracked_peak_bytes,
            .peak_rss_bytes = s.peak_rss_bytes};
  std::vector<double> steps;
  double fastest = 1e300, slowest = 0;
  for (const Pass& p : s.timed) {
    fastest = std::min(fastest, p.seconds);
    slowest = std::max(slowest, p.seconds);
    steps.insert(steps.end(), p.step_ms.begin(), p.step_ms.end());
    r.timed_compiles += p.compiles;
    r.timed_cache_loads += p.cache_loads;
  }
  r.tokens_per_s = static_cast<double>(tokens) / fastest;
  r.slowest_tokens_per_s = static_cast<double>(tokens) / slowest;
  r.step_ms = step_spread(steps);
  return r;
}

// ----- the PyTorch baseline's first-step loss against disc's -----

double relative(double a, double b) {
  return std::abs(a - b) / std::max(std::abs(b), 1e-30);
}

// Throws when PyTorch's first-step loss is not disc's: the two would not be training one model.
void check_first_loss(const TorchResult& t, const Summary& unfused, const Summary& fused) {
  const double du = relative(t.first_loss, unfused.first_loss);
  const double df = relative(t.first_loss, fused.first_loss);
  // Checkpointing recomputes the same forward pass: its loss is PyTorch's own.
  const double dc = t.checkpointed ? relative(t.checkpointed_first_loss, t.first_loss) : 0;
  const bool ok = du <= kLossTolerance && df <= kLossTolerance && dc <= kLossTolerance;
  std::printf(
      "first-step loss (batch 1, initial weights): PyTorch %.7f, disc unfused %.7f (rel. diff "
      "%.1e), disc fused %.7f (%.1e), PyTorch checkpointed (%.1e); tolerance %.0e: %s\n",
      t.first_loss, unfused.first_loss, du, fused.first_loss, df, dc, kLossTolerance,
      ok ? "match" : "MISMATCH");
  if (!ok)
    throw Error(
        "PyTorch's first-step loss differs from disc's beyond 1e-4 relative on the same weights "
        "and batch: the two sides are not training the same model (compare "
        "tools/torch_reference.py's llama with ir/models/llama.cc, and run "
        "tests/engine/torch_reference_test)");
}

// Fused kernels may round differently from the reference ones, but must train the same model;
// the JIT's own tests hold the tolerance, this line shows what the benchmark saw.
void print_fused_losses(const System& unfused, const System& fused) {
  const auto& a = unfused.warm.losses;
  const auto& b = fused.warm.losses;
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, relative(b[i], a[i]));
  if (worst == 0)
    std::printf("warm-up losses, fused vs unfused: identical on all %zu steps\n", a.size());
  else
    std::printf(
        "warm-up losses, fused vs unfused: largest relative difference %.1e over %zu steps\n",
        worst, a.size());
}

// ----- compile figures -----

// The bucket a dim falls in: with boundaries, the index of the first boundary >= v (one past the
// last above them all); without, the power of two at or above v.
int64_t bucket_of(int64_t v, const std::vector<int64_t>& boundaries) {
  if (boundaries.empty()) return std::bit_width(static_cast<uint64_t>(v - 1));
  return std::lower_bound(boundaries.begin(), boundaries.end(), v) - boundaries.begin();
}

// A fresh fused trainer over batches, with a kernel cache: what it compiled and loaded.
struct CacheRun {
  int64_t steps = 0, shapes = 0, buckets = 0;  // distinct (B, S) and distinct (B, S) buckets
  Pass pass;
};

CacheRun run_cached(const Options& o, const std::vector<data::HostBatch>& batches,
                    const std::string& cache, const std::string& label) {
  std::set<std::pair<int64_t, int64_t>> shapes, buckets;
  for (const auto& b : batches) {
    shapes.insert({b.batch, b.seq});
    buckets.insert({bucket_of(b.batch, o.buckets), bucket_of(b.seq, o.buckets)});
  }
  auto t = make_trainer(o, /*jit=*/true, cache);
  const size_t every = std::max<size_t>(1, batches.size() / 10);
  return {.steps = static_cast<int64_t>(batches.size()),
          .shapes = static_cast<int64_t>(shapes.size()),
          .buckets = static_cast<int64_t>(buckets.size()),
          .pass = run_pass(*t, batches, label, every)};
}

// One epoch of CodeAlpaca as the batcher gives it (byte tokens, truncated at max_len).
std::vector<data::HostBatch> epoch_batches(const Options& o, const std::string& path) {
  const auto examples =
      data::load_text_dataset({.path = path, .format = "json", .max_len = o.max_len});
  data::Batcher batcher(examples, {.batch_size = o.batch, .seed = o.seed});
  std::vector<data::HostBatch> out((batcher.sequences() + o.batch - 1) / o.batch);
  for (auto& b : out) b = batcher.next();  // the last batch may be smaller
  return out;
}

struct Compiles {
  std::string cache_over;  // what the cache rerun ran over
  CacheRun rerun;          // a fresh trainer with the fused system's cache, over the same batches
  std::string epoch_skipped;  // why there are no epoch figures ("" when there are)
  CacheRun epoch, epoch_rerun;
};

// With --epoch and the file: an epoch with a fresh cache, then again with that cache. Otherwise
// a fresh trainer with the fused system's cache over the benchmark's batches.
Compiles measure_compiles(const Options& o, const std::vector<data::HostBatch>& batches,
                          const std::string& workdir) {
  Compiles c;
  const std::string path = o.epoch ? find_data_file(o.data) : "";
  if (!o.epoch)
    c.epoch_skipped = "not run (pass --epoch)";
  else if (path.empty())
    c.epoch_skipped = "skipped: " + o.data + " not found";
  if (!c.epoch_skipped.empty()) {
    c.cache_over = "the benchmark's " + std::to_string(batches.size()) + " batches";
    c.rerun = run_cached(o, batches, workdir + "/kernels", "fused, from the kernel cache");
    return c;
  }
  const auto epoch = epoch_batches(o, path);
  const std::string cache = workdir + "/epoch-kernels";
  c.cache_over = "one CodeAlpaca epoch (" + path + ")";
  c.epoch = run_cached(o, epoch, cache, "epoch, fresh cache");
  c.epoch_rerun = run_cached(o, epoch, cache, "epoch, from the kernel cache");
  c.rerun = c.epoch_rerun;
  return c;
}

// ----- printing -----

// The OpenMP spin every system here runs with (the PyTorch child inherits it): see openmp_spin.h.
std::string openmp_spin() {
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  return spin != nullptr ? spin : "unset (libgomp's default)";
}

void print_setup(const Options& o) {
  std::printf(
      "bench_step: %s; AdamW (lr %g), f32, cpu, %d threads; GOMP_SPINCOUNT=%s for disc and "
      "PyTorch alike\n",
      llama_line(o.model).c_str(), kLr, o.threads, openmp_spin().c_str());
  std::printf(
      "each disc system: a warm-up pass, then %d timed passes alternating with the other's; "
      "the fastest counts\n%s\n",
      o.repeats, machine_load().c_str());
}

std::string mib(int64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.0f", static_cast<double>(bytes) / (1 << 20));
  return s;
}

// One table row: tokens/s of the fastest pass, slowest..fastest, step ms median (spread), peak
// memory (tracked / resident MiB).
void print_row(const std::string& name, double tps, double slowest, double median,
               const std::string& spread, const std::string& memory, const std::string& compiles) {
  char passes[48], step[64];
  std::snprintf(passes, sizeof passes, "%.0f..%.0f", slowest, tps);
  std::snprintf(step, sizeof step, "%.1f %s", median, spread.c_str());
  std::printf("  %-54s %9.0f  %-14s %-22s %-12s %s\n", name.c_str(), tps, passes, step,
              memory.c_str(), compiles.c_str());
}

void print_disc_row(const char* name, const Summary& s) {
  char spread[48];
  std::snprintf(spread, sizeof spread, "(%.0f..%.0f)", s.step_ms.p10, s.step_ms.p90);
  print_row(name, s.tokens_per_s, s.slowest_tokens_per_s, s.step_ms.median, spread,
            mib(s.tracked_peak_bytes) + " / " + mib(s.peak_rss_bytes),
            std::to_string(s.warm_compiles) + " / " + std::to_string(s.timed_compiles));
}

void print_torch_row(const std::string& name, const TorchTiming& t) {
  const auto& p = t.passes_tokens_per_s;
  char spread[48];
  std::snprintf(spread, sizeof spread, "(%.0f..%.0f)", percentile(t.step_ms, 0.1),
                percentile(t.step_ms, 0.9));
  print_row(name, t.tokens_per_s, *std::min_element(p.begin(), p.end()), t.step_ms_median, spread,
            "- / " + mib(t.peak_rss_bytes), "-");
}

void print_table(const Summary& unfused, const Summary& fused, const Summary* bf16,
                 const TorchResult* torch) {
  std::printf("  %-54s %9s  %-14s %-22s %-12s %s\n", "system", "tokens/s", "passes",
              "step ms (p10..p90)", "peak MiB", "compiles warm-up / timed");
  print_disc_row("disc unfused (jit, attention, cross_entropy off)", unfused);
  print_disc_row("disc fused (jit, attention, cross_entropy on)", fused);
  if (bf16) print_disc_row("disc fused bf16 (precision bf16)", *bf16);
  if (torch) {
    const std::string padded = ", padded to buckets <= " + std::to_string(torch->padded_to);
    print_torch_row("PyTorch " + torch->version + " eager", torch->unpadded);
    if (torch->padded_to > 0) print_torch_row("PyTorch eager" + padded, torch->padded);
    if (torch->checkpointed) {
      print_torch_row("PyTorch eager, checkpointed", torch->checkpointed_unpadded);
      if (torch->padded_to > 0)
        print_torch_row("PyTorch eager, checkpointed" + padded, torch->checkpointed_padded);
    }
    if (const TorchVariant* a = torch->find("autocast"))
      print_torch_row("PyTorch eager, bf16 autocast", a->unpadded);
  }
  std::printf(
      "  tokens/s: real (non-padding) target tokens over the fastest timed pass's seconds; passes: "
      "tokens/s of the slowest..fastest pass;\n  step ms: median over every timed step "
      "(10th..90th percentile; steps differ in S); checkpointed: activation checkpointing per "
      "layer;\n  peak MiB: the most bytes disc's allocator reserved in a step (tracked) / the "
      "process's peak resident memory (RSS), over an\n  untimed pass after the other disc system "
      "gave its cache back; PyTorch's RSS over its timed passes (its own process)\n");
}

void print_ratios(const Summary& unfused, const Summary& fused, const TorchResult* torch) {
  const double f = fused.tokens_per_s / unfused.tokens_per_s;
  std::printf("ratios (tokens/s, same batches, same run; the machine is shared, see the load)\n");
  std::printf("  disc fused / disc unfused:          %5.2fx (goal >= %.2fx): %s\n", f, kGoalFused,
              verdict(f >= kGoalFused));
  if (!torch) return;
  const double t = fused.tokens_per_s / torch->unpadded.tokens_per_s;
  std::printf("  disc fused / PyTorch eager:         %5.2fx (goal >= %.1fx, unpadded both): %s\n",
              t, kGoalTorch, verdict(t >= kGoalTorch));
  std::printf("  disc unfused / PyTorch eager:       %5.2fx\n",
              unfused.tokens_per_s / torch->unpadded.tokens_per_s);
  if (torch->padded_to > 0)
    std::printf("  disc fused / PyTorch padded to buckets <= %lld: %5.2fx\n",
                static_cast<long long>(torch->padded_to),
                fused.tokens_per_s / torch->padded.tokens_per_s);
  std::printf(
      "  PyTorch here against issue 6's measurement: %.0f vs %.0f tokens/s unpadded, %.0f vs %.0f "
      "padded\n",
      torch->unpadded.tokens_per_s, kIssueTorchUnpadded, torch->padded.tokens_per_s,
      kIssueTorchPadded);
}

// disc bf16 against disc f32 and PyTorch's bf16 autocast, and their first-step losses (each
// rounds its own way: a comparison, not a check).
void print_bf16_ratios(const Summary& fused, const Summary& bf16, const TorchResult* torch) {
  const double speed = bf16.tokens_per_s / fused.tokens_per_s;
  const double peak =
      static_cast<double>(bf16.tracked_peak_bytes) / static_cast<double>(fused.tracked_peak_bytes);
  std::printf("  disc bf16 / disc fused f32:         %5.2fx (goal >= %.1fx): %s\n", speed,
              kGoalBf16OverF32, verdict(speed >= kGoalBf16OverF32));
  std::printf("  disc bf16 tracked peak / f32's:     %5.2fx (goal <= %.1fx): %s\n", peak,
              kGoalBf16Peak, verdict(peak <= kGoalBf16Peak));
  const TorchVariant* autocast = torch ? torch->find("autocast") : nullptr;
  if (!autocast) return;
  const double t = bf16.tokens_per_s / autocast->unpadded.tokens_per_s;
  std::printf("  disc bf16 / PyTorch bf16 autocast:  %5.2fx (goal >= %.1fx): %s\n", t,
              kGoalBf16OverTorch, verdict(t >= kGoalBf16OverTorch));
  std::printf(
      "  first-step loss in bf16: disc %.7f, PyTorch autocast %.7f (rel. diff %.1e; f32: %.7f)\n",
      bf16.first_loss, autocast->first_loss, relative(bf16.first_loss, autocast->first_loss),
      fused.first_loss);
}

// "ok" when a cache rerun compiled nothing.
bool print_cache_rerun(const std::string& over, const CacheRun& r) {
  const bool ok = r.pass.compiles == 0;
  std::printf(
      "  second run from the disk cache (a fresh trainer, the same kernel_cache_dir) over %s: "
      "%lld compiles, %lld cache loads: %s\n",
      over.c_str(), static_cast<long long>(r.pass.compiles),
      static_cast<long long>(r.pass.cache_loads), ok ? "ok" : "FAIL (must be 0)");
  return ok;
}

void print_epoch(const Compiles& c) {
  if (!c.epoch_skipped.empty()) {
    std::printf("  CodeAlpaca epoch: %s\n", c.epoch_skipped.c_str());
    return;
  }
  const CacheRun& e = c.epoch;
  const int64_t bound = e.buckets * e.pass.kernels_per_step;
  std::printf(
      "  CodeAlpaca epoch: %lld steps, %lld distinct shapes (B, S) in %lld buckets; %lld compiles "
      "in %.0f ms (goal <= buckets x kernels per step = %lld x %lld = %lld: %s; a static-shape "
      "compiler: %lld x %lld)\n",
      static_cast<long long>(e.steps), static_cast<long long>(e.shapes),
      static_cast<long long>(e.buckets), static_cast<long long>(e.pass.compiles), e.pass.compile_ms,
      static_cast<long long>(e.buckets), static_cast<long long>(e.pass.kernels_per_step),
      static_cast<long long>(bound), verdict(e.pass.compiles <= bound),
      static_cast<long long>(e.shapes), static_cast<long long>(e.pass.kernels_per_step));
}

// Returns false when a cache rerun compiled something.
bool print_compiles(const System& fused, const Summary& s, const Compiles& c) {
  std::printf("compiles (disc fused)\n");
  const Pass& w = fused.warm;
  if (w.compiles == 0) {
    std::printf(
        "  warm-up: no kernel compiled (from an empty cache?); median per kernel: not measured\n");
  } else {
    const std::vector<double>& ms = w.kernel_compile_ms;
    const double median = percentile(ms, 0.5);
    std::printf(
        "  warm-up: %lld kernels compiled in %.0f ms, %lld loaded from the cache; per kernel: "
        "median "
        "%.2f ms (goal <= %.0f ms): %s; 90th percentile %.2f ms, longest %.2f ms\n",
        static_cast<long long>(w.compiles), w.compile_ms, static_cast<long long>(w.cache_loads),
        median, kGoalCompileMs, verdict(median <= kGoalCompileMs), percentile(ms, 0.9),
        percentile(ms, 1.0));
  }
  std::printf("  timed passes: %lld compiles (expected 0: the warm-up saw every shape)\n",
              static_cast<long long>(s.timed_compiles));
  print_epoch(c);
  return print_cache_rerun(c.cache_over, c.rerun);
}

// ----- JSON -----

json to_json(const Summary& s) {
  json j = {{"tokens_per_s", s.tokens_per_s},
            {"slowest_pass_tokens_per_s", s.slowest_tokens_per_s},
            {"warmup_compiles", s.warm_compiles},
            {"timed_compiles", s.timed_compiles},
            {"timed_cache_loads", s.timed_cache_loads},
            {"first_loss", s.first_loss},
            {"tracked_peak_bytes", s.tracked_peak_bytes},
            {"peak_rss_bytes", s.peak_rss_bytes}};
  j.update(spread_json(s.step_ms));
  return j;
}

json to_json(const TorchTiming& t) {
  return {{"tokens_per_s", t.tokens_per_s},
          {"passes_tokens_per_s", t.passes_tokens_per_s},
          {"step_ms_median", t.step_ms_median},
          {"step_ms_p10", percentile(t.step_ms, 0.1)},
          {"step_ms_p90", percentile(t.step_ms, 0.9)},
          {"peak_rss_bytes", t.peak_rss_bytes}};
}

json to_json(const CacheRun& r) {
  return {{"steps", r.steps},
          {"distinct_shapes", r.shapes},
          {"buckets", r.buckets},
          {"compiles", r.pass.compiles},
          {"cache_loads", r.pass.cache_loads},
          {"compile_ms", r.pass.compile_ms},
          {"kernels_per_step", r.pass.kernels_per_step}};
}

json report(const Options& o, const std::vector<data::HostBatch>& batches, const Summary& unfused,
            const Summary& fused, const System& fs, const TorchResult* torch, const Compiles& c) {
  std::vector<int64_t> seqs;
  for (const auto& b : batches) seqs.push_back(b.seq);
  json workload = llama_json(o.model);
  workload.update({{"batch", o.batch},
                   {"min_len", o.min_len},
                   {"max_len", o.max_len},
                   {"seqs", seqs},
                   {"real_tokens", real_tokens(batches)},
                   {"threads", o.threads},
                   {"gomp_spincount", openmp_spin()},
                   {"seed", o.seed},
                   {"repeats", o.repeats},
                   {"lr", kLr}});
  json j = {{"workload", workload},
            {"machine_load", machine_load()},
            {"disc_unfused", to_json(unfused)},
            {"disc_fused", to_json(fused)},
            {"ratios", {{"fused_over_unfused", fused.tokens_per_s / unfused.tokens_per_s}}}};
  j["compiles"] = {{"warmup", fs.warm.compiles},
                   {"warmup_compile_ms", fs.warm.compile_ms},
                   {"median_ms_per_kernel", percentile(fs.warm.kernel_compile_ms, 0.5)},
                   {"kernel_compile_ms", fs.warm.kernel_compile_ms},
                   {"cache_rerun_over", c.cache_over},
                   {"cache_rerun", to_json(c.rerun)},
                   {"cache_rerun_ok", c.rerun.pass.compiles == 0}};
  if (c.epoch_skipped.empty())
    j["compiles"]["epoch"] = to_json(c.epoch);
  else
    j["compiles"]["epoch_skipped"] = c.epoch_skipped;
  if (torch) {
    j["torch"] = {{"version", torch->version},       {"threads", torch->threads},
                  {"first_loss", torch->first_loss}, {"unpadded", to_json(torch->unpadded)},
                  {"padded_to", torch->padded_to},   {"padded", to_json(torch->padded)}};
    if (torch->checkpointed) {
      j["torch"]["checkpointed"] = {{"first_loss", torch->checkpointed_first_loss},
                                    {"unpadded", to_json(torch->checkpointed_unpadded)},
                                    {"padded", to_json(torch->checkpointed_padded)}};
    }
    j["ratios"]["fused_over_torch"] = fused.tokens_per_s / torch->unpadded.tokens_per_s;
    j["ratios"]["unfused_over_torch"] = unfused.tokens_per_s / torch->unpadded.tokens_per_s;
    j["ratios"]["fused_over_torch_padded"] = fused.tokens_per_s / torch->padded.tokens_per_s;
  }
  return j;
}

// ----- the run -----

// The folder for the kernel caches and PyTorch's inputs: --workdir (kept, its caches cleared so
// that the warm-up compiles from scratch), or a fresh temporary one (removed by the destructor).
class Workdir {
 public:
  explicit Workdir(const std::string& given) : keep_(!given.empty()) {
    if (keep_) {
      path_ = given;
      fs::remove_all(path_ + "/kernels");
      fs::remove_all(path_ + "/epoch-kernels");
      fs::create_directories(path_);
    } else {
      std::string tmpl = (fs::temp_directory_path() / "bench_step.XXXXXX").string();
      if (!mkdtemp(tmpl.data())) throw IoError("cannot create a folder under " + tmpl);
      path_ = tmpl;
    }
  }
  Workdir(const Workdir&) = delete;
  Workdir& operator=(const Workdir&) = delete;
  ~Workdir() {
    std::error_code ec;
    if (!keep_) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  bool keep_;
  std::string path_;
};

// Everything, in order; returns the exit code (1 when a cache rerun compiled).
int run(const Options& o) {
  print_setup(o);
  const auto batches =
      uniform_batches(o.model.vocab, o.steps, o.batch, o.min_len, o.max_len, o.seed);
  describe_workload(o, batches);
  const Workdir dir(o.workdir);
  System unfused{.name = "disc unfused", .trainer = make_trainer(o, false, "")};
  System fused{.name = "disc fused", .trainer = make_trainer(o, true, dir.path() + "/kernels")};
  System bf16{.name = "disc bf16"};
  if (o.bf16) bf16.trainer = make_trainer(o, true, dir.path() + "/kernels-bf16", DType::kBF16);
  if (o.torch)  // before any step: these are the weights both sides start from
    write_torch_workload(dir.path() + "/torch", *unfused.trainer,
                         {.batches = &batches, .model = o.model, .lr = kLr, .pad_to = o.max_len});
  const int64_t resident_before = resident_bytes();
  std::unique_ptr<TorchResult> torch;
  std::vector<System*> systems = {&unfused, &fused};
  if (o.bf16) systems.push_back(&bf16);
  run_systems(o, batches, systems, [&] {
    if (!o.torch) return;
    const TorchResult round = run_torch(o.torch_run, dir.path() + "/torch");
    if (torch) {
      merge(*torch, round);
    } else {
      torch = std::make_unique<TorchResult>(round);
    }
  });
  const int64_t tokens = real_tokens(batches);
  const Summary su = summarize(unfused, tokens), sf = summarize(fused, tokens);
  const std::optional<Summary> sb = o.bf16 ? std::optional(summarize(bf16, tokens)) : std::nullopt;
  print_fused_losses(unfused, fused);
  if (torch) {
    if (torch->real_tokens != tokens)
      throw Error("the PyTorch baseline counted " + std::to_string(torch->real_tokens) +
                  " real tokens per pass, disc " + std::to_string(tokens) +
                  ": the two did not read the same batches");
    check_first_loss(*torch, su, sf);
  }
  const Compiles c = measure_compiles(o, batches, dir.path());
  std::printf("\n");
  print_table(su, sf, sb ? &*sb : nullptr, torch.get());
  std::printf(
      "  disc's process held %.0f MiB resident before the first step (libraries, both trainers' "
      "parameters and optimizer state)\n\n",
      static_cast<double>(resident_before) / (1 << 20));
  print_ratios(su, sf, torch.get());
  if (sb) print_bf16_ratios(sf, *sb, torch.get());
  std::printf("\n");
  const bool cache_ok = print_compiles(fused, sf, c);
  if (o.profile)
    for (const System* s : systems)
      s->profile.print(s->name + ", last timed pass (observed, so slower)", 60);
  if (!o.json.empty()) {
    json j = report(o, batches, su, sf, fused, torch.get(), c);
    if (sb) {
      j["disc_bf16"] = to_json(*sb);
      j["ratios"]["bf16_over_fused"] = sb->tokens_per_s / sf.tokens_per_s;
      if (const TorchVariant* a = torch ? torch->find("autocast") : nullptr) {
        j["torch"]["autocast"] = {{"first_loss", a->first_loss},
                                  {"unpadded", to_json(a->unpadded)}};
        j["ratios"]["bf16_over_torch_autocast"] = sb->tokens_per_s / a->unpadded.tokens_per_s;
      }
    }
    j["resident_before_first_step_bytes"] = resident_before;
    write_json(o.json, j);
  }
  std::printf("\n%s\n", machine_load().c_str());
  return cache_ok ? 0 : 1;
}

}  // namespace
}  // namespace disc::bench

int main(int argc, char** argv) {
  disc::devices::cpu::run_again_with_short_openmp_spin(argv);
  using namespace disc;
  bench::Options o;
  CLI::App app{"bench_step: a llama training step, disc fused vs unfused vs PyTorch eager"};
  bool quick = false, no_torch = false;
  app.add_option("--steps", o.steps, "Batches per pass")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app.add_option("--repeats", o.repeats,
                 "Timed passes per disc system, alternating; the fastest counts")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--threads", o.threads, "CPU threads, for disc and PyTorch")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--seed", o.seed, "Seed for the batches and the weights")->capture_default_str();
  app.add_option("--buckets", o.buckets,
                 "Shape-bucket boundaries, e.g. 64,128,256,512 (default: powers of two)")
      ->delimiter(',');
  app.add_flag("--epoch", o.epoch,
               "Also count compiles over one epoch of CodeAlpaca, then again from the cache");
  app.add_option(
         "--data", o.data,
         "CodeAlpaca JSON for --epoch, relative to the working directory or the source tree")
      ->capture_default_str();
  app.add_option("--json", o.json, "Also write the figures as JSON to this file");
  app.add_flag("--no-torch", no_torch, "Skip the PyTorch eager baseline");
  bool no_bf16 = false;
  app.add_flag("--no-bf16", no_bf16, "Skip the disc bf16 and PyTorch bf16 autocast rows");
  app.add_option("--torch-repeats", o.torch_run.repeats,
                 "PyTorch's timed passes per round (one round after each of disc's), per variant")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--python", o.torch_run.python, "The Python with PyTorch 1.13")
      ->capture_default_str();
  app.add_option(
      "--workdir", o.workdir,
      "Keep the kernel caches and PyTorch's inputs here (default: a temporary folder, removed); "
      "tools/bench/torch_llama_step.py --dir DIR/torch reruns the baseline by hand");
  app.add_flag("--profile", o.profile, "Also print where each disc system's time goes, per op");
  app.add_flag("--quick", quick, "6 batches, 2 timed rounds: about a minute");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    if (app.count("--steps") == 0) o.steps = 6;
    if (app.count("--repeats") == 0) o.repeats = 2;
  }
  o.torch = !no_torch;
  o.bf16 = !no_bf16;
  o.torch_run.autocast = o.bf16;
  o.torch_run.threads = o.threads;
  std::sort(o.buckets.begin(), o.buckets.end());
  try {
    return bench::run(o);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_step: %s\n", e.what());
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    std::fprintf(stderr, "bench_step: %s\n", e.what());
    return 1;
  }
}
