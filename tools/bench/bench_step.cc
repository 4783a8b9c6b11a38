// bench_step: a training step of Llama, disc with fused JIT kernels against disc with reference
// kernels against PyTorch 1.13 eager and PyTorch 2 (eager and torch.compile), side by side in one
// run (issue 6, "Benchmarks"; issue 49, PyTorch 2 as the CPU peer).
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
//                 torch.autocast(dtype=torch.bfloat16)
//   PyTorch 2     the same script with PyTorch 2 (tools/setup.sh --bench pins it in a virtual
//                 environment; --torch2 names another), unpadded: eager f32, eager bf16 autocast
//                 with SDPA, torch.compile(dynamic=True) f32 and bf16 (autocast, SDPA). The goals'
//                 peer: a PyTorch user on a CPU today runs 2.x, not Debian's 1.13
//
// Each disc system takes a warm-up pass over the batches (compiling and planning per new shape),
// then rounds of timed passes (unfused, fused, PyTorch; unfused, fused, PyTorch; ...), so that
// noise on the shared machine hits every system; the fastest timed pass counts. Each PyTorch round
// is one run of the script per PyTorch (its own warm-up, torch.compile's included, then its timed
// passes per variant). Each PyTorch's f32 first-step losses (eager, checkpointed, torch.compile)
// must equal disc's within 1e-4 relative (same weights, same batch), else the run fails. A
// torch.compile that fails leaves its row saying why; the rest of the run goes on.
// Compile figures (fused): median compile time per kernel over the warm-up, compiles in the timed
// passes, and a fresh trainer rerunning with the same kernel cache, which must compile nothing;
// with --epoch, the same over one epoch of the CodeAlpaca sample (batch 8, truncated at 512).
//
// usage: bench_step [--quick] [--steps N] [--repeats N] [--threads N] [--seed N]
//                   [--buckets 64,128,...] [--epoch] [--data FILE] [--json FILE]
//                   [--no-torch] [--no-bf16] [--torch-repeats N] [--python PATH]
//                   [--torch2 PATH | --no-torch2] [--workdir DIR]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <bit>
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
#include "step_comparison.h"
#include "timing.h"
#include "torch_eager.h"

