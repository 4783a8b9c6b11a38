#include "run.h"

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "base/bytes.h"
#include "base/error.h"
#include "base/hash.h"
#include "base/version.h"
#include "checkpoints.h"
#include "engine/memory_report.h"
#include "engine/pipeline.h"
#include "engine/plan_summary.h"
#include "evaluation.h"
#include "export.h"
#include "ir/binding.h"
#include "ir/text_format.h"
#include "output_checks.h"
#include "ranks.h"
#include "reporting.h"
#include "run_identity.h"
#include "schedule.h"
#include "setup.h"
#include "stop_signals.h"

namespace disc::apps {
namespace {

// Said where a step clips in two passes (chosen, or taken for the memory cap).
constexpr const char* kTwoPasses =
    "gradient clipping in two passes (optimizer.clip_passes): each step runs its forward and "
    "backward twice, the first for the norm, and holds no gradient waiting for it";

Schedule schedule_of(const Config& c) {
  return {c.get_float("schedule.lr"), c.get_float("schedule.min_lr"),
          c.get_int("schedule.warmup_steps"), c.get_int("train.steps"),
          c.get_string("schedule.decay")};
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

// Loads the newest checkpoint that reads back whole and verifies (checksums, finite values, every
// tensor, a step that matches its folder's name, a data cursor inside the data), warning about
// each newer one it skips (a crash, a full disk or a damaged file): every damage falls back alike.
// Refuses a checkpoint of a different run (run_identity.h), naming the changed key, before its
// tensors are looked at (a changed model.hidden read as a tensor of the wrong shape). Returns the
// folder loaded.
std::string resume(const std::string& ckdir, engine::Trainer& trainer, data::Batcher& batcher,
                   const std::map<std::string, std::string>& identity, bool allow_changes) {
  auto folders = checkpoint_folders(ckdir);
  std::string skipped;
  auto skip = [&](const std::string& folder, const Error& e) {
    spdlog::warn("skipping checkpoint {}: {}", folder, e.what());
    skipped += (skipped.empty() ? "" : ", ") + std::filesystem::path(folder).filename().string();
  };
  for (auto it = folders.rbegin(); it != folders.rend(); ++it) {
    std::map<std::string, std::string> recorded;
    try {
      recorded = engine::Trainer::saved_extra(*it);
    } catch (const IoError& e) {
      skip(*it, e);
      continue;
    }
    check_same_run(recorded, identity, *it, allow_changes);  // another run: refused, not skipped
    try {
      auto extra = trainer.load(*it);  // all or nothing: a failed load leaves the trainer as it was
      auto named = checkpoint_step(std::filesystem::path(*it).filename().string());
      if (named != trainer.steps_done()) {
        throw IoError(*it + "/trainer.json says step " + std::to_string(trainer.steps_done()) +
                      ", its folder's name another");
      }
      batcher.seek(cursor_of(extra, *it));
      return *it;
    } catch (const Error& e) {  // the same run's checkpoint, damaged: a missing tensor, a cursor
      skip(*it, e);             // past the data, a checksum
    }
  }
  throw InvalidArgument("no complete checkpoint in " + ckdir + " to resume from" +
                        (skipped.empty() ? "" : " (skipped unreadable " + skipped + ")") +
                        "; run without --resume to start fresh");
}

// The metrics file's first record: what ran, where, and a hash of the whole resolved config.
nlohmann::json run_record(const Config& c, engine::Trainer& trainer) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(c.to_yaml())));
  return {{"version", disc::version()},
          {"commit", disc::commit()},
          {"device", trainer.device().name()},
          {"config_hash", hex},
          {"resumed_at_step", trainer.steps_done()}};
}

// Where a run writes while it goes: metrics (a line per step), the trace of chosen steps (written
// as each ends), the progress display, and checkpoints (with the newest one known to be good,
// which pruning keeps).
struct RunOutputs {
  std::unique_ptr<MetricsFile> metrics;
  std::string metrics_path;
  Trace trace;
  Progress progress;
  std::string ckdir;
  int64_t every = 0, keep = 0;
  std::string verified;  // the checkpoint this run resumed from or wrote last

