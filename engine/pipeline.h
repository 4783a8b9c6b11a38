// The compile pipeline: one flat list of named stages that turns a model's forward graph and
// TrainerOptions into the step the executor runs. The Trainer, `disc-opt --train`, `disc-train
// plan` and the tests that want the Trainer's graph all call it; nothing else assembles passes.
//
//   engine::Pipeline p(options);                          // options.jit, fuse_attention, memory,
//   ... p.after({"fusion"}, [](const std::string& stage, engine::CompiledStep& s) {  // e.g. a dump
//     std::cout << engine::Pipeline::print_stage(stage, s);
//   });
//   engine::CompiledStep step = p.run(ir::models::build_llama({}));
//   Executor ex(step.graph(), alloc, std::move(*step.governor), ...);
//
// Each stage's result is kept as a value in CompiledStep (the graph, the fusion plan, the
// schedule, the eviction candidates) and can be printed after the stage (print_stage). The graph
// is verified after every stage that changed it.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/options.h"
#include "ir/models/model.h"
#include "jit/fusion/fusion.h"
#include "memory/governor.h"

namespace disc::engine {

struct CompiledStep {
  // The training step before fusion: forward, backward and optimizer. `model.loss` and
  // `model.params` follow the stages that replace them.
  ir::models::Model model;
  std::optional<jit::FusionPlan> fusion;  // the `fusion` stage's plan (options.jit)
  std::unique_ptr<ir::Graph> fused;       // model.graph with one `fused` node per group
  // The `schedule` and `remat` stages' results over graph(): the op order, its liveness and the
  // eviction candidates. The executor's governor takes it over.
  std::optional<memory::StepSchedule> schedule;

  // The graph the executor runs: the fused graph when there is one.
  const ir::Graph& graph() const { return fused ? *fused : *model.graph; }
};

// What one stage did, for --stats.
struct StageRun {
  std::string stage;
  bool changed = false;
  bool skipped = false;  // off in the options, or disabled
  double ms = 0;
  size_t nodes = 0;  // in the graph the stage left (graph())
};

// Where a compile stands, for a progress line (Pipeline::progress): a stage starts or ends.
struct CompileProgress {
  std::string stage;
  int index = 0, count = 0;  // the stage's place among the stages, from 1
  size_t nodes = 0;          // in the graph as the stage starts or ends
  double elapsed_ms = 0;     // since the compile began
  bool done = false;         // the stage has ended (else it starts)
};

class Pipeline {
 public:
  // `options.memory.offload` must already say whether the device can offload (separate memory).
  explicit Pipeline(const TrainerOptions& options) : options_(options) {}

  // Every stage, in order, with a line on what it does: "name: summary".
  static std::vector<std::string> stage_descriptions();
  // Skips a stage (InvalidArgument for a name that is none; see stage_descriptions).
  void disable(const std::string& stage);
  // Runs exactly these stages, in this order, whatever the options say: disc-opt's --passes over
  // a graph file (whose model has no loss: `loss` and `training_step` then refuse to run).
  // InvalidArgument for a name that is no stage.
  void only(std::vector<std::string> stages);
  // Calls `hook(stage, step)` after each stage in `stages` that ran ("all": every one): to print
  // a stage's result, or (tests) to change the step between stages. InvalidArgument for a name
  // that is no stage.
  using Hook = std::function<void(const std::string& stage, CompiledStep& s)>;
  void after(std::set<std::string> stages, Hook hook);
  // Prints each of `stages` ("a,b" or "all") to `out` as it ends: "// ----- after STAGE -----"
  // and print_stage (disc-opt's and disc-train plan's --dump-after).
  void dump_after(const std::string& stages, std::ostream& out);

  // Calls `report` as each stage starts and ends once the compile has run `after_ms` (a fast
  // compile says nothing; a big graph says which stage runs, on how many nodes, how long in).
  using ProgressHook = std::function<void(const CompileProgress&)>;
  void progress(ProgressHook report, double after_ms = 1000) {
    progress_ = std::move(report);
    progress_after_ms_ = after_ms;
  }

  // Runs every stage on `model` (its forward graph and scalar loss).
  CompiledStep run(ir::models::Model model);
  // What the last run() did, stage by stage.
  const std::vector<StageRun>& runs() const { return runs_; }

  // The stage's result as text: the fusion plan and the fused graph after `fusion`, the schedule
  // after `schedule`, the candidates after `remat`, the graph after any other stage.
  static std::string print_stage(const std::string& stage, const CompiledStep& s);
  // The plan as comment lines (the graph text's `//`), as print_stage gives it after `fusion`.
  static std::string print_fusion_plan(const jit::FusionPlan& plan);

 private:
  TrainerOptions options_;
  std::set<std::string> disabled_;
  std::optional<std::vector<std::string>> only_;
  std::vector<std::pair<std::set<std::string>, Hook>> hooks_;
  std::vector<StageRun> runs_;
  ProgressHook progress_;
  double progress_after_ms_ = 1000;
};

// "compile: fusion (11/13) on 100012 nodes, 1.4 s in" or "compile: fusion done, 2.1 s in": the
// line disc-train and disc-opt print for a CompileProgress.
std::string progress_line(const CompileProgress& p);

// "a,b,c" as {"a", "b", "c"} (empty items dropped): for --dump-after and --disable; in order,
// for --passes.
std::set<std::string> split_names(const std::string& comma_separated);
std::vector<std::string> split_list(const std::string& comma_separated);

}  // namespace disc::engine