namespace disc::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kLr = 3e-4;
constexpr double kGoalCompileMs = 5.0;  // median compile time per kernel
// The speed goals, against disc unfused and the PyTorch peers, are step_comparison.cc's.

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
  bool bf16 = true;  // the bf16 rows: disc's, PyTorch's autocast and torch.compile bf16
  TorchRun torch_run;
  bool torch2 = true;  // the PyTorch 2 rows (with torch)
  // Unpadded only: the goals compare disc's unpadded steps; "" python: torch2_python()'s.
  TorchRun torch2_run{
      .python = "", .checkpoint = false, .padded = false, .compile = {"f32", "bf16"}};
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
            const Summary& fused, const Summary* bf16, const System& fs, const Peers& peers,
            const Compiles& c) {
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
  if (bf16) {
    j["disc_bf16"] = to_json(*bf16);
    j["ratios"]["bf16_over_fused"] = bf16->tokens_per_s / fused.tokens_per_s;
  }
  add_peers(j, unfused, fused, bf16, peers);
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

// PyTorch 2's run: --torch2's Python, else torch2_python()'s, with what its PyTorch has. nullopt,
// with `skipped` saying why, when there is none or it is switched off; throws when the Python has
// no PyTorch 2.
std::optional<TorchRun> torch2_run(const Options& o, std::string& skipped) {
  if (!o.torch || !o.torch2) {
    skipped = o.torch ? "--no-torch2" : "--no-torch";
    return std::nullopt;
  }
  TorchRun run = o.torch2_run;
  if (run.python.empty()) run.python = torch2_python(skipped);
  if (run.python.empty()) {
    std::printf("PyTorch 2 peer: none (%s)\n\n", skipped.c_str());
    return std::nullopt;
  }
  const std::string how = "; name a Python with PyTorch 2 (--torch2), or pass --no-torch2";
  TorchFeatures f;
  try {
    f = torch_features(run.python);
  } catch (const Error& e) {
    throw Error("the PyTorch 2 peer " + run.python + ": " + e.what() + how);
  }
  if (std::atoi(f.version.c_str()) < 2)
    throw InvalidArgument("the PyTorch 2 peer " + run.python + " has PyTorch " + f.version + how);
  run.sdpa = f.sdpa;
  run.autocast = o.bf16;
  if (!o.bf16) run.compile = {"f32"};
  std::printf("PyTorch 2 peer: %s, PyTorch %s\n\n", run.python.c_str(), f.version.c_str());
  return run;
}

// Adds one round of a PyTorch peer to the rounds before it.
void add_round(std::unique_ptr<TorchResult>& into, const TorchResult& round) {
  if (into)
    merge(*into, round);
  else
    into = std::make_unique<TorchResult>(round);
}

// Everything, in order; returns the exit code (1 when a cache rerun compiled).
int run(const Options& o) {
  print_setup(o);
  const auto batches =
      uniform_batches(o.model.vocab, o.steps, o.batch, o.min_len, o.max_len, o.seed);
  describe_workload(o, batches);
  Peers peers;
  const std::optional<TorchRun> torch2 = torch2_run(o, peers.torch2_skipped);
  const Workdir dir(o.workdir);
  System unfused{.name = "disc unfused", .trainer = make_trainer(o, false, "")};
  System fused{.name = "disc fused", .trainer = make_trainer(o, true, dir.path() + "/kernels")};
  System bf16{.name = "disc bf16"};
  if (o.bf16) bf16.trainer = make_trainer(o, true, dir.path() + "/kernels-bf16", DType::kBF16);
  if (o.torch)  // before any step: these are the weights both sides start from
    write_torch_workload(dir.path() + "/torch", *unfused.trainer,
                         {.batches = &batches, .model = o.model, .lr = kLr, .pad_to = o.max_len});
  const int64_t resident_before = resident_bytes();
  std::vector<System*> systems = {&unfused, &fused};
  if (o.bf16) systems.push_back(&bf16);
  run_systems(o, batches, systems, [&] {
    if (o.torch) add_round(peers.torch, run_torch(o.torch_run, dir.path() + "/torch"));
    if (torch2) add_round(peers.torch2, run_torch(*torch2, dir.path() + "/torch"));
  });
  const int64_t tokens = real_tokens(batches);
  const Summary su = summarize(unfused, tokens), sf = summarize(fused, tokens);
  const std::optional<Summary> sb = o.bf16 ? std::optional(summarize(bf16, tokens)) : std::nullopt;
  const Summary* b = sb ? &*sb : nullptr;
  print_fused_losses(unfused, fused);
  for (const TorchResult* t : {peers.torch.get(), peers.torch2.get()})
    if (t) check_peer(*t, tokens, su, sf);
  const Compiles c = measure_compiles(o, batches, dir.path());
  std::printf("\n");
  print_table(su, sf, b, peers);
  std::printf(
      "  disc's process held %.0f MiB resident before the first step (libraries, both trainers' "
      "parameters and optimizer state)\n\n",
      static_cast<double>(resident_before) / (1 << 20));
  print_ratios(su, sf, b, peers);
  std::printf("\n");
  const bool cache_ok = print_compiles(fused, sf, c);
  if (o.profile)
    for (const System* s : systems)
      s->profile.print(s->name + ", last timed pass (observed, so slower)", 60);
  if (!o.json.empty()) {
    json j = report(o, batches, su, sf, b, fused, peers, c);
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
  CLI::App app{
      "bench_step: a llama training step, disc fused vs unfused vs PyTorch 1.13 and 2 (eager, "
      "torch.compile)"};
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
  app.add_flag("--no-torch", no_torch, "Skip the PyTorch baselines (1.13 and 2)");
  bool no_bf16 = false;
  app.add_flag("--no-bf16", no_bf16,
               "Skip the bf16 rows (disc bf16, PyTorch bf16 autocast, torch.compile bf16)");
  app.add_option("--torch-repeats", o.torch_run.repeats,
                 "PyTorch's timed passes per round (one round after each of disc's), per variant")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--python", o.torch_run.python, "The Python with PyTorch 1.13")
      ->capture_default_str();
  app.add_option("--torch2", o.torch2_run.python,
                 "The Python with PyTorch 2, the peer of the goals (default: tools/setup.sh "
                 "--bench's venv, $DISC_TORCH2_VENV or ~/.cache/disc-bench/torch2, else python3 on "
                 "PATH when its torch is 2.x; without either the PyTorch 2 rows are skipped)");
  bool no_torch2 = false;
  app.add_flag("--no-torch2", no_torch2, "Skip the PyTorch 2 rows (eager and torch.compile)");
  app.add_option(
      "--workdir", o.workdir,
      "Keep the kernel caches and PyTorch's inputs here (default: a temporary folder, removed); "
      "tools/bench/torch_llama_step.py --dir DIR/torch reruns the baseline by hand");
  app.add_flag("--profile", o.profile, "Also print where each disc system's time goes, per op");
  app.add_flag("--quick", quick,
               "6 batches, 2 timed rounds: about 2 minutes, and 4 more for the PyTorch 2 rows "
               "(torch.compile compiles cold in each round)");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    if (app.count("--steps") == 0) o.steps = 6;
    if (app.count("--repeats") == 0) o.repeats = 2;
  }
  o.torch = !no_torch;
  o.bf16 = !no_bf16;
  o.torch2 = !no_torch2;
  o.torch_run.autocast = o.bf16;
  o.torch_run.threads = o.torch2_run.threads = o.threads;
  o.torch2_run.repeats = o.torch_run.repeats;
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