  void checkpoint(engine::Trainer& trainer, const data::Batcher& batcher,
                  std::map<std::string, std::string> extra) {
    auto cursor = batcher.cursor();
    extra["epoch"] = std::to_string(cursor.epoch);
    extra["position"] = std::to_string(cursor.position);
    const std::string path = checkpoint_path(ckdir, trainer.steps_done());
    trainer.save(path, extra);
    verified = path;
    prune_checkpoints(ckdir, keep, verified);
  }
};

// Totals for the summary line and the memory report.
struct RunTotals {
  int64_t tokens = 0, computed = 0, peak = 0, steps = 0, evictions = 0, compiles = 0;
  int64_t planned_peak = -1;
  std::pair<ir::Bindings, int64_t> peak_step;  // the shape of the step with the highest planned
                                               // peak, and the bytes held as it started
  double ms = 0, collective_ms = 0, collective_wait_ms = 0;
  float first = 0, last = 0;

  void add(const StepReport& r) {
    const engine::StepStats& st = r.result.stats;
    if (st.planned_peak_bytes > planned_peak) {
      planned_peak = st.planned_peak_bytes;
      peak_step = {st.bindings, st.held_before_step_bytes};
    }
    tokens += r.tokens, computed += r.computed, ms += st.ms, evictions += st.evictions,
        compiles += st.kernel_compiles;
    collective_ms += st.collective_ms, collective_wait_ms += st.collective_wait_ms;
    peak = std::max(peak, st.live_peak_bytes);
    if (steps++ == 0) first = r.result.loss;
    last = r.result.loss;
  }

  std::string summary() const {
    std::string line = fmt::format(
        "done: {} steps, {} tokens ({:.0f}% of the {} positions computed), {:.0f} tokens/s, "
        "peak {}, loss {:.4f} -> {:.4f}, compiles {}, evictions {}",
        steps, tokens, computed > 0 ? 100.0 * tokens / computed : 0.0, computed,
        ms > 0 ? tokens / (ms / 1e3) : 0.0, human_bytes(peak), first, last, compiles, evictions);
    if (collective_ms > 0 && steps > 0) {
      line += fmt::format(", collectives {:.2f} ms a step, {:.0f}% of it hidden behind compute",
                          collective_ms / steps,
                          100 * std::max(0.0, 1 - collective_wait_ms / collective_ms));
    }
    return line;
  }
};

// The trace and the memory report, written however the run ends.
void write_reports(RunOutputs& out, const RunTotals& totals, engine::Trainer& trainer,
                   const ir::Graph& g) {
  out.trace.write();
  if (!out.metrics_path.empty() && totals.steps > 0) {
    const std::string svg =
        (std::filesystem::path(out.metrics_path).parent_path() / "memory.svg").string();
    engine::write_memory_report(svg, g, trainer.governor(), totals.peak_step.first,
                                totals.peak_step.second);
  }
}

// Where this rank writes its trace: rank 0 at logging.trace, the others beside it as
// NAME.rankR.json with distributed.trace_every_rank, else nowhere.
std::string trace_path(const Config& c, const Ranks& ranks) {
  const std::string path = c.get_string("logging.trace");
  if (ranks.writes() || path.empty()) return path;
  if (!c.get_bool("distributed.trace_every_rank")) return "";
  std::filesystem::path p(path);
  return (p.parent_path() /
          (p.stem().string() + ".rank" + std::to_string(ranks.rank) + p.extension().string()))
      .string();
}

// A long compile's progress where it cannot mix with the report on stdout.
void progress_to_stderr(engine::Pipeline& p) {
  p.progress([](const engine::CompileProgress& e) { std::cerr << progress_line(e) << "\n"; });
}

}  // namespace

