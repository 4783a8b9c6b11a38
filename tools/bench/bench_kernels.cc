// bench_kernels: the memory-bound kernels of a training step, fused and compiled by the JIT against
// the reference kernels they replace, as achieved bandwidth beside a STREAM triad measured in the
// same run (issue 6's goal: fused kernels at >= 70% of triad).
//
// Each pattern is a small graph (text below) run through the engine's executor twice on the same
// random inputs: unfused (every op its reference kernel) and fused (the fusion planner's groups as
// JIT kernels from the kernel cache, compiled during the warm-up run). Bandwidth counts the bytes
// the pattern must move, each argument read once and each output written once, over the fastest
// of --repeats runs; fused outputs are checked against the reference ones.
//
// usage: bench_kernels [--threads N] [--repeats N] [--scale F]
// With DISC_BENCH_CACHE=DIR the compiled kernels are kept in DIR (the kernel cache's files: a
// header, then an ELF object objdump -d reads) to look at their machine code.
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "engine/executor.h"
#include "engine/trainer.h"
#include "ir/text_format.h"
#include "jit/cpu/kernel_cache.h"
#include "jit/cpu/target.h"
#include "jit/fusion/fused_op.h"
#include "jit/fusion/fusion.h"
#include "json_file.h"
#include "memory/caching_allocator.h"
#include "timing.h"

namespace disc::bench {
namespace {

constexpr double kGoal = 0.70;  // of triad

struct Options {
  int threads = 2;
  int repeats = 10;
  double scale = 1.0;  // multiplies the row counts (0.25: a quick look)
  std::string json;    // also write the figures here
};

// One pattern: a graph over symbol R (rows), and R's value for the run.
struct Pattern {
  const char* name;
  const char* graph;
  int64_t rows;
};

// Sizes: every tensor 32..128 MiB, well past the caches, as in a training step's activations.
const Pattern kPatterns[] = {
    {"RMSNorm + residual [R, 1024]", R"(graph @rmsnorm {
  sym R in [1, 65536]
  input %x : f32[R, 1024]
  input %r : f32[R, 1024]
  param %w : f32[1024]
  %h = add(%x, %r) : f32[R, 1024]
  %n = rms_norm(%h, %w) {eps = 1e-05} : f32[R, 1024]
  output h = %h
  output n = %n
})",
     16384},
    {"softmax over rows [R, S=512]", R"(graph @softmax {
  sym R in [1, 65536]
  sym S in [1, 1024]
  input %x : f32[R, S]
  %p = softmax(%x) : f32[R, S]
  output p = %p
})",
     32768},
    {"causal softmax [R, S, S]", R"(graph @causal_softmax {
  sym R in [1, 65536]
  sym S in [1, 1024]
  input %x : f32[R, S, S]
  %m = causal_mask(%x) : f32[R, S, S]
  %p = softmax(%m) : f32[R, S, S]
  output p = %p
})",
     64},
    {"causal softmax grad [R, S, S]", R"(graph @causal_softmax_grad {
  sym R in [1, 65536]
  sym S in [1, 1024]
  input %y : f32[R, S, S]
  input %dy : f32[R, S, S]
  %g = softmax_grad(%y, %dy) : f32[R, S, S]
  %dx = causal_mask(%g) {value = 0.0} : f32[R, S, S]
  output dx = %dx
})",
     64},
    {"SwiGLU silu(g) * u [R, 688]", R"(graph @swiglu {
  sym R in [1, 65536]
  input %g : f32[R, 688]
  input %u : f32[R, 688]
  %s = silu(%g) : f32[R, 688]
  %a = mul(%s, %u) : f32[R, 688]
  output a = %a
})",
     32768},
    // The same in bf16 as a bf16 step runs it: each element loaded as bf16, silu rounded to bf16,
    // the product rounded again (the conversions are integer vector instructions).
    {"SwiGLU in bf16 [R, 688]", R"(graph @swiglu_bf16 {
  sym R in [1, 65536]
  input %g : bf16[R, 688]
  input %u : bf16[R, 688]
  %s = silu(%g) : bf16[R, 688]
  %a = mul(%s, %u) : bf16[R, 688]
  output a = %a
})",
     32768},
    {"AdamW update [R, 1024]", R"(graph @adamw {
  sym R in [1, 65536]
  param %p : f32[R, 1024]
  input %g : f32[R, 1024]
  param %m : f32[R, 1024]
  param %v : f32[R, 1024]
  input %lr : f32[]
  input %step : i64[]
  %p2, %m2, %v2 = adamw_update(%p, %g, %m, %v, %lr, %step) : f32[R, 1024], f32[R, 1024], f32[R, 1024]
  output p = %p2
  output m = %m2
  output v = %v2
})",
     8192},
    {"cross-entropy [R, 32000]", R"(graph @xent {
  sym R in [1, 65536]
  input %logits : f32[R, 32000]
  input %labels : i32[R]
  %loss = cross_entropy(%logits, %labels) : f32[]
  output loss = %loss
})",
     1024},
};

