#include "run.h"

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "base/bytes.h"
#include "base/error.h"
#include "checkpoints.h"
#include "engine/memory_report.h"
#include "ir/binding.h"
#include "ir/text_format.h"
#include "reporting.h"
#include "schedule.h"
#include "setup.h"

namespace disc::apps {
namespace {

engine::Batch to_tensors(const data::HostBatch& hb, engine::Trainer& t, const ir::Graph& g,
                         int64_t seed, int64_t step) {
  engine::Batch b;
  b["tokens"] = engine::Tensor::from<int32_t>({hb.batch, hb.seq}, hb.tokens, t.allocator());
  b["targets"] = engine::Tensor::from<int32_t>({hb.batch, hb.seq}, hb.targets, t.allocator());
  // Dropout draws from (seed, stream, element): a per-step seed keeps masks fresh and reproducible.
  if (g.find_value("seed"))
    b["seed"] = engine::Tensor::from<int64_t>({}, {seed * 1000003 + step}, t.allocator());
  return b;
}

Schedule schedule_of(const Config& c) {
  return {c.get_float("schedule.lr"), c.get_float("schedule.min_lr"),
          c.get_int("schedule.warmup_steps"), c.get_int("train.steps"),
          c.get_string("schedule.decay")};
}

std::string summary_line(int64_t steps, int64_t tokens, double ms, int64_t peak, float first,
                         float last, int64_t compiles, int64_t evictions) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "done: %lld steps, %lld tokens, %.0f tokens/s, peak %s, loss %.4f -> %.4f, "
                "compiles %lld, evictions %lld",
                static_cast<long long>(steps), static_cast<long long>(tokens),
                ms > 0 ? tokens / (ms / 1e3) : 0.0, human_bytes(peak).c_str(), first, last,
                static_cast<long long>(compiles), static_cast<long long>(evictions));
  return buf;
}

// The batcher cursor stored in a checkpoint's extra; IoError when it is missing or not numbers.
data::Batcher::Cursor cursor_of(const std::map<std::string, std::string>& extra,
                                const std::string& dir) {
  auto number = [&](const char* key) {
    auto it = extra.find(key);
    int64_t v = -1;
    if (it != extra.end()) {
      const char* end = it->second.data() + it->second.size();
      auto [ptr, err] = std::from_chars(it->second.data(), end, v);
      if (err != std::errc() || ptr != end) v = -1;
    }
    if (v < 0)
      throw IoError(dir + "/trainer.json is corrupt: its data cursor `" + key +
                    "` is missing or not a count");
    return v;
  };
  return {number("epoch"), number("position")};
}

// A fresh run into a folder that already holds checkpoints would mix two runs: pruning would
// delete the new ones and a later --resume would pick whichever is newest.
void refuse_mixing_runs(const std::string& ckdir) {
  auto existing = checkpoint_folders(ckdir);
  if (existing.empty()) return;
  throw InvalidArgument(
      "checkpoint.dir " + ckdir + " already holds checkpoints of a run (" +
      std::filesystem::path(existing.back()).filename().string() +
      "): pass --resume to continue it, or choose another checkpoint.dir, or delete the folder");
}

// Loads the newest checkpoint that reads back whole, warning about each newer one it skips
// (a crash or a full disk can leave one incomplete or corrupt). Returns the folder loaded.
std::string resume(const std::string& ckdir, engine::Trainer& trainer, data::Batcher& batcher) {
  auto folders = checkpoint_folders(ckdir);
  std::string skipped;
  for (auto it = folders.rbegin(); it != folders.rend(); ++it) {
    try {
      auto extra = trainer.load(*it);  // all or nothing: a failed load leaves the trainer as it was
      batcher.seek(cursor_of(extra, *it));
      return *it;
    } catch (const IoError& e) {
      spdlog::warn("skipping checkpoint {}: {}", *it, e.what());
      skipped += (skipped.empty() ? "" : ", ") + std::filesystem::path(*it).filename().string();
    }
  }
  throw InvalidArgument("no complete checkpoint in " + ckdir + " to resume from" +
                        (skipped.empty() ? "" : " (skipped unreadable " + skipped + ")") +
                        "; run without --resume to start fresh");
}

// A long compile's progress where it cannot mix with the report on stdout.
void progress_to_stderr(engine::Pipeline& p) {
  p.progress([](const engine::CompileProgress& e) { std::cerr << progress_line(e) << "\n"; });
}

}  // namespace