int run_training(const Config& c, const RunFlags& f) {
  RunSetup s = make_setup(
      c);  // every bad input fails here or in the checks below, before anything is written
  const std::map<std::string, std::string> identity = run_identity(c, s.examples);
  const Ranks ranks = join_ranks(c, s, identity);
  // Rank 0 alone writes (logs, metrics, traces, checkpoints, exports); every rank reads.
  const bool writes = ranks.writes();
  if (writes) check_outputs(c);
  RunOutputs out{nullptr,
                 writes ? c.get_string("logging.metrics") : "",
                 Trace(trace_path(c, ranks), c.get_ints("logging.trace_steps")),
                 Progress(writes ? c.get_string("logging.progress") : "none",
                          c.get_int("train.steps"), c.get_int("logging.every")),
                 c.get_string("checkpoint.dir"),
                 c.get_int("checkpoint.every"),
                 c.get_int("checkpoint.keep")};
  if (f.resume && out.ckdir.empty())
    throw InvalidArgument("--resume needs checkpoint.dir: set it to the run's checkpoint folder");
  if (f.resume && checkpoint_folders(out.ckdir).empty()) {
    throw InvalidArgument("no complete checkpoint in " + out.ckdir +
                          " to resume from; run without --resume to start fresh");
  }
  engine::Trainer trainer(std::move(s.model), s.trainer, [](engine::Pipeline& p) {
    p.progress([](const engine::CompileProgress& e) { spdlog::info("{}", progress_line(e)); });
  });  // may still refuse (device, cap)
  const ir::Graph& g = trainer.graph();
  // The lock creates the folder, so it comes after what may refuse the run; and before the
  // folder's contents are looked at, so that no other run changes them meanwhile.
  std::unique_ptr<CheckpointLock> lock;
  if (writes && !out.ckdir.empty()) lock = std::make_unique<CheckpointLock>(out.ckdir);
  if (writes && !f.resume && !out.ckdir.empty()) refuse_mixing_runs(out.ckdir);
  data::Batcher batcher(s.examples, s.batching, s.loss_start);
  if (f.resume) {
    out.verified = resume(out.ckdir, trainer, batcher, identity, f.allow_changes);
    spdlog::info("resumed from {} at step {}", out.verified, trainer.steps_done());
  } else {
    load_initial_weights(s, trainer);
  }
  if (!out.metrics_path.empty()) {
    out.metrics = std::make_unique<MetricsFile>(
        out.metrics_path, f.resume ? trainer.steps_done() : -1, c.get_ints("jit.buckets"));
    out.metrics->write_start(run_record(c, trainer));
  }
  int64_t total = c.get_int("train.steps"), seed = c.get_int("train.seed");
  const int64_t eval_every = c.get_int("eval.every");
  Schedule lr = schedule_of(c);
  spdlog::info("disc-train: {}; {} steps", s.describe, total);
  if (trainer.clip_passes() == 2) spdlog::info("{}", kTwoPasses);
  if (const std::vector<std::string> staged = trainer.staged_ops(); !staged.empty())
    spdlog::warn(
        "{}: these ops have no kernel on the device yet and run on the host over copies (slow): {}",
        trainer.device().name(), fmt::join(staged, ", "));

  StopSignals signals;
  RunTotals totals;
  int code = 0;
  const int64_t accumulate = c.get_int("train.accumulate");
  for (int64_t step = trainer.steps_done() + 1; step <= total && code == 0; ++step) {
    if (out.trace.wants(step)) trainer.set_observer(out.trace.observer(step, trainer.memory_cap()));
    // The step's global batches (one, or train.accumulate micro-batches), which the reports count.
    StepReport r{.lr = lr.at(step)};
    std::vector<engine::Batch> micro;
    for (int64_t k = 0; k < accumulate; ++k) {
      const data::HostBatch hb = batcher.next();
      data::HostBatch share;  // this rank's rows of it, with ranks
      if (ranks.size > 1)
        share = data::rank_share(hb, ranks.rank, ranks.size, s.batching.pad_id,
                                 s.batching.ignore_index);
      // Dropout's seed differs per micro-batch (and is the step's own without accumulation).
      micro.push_back(to_tensors(ranks.size > 1 ? share : hb, trainer, g, seed,
                                 (step - 1) * accumulate + k + 1));
      r.add_batch(hb);
    }
    r.result = trainer.step_micro_batches(micro, lr.at(step));
    r.live_bytes = trainer.allocator().stats().live_bytes;
    if (out.trace.wants(step)) {
      trainer.set_observer({});
      out.trace.end_step(step, r.result.stats.ms * 1e3, r.result.stats.compile_ms,
                         r.result.stats.kernel_compiles + r.result.stats.kernel_cache_loads);
      out.trace.write();  // a run that dies later keeps the steps traced so far
    }
    if (!s.eval_examples.empty() && (step % eval_every == 0 || step == total))
      r.eval_loss = evaluate_held_out(trainer, s, ranks).loss;
    if (out.metrics) out.metrics->write(r);
    out.progress.update(r);
    totals.add(r);
    // A step that f16 loss scaling skipped changed nothing: the next runs at half the scale.
    if (!std::isfinite(r.result.loss) ||
        (!std::isfinite(r.result.grad_norm) && !r.result.skipped)) {
      spdlog::error(
          "training diverged at step {}: loss {}, gradient norm {}; no checkpoint was "
          "written from this state{}. Lower schedule.lr, clip gradients (optimizer.clip_norm, "
          "e.g. 1.0), or check the data",
          step, r.result.loss, r.result.grad_norm,
          out.verified.empty() ? "" : " (the newest good one is " + out.verified + ")");
      code = kExitDiverged;
      break;
    }
    const bool stop = ranks.any(signals.received() != 0);
    // mpirun passes a signal on to every rank; one that another rank got first stops this one too.
    const int signal = signals.received() != 0 ? signals.received() : SIGTERM;
    if (!out.ckdir.empty() && (step % out.every == 0 || step == total || stop)) {
      if (writes) {
        out.checkpoint(trainer, batcher, identity);
      } else if (s.trainer.shard_optimizer) {
        trainer.save(out.ckdir);  // its parts of the optimizer state, for rank 0 to write
      }
    }
    if (stop) {
      if (writes) {  // the other ranks stop alike, silently
        spdlog::warn("{}: stopped after step {}{}", StopSignals::name(signal), step,
                     out.ckdir.empty()
                         ? ""
                         : "; checkpoint " + out.verified + " written: continue with --resume");
      }
      code = 128 + signal;
    }
  }
  write_reports(out, totals, trainer, g);
  out.progress.finish(totals.summary());
  if (const std::string dir = c.get_string("export.dir"); writes && code == 0 && !dir.empty()) {
    const std::string what = write_llama_export(c, s, engine::parameters_of(trainer), dir, false);
    spdlog::info("exported the trained llama to {} ({})", dir, what);
  }
  return code;
}