// ----- STREAM triad -----

// a = b + s * c over `n` floats per array, rows spread over TBB's threads; run() times one pass
// and best_gbs() is the fastest so far (three arrays of 4-byte elements cross memory per element).
class Triad {
 public:
  explicit Triad(int64_t n) : a_(n), b_(n, 1.0f), c_(n, 2.0f) { pass(); }  // faults the pages in

  void run() {
    const double start = now_seconds();
    pass();
    best_ = std::min(best_, now_seconds() - start);
  }
  double best_gbs() const { return 3.0 * 4.0 * static_cast<double>(a_.size()) / best_ / 1e9; }

 private:
  void pass() {
    const float s = 3.0f;
    tbb::parallel_for(tbb::blocked_range<size_t>(0, a_.size(), 1 << 16),
                      [&](const tbb::blocked_range<size_t>& k) {
                        for (size_t i = k.begin(); i < k.end(); ++i) a_[i] = b_[i] + s * c_[i];
                      });
    if (a_[a_.size() / 2] != 7.0f) throw Error("triad computed a wrong value");
  }

  std::vector<float> a_, b_, c_;
  double best_ = 1e30;
};

// ----- patterns -----

engine::Tensor random_tensor(const ir::Value& v, const ir::Bindings& b, std::mt19937_64& rng,
                             memory::Allocator& alloc) {
  std::vector<int64_t> shape;
  for (const ir::DimExpr& d : v.shape()) shape.push_back(d.evaluate(b));
  engine::Tensor t = engine::Tensor::empty(v.dtype(), shape, alloc);
  std::uniform_real_distribution<float> u(-2, 2);
  if (v.dtype() == DType::kF32) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  } else if (v.dtype() == DType::kBF16) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<uint16_t>()[i] = f32_to_bf16(u(rng));
  } else if (v.dtype() == DType::kI32) {  // labels: columns of the logits
    const int64_t classes = v.shape().empty() ? 1 : 32000;
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<int32_t>()[i] = static_cast<int32_t>(rng() % classes);
  } else if (v.dtype() == DType::kI64) {  // the optimizer's step
    for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = 3;
  } else {
    throw Error("bench_kernels: no random values for " + std::string(dtype_name(v.dtype())));
  }
  return t;
}

struct Timing {
  double seconds = 0;  // fastest run
  std::map<std::string, engine::Tensor> outputs;
  int64_t kernels = 0;  // fused kernels per run
};

// The fastest of `repeats` runs after a warm-up; `between` (untimed here) runs before each.
Timing time_runs(
    engine::Executor& ex, std::map<std::string, engine::Tensor> args, int repeats,
    const std::function<void()>& between = [] {}) {
  Timing t{.seconds = 1e30};
  engine::StepStats stats;
  t.outputs = ex.run(args, &stats);  // warm-up: compiles, plans, faults pages in
  t.kernels = stats.fused_kernels;
  for (int r = 0; r < repeats; ++r) {
    between();
    const double start = now_seconds();
    ex.run(args);
    t.seconds = std::min(t.seconds, now_seconds() - start);
  }
  return t;
}

// An f32 or bf16 tensor's values as f32.
std::vector<float> floats(const engine::Tensor& t) {
  if (t.dtype() != DType::kBF16) return t.to_vector<float>();
  std::vector<float> v;
  for (uint16_t bits : t.to_vector<uint16_t>()) v.push_back(bf16_to_f32(bits));
  return v;
}

double max_rel_diff(const std::map<std::string, engine::Tensor>& a,
                    const std::map<std::string, engine::Tensor>& b) {
  double worst = 0;
  for (const auto& [name, t] : a) {
    const std::vector<float> x = floats(t), y = floats(b.at(name));
    for (size_t i = 0; i < x.size(); ++i)
      worst =
          std::max(worst, std::abs(double(x[i]) - y[i]) / std::max(1e-3, std::abs(double(x[i]))));
  }
  return worst;
}

struct Row {
  std::string name;
  double mib = 0, triad_gbs = 0, reference_gbs = 0, fused_gbs = 0, rel_diff = 0;
  int64_t fused_kernels = 0;
};