int run_training(const Config& c, const RunFlags& f) {
  RunSetup s = make_setup(
      c);  // every bad input fails here or in the checks below, before anything is written
  check_outputs(c);
  std::string ckdir = c.get_string("checkpoint.dir");
  if (f.resume && ckdir.empty())
    throw InvalidArgument("--resume needs checkpoint.dir: set it to the run's checkpoint folder");
  if (f.resume && checkpoint_folders(ckdir).empty()) {
    throw InvalidArgument("no complete checkpoint in " + ckdir +
                          " to resume from; run without --resume to start fresh");
  }
  if (!f.resume && !ckdir.empty()) refuse_mixing_runs(ckdir);
  const ir::Graph& g = *s.model.graph;
  engine::Trainer trainer(std::move(s.model), s.trainer, [](engine::Pipeline& p) {
    p.progress([](const engine::CompileProgress& e) { spdlog::info("{}", progress_line(e)); });
  });
  data::Batcher batcher(s.examples, s.batching);
  if (f.resume) {
    std::string from = resume(ckdir, trainer, batcher);
    spdlog::info("resumed from {} at step {}", from, trainer.steps_done());
  }
  int64_t total = c.get_int("train.steps"), seed = c.get_int("train.seed");
  std::string metrics_path = c.get_string("logging.metrics");
  std::unique_ptr<MetricsFile> metrics;
  if (!metrics_path.empty())
    metrics = std::make_unique<MetricsFile>(metrics_path, f.resume ? trainer.steps_done() : -1);
  Trace trace(c.get_string("logging.trace"), c.get_ints("logging.trace_steps"),
              c.get_bytes("memory.cap"));
  Progress progress(c.get_string("logging.progress"), total, c.get_int("logging.every"));
  Schedule lr = schedule_of(c);
  spdlog::info("disc-train: {}; {} steps", s.describe, total);
  if (const std::vector<std::string> staged = trainer.staged_ops(); !staged.empty())
    spdlog::warn(
        "{}: these ops have no kernel on the device yet and run on the host over copies (slow): {}",
        trainer.device().name(), fmt::join(staged, ", "));

  int64_t tokens = 0, peak = 0, steps_run = 0, evictions = 0, compiles = 0;
  std::pair<ir::Bindings, int64_t>
      peak_step;  // the shape of the step with the highest planned peak
  double ms = 0;
  float first = 0, last = 0;
  for (int64_t step = trainer.steps_done() + 1; step <= total; ++step) {
    data::HostBatch hb = batcher.next();
    if (trace.wants(step)) trainer.set_observer(trace.observer(step));
    StepReport r{trainer.step(to_tensors(hb, trainer, g, seed, step), lr.at(step)),
                 hb.real_tokens,
                 hb.batch,
                 hb.seq,
                 lr.at(step),
                 trainer.allocator().stats().live_bytes};
    if (trace.wants(step)) trainer.set_observer({}), trace.end_step(r.result.stats.ms * 1e3);
    if (metrics) metrics->write(r);
    progress.update(r);
    if (r.result.stats.planned_peak_bytes > peak)
      peak_step = {r.result.stats.bindings, r.result.stats.held_before_step_bytes};
    tokens += r.tokens, ms += r.result.stats.ms, evictions += r.result.stats.evictions;
    compiles += r.result.stats.kernel_compiles;
    peak = std::max(peak, r.result.stats.live_peak_bytes);
    if (steps_run++ == 0) first = r.result.loss;
    last = r.result.loss;
    if (!ckdir.empty() && (step % c.get_int("checkpoint.every") == 0 || step == total)) {
      auto cursor = batcher.cursor();
      trainer.save(checkpoint_path(ckdir, step), {{"epoch", std::to_string(cursor.epoch)},
                                                  {"position", std::to_string(cursor.position)}});
      prune_checkpoints(ckdir, c.get_int("checkpoint.keep"));
    }
  }
  trace.write();
  if (!metrics_path.empty() && steps_run > 0) {
    const std::string svg =
        (std::filesystem::path(metrics_path).parent_path() / "memory.svg").string();
    engine::write_memory_report(svg, g, trainer.governor(), peak_step.first, peak_step.second);
  }
  progress.finish(summary_line(steps_run, tokens, ms, peak, first, last, compiles, evictions));
  return 0;
}

int validate(const Config& c) {
  RunSetup s = make_setup(c);
  check_outputs(c);
  // Builds the training step too.
  engine::Trainer trainer(std::move(s.model), s.trainer, progress_to_stderr);
  std::cout << "config OK: " << s.describe << "; " << trainer.graph().num_nodes()
            << " nodes in the training step\n";
  return 0;
}

int plan(const Config& c, const std::string& shape, const std::string& dump_after) {
  RunSetup s = make_setup(c);
  s.trainer.check_cap = false;  // the report says where a cap too small fails
  engine::Trainer trainer(std::move(s.model), s.trainer, [&](engine::Pipeline& p) {
    progress_to_stderr(p);
    if (dump_after.empty()) return;
    p.after(engine::split_names(dump_after),
            [](const std::string& stage, engine::CompiledStep& step) {
              std::cout << "// ----- after " << stage << " -----\n"
                        << engine::Pipeline::print_stage(stage, step);
            });
  });
  const ir::Graph& g = trainer.step_graph();
  const ir::Bindings b = ir::parse_bindings(shape, g, trainer.largest_shape());
  std::cout << "// " << s.describe << "\n// symbols and bounds:\n";
  for (const ir::Symbol* sym : g.shapes().symbols()) {
    std::cout << "//   " << sym->name << " in [" << sym->lo << ", " << sym->hi << "]\n";
  }
  std::istringstream report(trainer.governor().report(b, trainer.bytes_held_for(b)));
  for (std::string line; std::getline(report, line);) std::cout << "// " << line << "\n";
  if (const auto& fusion = trainer.compiled().fusion)
    std::cout << engine::Pipeline::print_fusion_plan(*fusion);
  std::cout << "// execution order:\n";
  const auto& order = trainer.governor().liveness().order;
  for (size_t i = 0; i < order.size(); ++i)
    std::cout << "//   " << i << ": " << g.describe(*order[i]) << "\n";
  std::cout << ir::print_graph(g);
  return 0;
}

}  // namespace disc::apps