int validate(const Config& c) {
  RunSetup s = make_setup(c);
  check_outputs(c);
  // Under mpirun, what run checks of the ranks (a batch they share evenly, the same config), and
  // one answer, rank 0's: `mpirun -np 3 disc-train validate` said OK three times to a batch size
  // that run refused.
  const Ranks ranks = join_ranks(c, s, {});
  // Builds the training step too.
  engine::Trainer trainer(std::move(s.model), s.trainer, progress_to_stderr);
  if (ranks.writes())
    std::cout << "config OK: " << s.describe << "; " << trainer.graph().num_nodes()
              << " nodes in the training step" << (ranks.size > 1 ? " (each of " : "")
              << (ranks.size > 1 ? std::to_string(ranks.size) + " ranks)" : "") << "\n";
  return 0;
}

namespace {

// What `disc-train plan` answers first, as JSON (--json) or as comment lines: the model, the
// shape, the peak without and with the plan's evictions under the cap, the lower bound a cap could
// reach and, where the governor may evict, the smallest cap its planner reaches.
nlohmann::json plan_summary(engine::Trainer& trainer, const ir::Bindings& b,
                            const std::string& describe) {
  const engine::PlanSummary p = engine::summarize_plan(trainer, b);
  nlohmann::json j = {{"model", describe},
                      {"clip_passes", trainer.clip_passes()},
                      {"shape", ir::describe_bindings(trainer.step_graph(), b)},
                      {"nodes", trainer.step_graph().num_nodes()},
                      {"schedule", p.schedule},
                      {"held_before_step_bytes", p.held_before_step},
                      {"cap_bytes", p.cap},
                      {"lower_bound_bytes", p.lower_bound}};
  nlohmann::json symbols = nlohmann::json::array(), limits = nlohmann::json::array();
  for (const ir::Symbol* sym : trainer.step_graph().shapes().symbols())
    symbols.push_back({{"name", sym->name}, {"lo", sym->lo}, {"hi", sym->hi}});
  for (const ir::SymbolLimit& l : trainer.step_graph().shapes().limits()) limits.push_back(l.str());
  j["symbols"] = symbols, j["limits"] = limits;
  // What every admissible batch needs, over the worst shapes: the cap the run's check accepts.
  j["worst_shapes"] = p.worst_shapes;
  j["every_shape_lower_bound_bytes"] = p.every_shape_lower_bound;
  if (p.every_shape_smallest_cap) j["every_shape_smallest_cap_bytes"] = *p.every_shape_smallest_cap;
  j["fits"] = p.fits_at_shape;
  if (p.fits_at_shape) {
    j["peak_bytes"] = p.peak, j["planned_peak_bytes"] = p.planned_peak;
    j["evictions"] = p.evictions;
  } else {
    j["error"] = p.error;
  }
  // `fits` is what `run` decides: the cap must keep every worst shape, not this one alone.
  j["fits_at_shape"] = p.fits_at_shape;
  if (!p.every_shape_error.empty()) j["fits"] = false, j["every_shape_error"] = p.every_shape_error;
  if (p.smallest_cap) j["smallest_cap_bytes"] = *p.smallest_cap;
  return j;
}

std::string summary_text(const nlohmann::json& j) {
  std::string s =
      "// " + j["model"].get<std::string>() + "\n// at " + j["shape"].get<std::string>() + ": ";
  if (j["fits"]) {
    s += "peak " + human_bytes(j["peak_bytes"]) + " without evictions, " +
         human_bytes(j["planned_peak_bytes"]) + " planned with " + j["evictions"].dump() +
         " evictions";
  } else {
    s += j["error"].get<std::string>();
  }
  s += "; cap " + (j["cap_bytes"] > 0 ? human_bytes(j["cap_bytes"]) : std::string("none")) +
       "; lower bound " + human_bytes(j["lower_bound_bytes"]);
  if (j.contains("smallest_cap_bytes"))
    s += "; smallest cap the planner reaches " + human_bytes(j["smallest_cap_bytes"]);
  s += "\n// every admissible batch (" + j["worst_shapes"].dump() + " worst " +
       (j["worst_shapes"] == 1 ? "shape" : "shapes") + "): lower bound " +
       human_bytes(j["every_shape_lower_bound_bytes"]);
  if (j.contains("every_shape_smallest_cap_bytes"))
    s += "; smallest cap the planner reaches " + human_bytes(j["every_shape_smallest_cap_bytes"]);
  if (j.contains("every_shape_error"))
    s += "\n// run refuses the cap: " + j["every_shape_error"].get<std::string>();
  if (j["clip_passes"] == 2) s += "\n// " + std::string(kTwoPasses);
  return s + "\n";
}

}  // namespace