// The fused runs alternate with runs of `triad`, so that both see the same machine.
Row run_pattern(const Pattern& p, const Options& o, memory::Allocator& alloc,
                jit::KernelCache& cache, Triad& triad) {
  std::unique_ptr<ir::Graph> g = ir::parse_graph(p.graph, p.name);
  const ir::Bindings b{{"R", std::max<int64_t>(1, static_cast<int64_t>(p.rows * o.scale))},
                       {"S", 512}};
  std::mt19937_64 rng(1);
  std::map<std::string, engine::Tensor> args;
  int64_t bytes = 0;
  for (const ir::Value* a : g->arguments()) {
    args[a->name()] = random_tensor(*a, b, rng, alloc);
    bytes += args[a->name()].bytes();
  }
  std::unique_ptr<ir::Graph> fused = jit::apply_fusion(*g, jit::plan_fusion(*g));
  engine::Executor reference(*g, alloc), compiled(*fused, alloc, {}, &cache);
  const Timing r = time_runs(reference, args, o.repeats);
  const Timing f = time_runs(compiled, args, o.repeats, [&] { triad.run(); });
  for (const auto& [name, t] : r.outputs) bytes += t.bytes();
  return {.name = p.name,
          .mib = static_cast<double>(bytes) / (1 << 20),
          .triad_gbs = triad.best_gbs(),
          .reference_gbs = static_cast<double>(bytes) / r.seconds / 1e9,
          .fused_gbs = static_cast<double>(bytes) / f.seconds / 1e9,
          .rel_diff = max_rel_diff(r.outputs, f.outputs),
          .fused_kernels = f.kernels};
}

int run(const Options& o) {
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism, o.threads);
  jit::register_fused_op();
  const jit::Target t = jit::host_target();
  std::printf(
      "bench_kernels: memory-bound kernels, fused JIT vs reference, against STREAM triad\n");
  std::printf("%d threads, best of %d runs each; host %s, %d-bit vectors\n", o.threads, o.repeats,
              t.cpu.c_str(), t.vector_bits);
  // The machine is shared and its bandwidth drifts: each kernel is compared with a triad whose
  // runs alternate with the kernel's.
  const int64_t triad_floats = static_cast<int64_t>((32 << 20) * std::max(o.scale, 0.25));
  std::printf(
      "triad: a = b + s*c over 3 x %lld MiB, its runs alternating with each fused kernel's\n\n",
      static_cast<long long>(triad_floats * 4 >> 20));
  std::unique_ptr<devices::Device> dev = engine::make_device("cpu", o.threads);
  memory::CachingAllocator alloc(*dev, 0);  // as the trainer: outputs reuse freed blocks
  jit::KernelCache cache(std::getenv("DISC_BENCH_CACHE") ? std::getenv("DISC_BENCH_CACHE") : "");
  std::printf("  %-30s %6s %12s %12s %12s %9s %8s %9s\n", "kernel", "MiB", "triad", "reference",
              "fused JIT", "of triad", "kernels", "max rel.");
  bool all_met = true;
  nlohmann::json rows = nlohmann::json::array();
  for (const Pattern& p : kPatterns) {
    Triad runs(triad_floats);
    const Row r = run_pattern(p, o, alloc, cache, runs);
    const double triad = r.triad_gbs;
    const bool lowered = r.fused_kernels > 0;
    const double share = r.fused_gbs / triad;
    all_met = all_met && lowered && share >= kGoal;
    std::printf("  %-30s %6.0f %7.1f GB/s %7.1f GB/s %7.1f GB/s %8.0f%% %8lld %9.1e%s\n",
                r.name.c_str(), r.mib, triad, r.reference_gbs, r.fused_gbs, 100 * share,
                static_cast<long long>(r.fused_kernels), r.rel_diff,
                lowered ? "" : "  (not lowered: reference kernels)");
    rows.push_back({{"kernel", r.name},
                    {"mib", r.mib},
                    {"triad_gbs", triad},
                    {"reference_gbs", r.reference_gbs},
                    {"fused_gbs", r.fused_gbs},
                    {"share_of_triad", share},
                    {"fused_kernels", r.fused_kernels},
                    {"max_rel_diff", r.rel_diff}});
  }
  std::printf(
      "\nGB/s: bytes each argument read once and each output written once, over the fastest run;\n"
      "kernels: JIT kernels per run; max rel.: largest difference of a fused output from the "
      "reference\n");
  std::printf("goal: every fused kernel at >= %.0f%% of triad: %s\n", 100 * kGoal,
              all_met ? "met" : "NOT MET");
  std::printf("%s\n", machine_load().c_str());
  if (!o.json.empty()) {
    write_json(o.json, {{"threads", o.threads},
                        {"repeats", o.repeats},
                        {"scale", o.scale},
                        {"host", t.cpu},
                        {"vector_bits", t.vector_bits},
                        {"kernels", rows},
                        {"goal_met", all_met},
                        {"machine_load", machine_load()}});
  }
  return 0;
}

}  // namespace
}  // namespace disc::bench

int main(int argc, char** argv) {
  disc::bench::Options o;
  CLI::App app{"bench_kernels: fused JIT kernels vs reference kernels vs STREAM triad"};
  app.add_option("--threads", o.threads, "CPU threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--repeats", o.repeats, "Timed runs per kernel; the fastest counts")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--scale", o.scale, "Multiplies every pattern's rows (0.25: a quick look)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 16.0));
  app.add_option("--json", o.json, "Also write the figures as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  try {
    return disc::bench::run(o);
  } catch (const disc::Error& e) {
    std::fprintf(stderr, "bench_kernels: %s\n", e.what());
    return 1;
  }
}