int plan(const Config& c, const std::string& shape, const std::string& dump_after, bool json) {
  RunSetup s = make_setup(c);
  s.trainer.check_cap = false;   // the report says where a cap too small fails
  s.trainer.make_state = false;  // planned from the graph: no 12 GiB of weights to plan 1.1B
  engine::Trainer trainer(std::move(s.model), s.trainer, [&](engine::Pipeline& p) {
    progress_to_stderr(p);
    if (!dump_after.empty() && !json) p.dump_after(dump_after, std::cout);
  });
  const ir::Graph& g = trainer.step_graph();
  const ir::Bindings b = ir::parse_bindings(shape, g, trainer.largest_shape());
  const nlohmann::json summary = plan_summary(trainer, b, s.describe);
  if (json) {
    std::cout << summary.dump(2) << "\n";
    return 0;
  }
  std::cout << summary_text(summary) << "// symbols and bounds:\n";
  for (const ir::Symbol* sym : g.shapes().symbols()) {
    std::cout << "//   " << sym->name << " in [" << sym->lo << ", " << sym->hi << "]\n";
  }
  for (const ir::SymbolLimit& l : g.shapes().limits()) std::cout << "//   " << l.str() << "\n";
  std::istringstream report(engine::governor_report(trainer, b));
  for (std::string line; std::getline(report, line);) std::cout << "// " << line << "\n";
  if (const auto& fusion = trainer.compiled().fusion)
    std::cout << engine::Pipeline::print_fusion_plan(*fusion);
  std::cout << "// execution order:\n";
  const std::vector<const ir::Node*> order = engine::execution_order(trainer);
  for (size_t i = 0; i < order.size(); ++i)
    std::cout << "//   " << i << ": " << g.describe(*order[i]) << "\n";
  std::cout << ir::print_graph(g);
  return 0;
}

}  // namespace disc::apps
