#include "engine/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "base/error.h"
#include "devices/communicator.h"
#include "ir/passes/passes.h"
#include "ir/text_format.h"
#include "ir/training_step.h"
#include "ir/verifier.h"
#include "memory/liveness.h"
#include "memory/remat.h"

namespace disc::engine {
namespace {

struct Stage {
  const char* name;
  const char* summary;
  bool (*on)(const TrainerOptions&);                  // whether the options ask for it
  bool (*run)(CompiledStep&, const TrainerOptions&);  // returns whether anything changed
};

bool always(const TrainerOptions&) {
  return true;
}

// Runs an ir/ graph pass over the unfused graph; the loss follows it when it replaces the loss's
// node.
bool run_pass(ir::Pass& pass, CompiledStep& s) {
  ir::Graph& g = *s.model.graph;
  const bool changed = pass.run(g);
  for (const auto& [name, v] : g.outputs())
    if (name == "loss") s.model.loss = v;
  return changed;
}

template <const char* kPass>
bool graph_pass(CompiledStep& s, const TrainerOptions&) {
  return run_pass(*ir::make_pass(kPass), s);
}

bool precision(CompiledStep& s, const TrainerOptions& o) {
  return run_pass(*ir::make_autocast_pass(o.precision), s);
}
constexpr char kVerify[] = "verify", kCanonicalize[] = "canonicalize", kCse[] = "cse",
               kDce[] = "dce", kLayers[] = "layers", kAttention[] = "attention",
               kCrossEntropy[] = "linear_cross_entropy",
               kBackwardRecompute[] = "backward_recompute", kTril[] = "tril";

// The step returns the loss alone: the forward graph's other outputs (the logits) would keep
// alive what the passes can do without, and dce would drop the loss, which no output reads yet.
bool loss_output(CompiledStep& s, const TrainerOptions&) {
  ir::Graph& g = *s.model.graph;
  g.keep_outputs([](const std::string&) { return false; });
  g.add_output("loss", s.model.loss);
  return true;
}

// Frozen parameters stay arguments of the step but get neither gradient nor update.
bool training_step(CompiledStep& s, const TrainerOptions& o) {
  std::vector<ir::Value*> trained;
  std::set<std::string> unknown = o.frozen;
  for (ir::Value* p : s.model.params) {
    if (unknown.erase(p->name()) == 0) trained.push_back(p);
  }
  if (!unknown.empty()) {
    std::string some;
    for (size_t i = 0; i < s.model.params.size() && i < 4; ++i)
      some += (i ? ", " : "") + s.model.params[i]->name();
    throw InvalidArgument("cannot freeze `" + *unknown.begin() +
                          "`: the model has no parameter of that name (it has " + some + ", ...)");
  }
  if (trained.empty())
    throw InvalidArgument("every parameter is frozen: there is nothing to train");
  ir::OptimizerConfig optimizer = o.optimizer;
  optimizer.loss_scaling = o.precision == DType::kF16;  // f16's range needs it
  std::optional<ir::DataParallel> data_parallel;
  if (o.communicator && o.communicator->size() > 1)
    data_parallel = {.bucket_bytes = o.bucket_bytes,
                     .shard_optimizer = o.shard_optimizer,
                     .ranks = o.communicator->size()};
  ir::build_training_step(*s.model.graph, s.model.loss, trained, optimizer, false,
                          data_parallel ? &*data_parallel : nullptr);
  return true;
}

bool fusion(CompiledStep& s, const TrainerOptions&) {
  s.fusion = jit::plan_fusion(*s.model.graph);
  s.fused = jit::apply_fusion(*s.model.graph, *s.fusion);
  return true;
}

bool schedule(CompiledStep& s, const TrainerOptions& o) {
  s.schedule = memory::schedule_ops(s.graph(), o.memory);
  return true;
}

bool remat(CompiledStep& s, const TrainerOptions& o) {
  s.schedule->candidates = memory::remat_candidates(s.graph(), *s.schedule, o.memory);
  return !s.schedule->candidates.empty();
}

// The pipeline, in order. Each line says why the stage is where it is.
const std::vector<Stage>& stages() {
  static const std::vector<Stage> list = {
      {"loss", "the loss becomes the graph's one output, `loss`", always, loss_output},
      {"verify", "checks the forward graph (types, shapes, attributes)", always,
       graph_pass<kVerify>},
      {"canonicalize", "folds shape arithmetic and no-op reshapes", always,
       graph_pass<kCanonicalize>},
      {"cse", "merges identical nodes", always, graph_pass<kCse>},
      {"dce", "drops nodes no output needs", always, graph_pass<kDce>},
      // Before attention, which then finds exported attention (keys transposed, scores scaled).
      {"layers", "RMSNorm, SiLU and RoPE written as primitives (imported models) as disc's ops",
       always, graph_pass<kLayers>},
      // Before autodiff, so that attention's gradient is one attention_grad too.
      {"attention", "softmax(q k^T) v as one attention op, run by blocks of query rows",
       [](const TrainerOptions& o) { return o.fuse_attention; }, graph_pass<kAttention>},
      {"linear_cross_entropy",
       "the head's linear layer and cross-entropy as one op, without the logits",
       [](const TrainerOptions& o) { return o.fuse_cross_entropy; }, graph_pass<kCrossEntropy>},
      // On the forward graph, so that autodiff gives the backward the forward's dtypes.
      {"precision", "bf16 or f16 matmuls; norms, softmax, losses and reductions in f32",
       [](const TrainerOptions& o) { return o.precision != DType::kF32; }, precision},
      {"training_step",
       "autodiff and the optimizer: backward, gradient norm, clipping, updates (with ranks: the "
       "global batch's loss, gradients summed over the ranks in buckets)",
       always, training_step},
      {"backward_recompute",
       "the backward makes cheap forward values again instead of holding them",
       [](const TrainerOptions& o) { return o.backward_recompute; },
       graph_pass<kBackwardRecompute>},
      // After autodiff: causal attention's products in both directions skip their zero triangle.
      {"tril", "causal products skip their zero triangle (no value changes)", always,
       graph_pass<kTril>},
      {"fusion", "memory-bound nodes grouped into `fused` kernels",
       [](const TrainerOptions& o) { return o.jit; }, fusion},
      // Over the graph that runs, fused or not: the governor's order names its nodes.
      {"schedule", "the op order with the lowest peak of live bytes, and its liveness", always,
       schedule},
      {"remat", "eviction candidates and how each is regenerated (with a memory cap)", always,
       remat},
  };
  return list;
}

void check_stage(const std::string& name) {
  std::string names;
  for (const Stage& s : stages()) {
    if (name == s.name) return;
    names += (names.empty() ? "" : ", ") + std::string(s.name);
  }
  throw InvalidArgument("no pipeline stage named `" + name + "`; the stages are " + names);
}

}  // namespace

std::set<std::string> split_names(const std::string& s) {
  std::set<std::string> out;
  for (size_t start = 0; start <= s.size();) {
    const size_t comma = std::min(s.find(',', start), s.size());
    if (comma > start) out.insert(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::vector<std::string> Pipeline::stage_descriptions() {
  std::vector<std::string> out;
  for (const Stage& s : stages()) out.push_back(std::string(s.name) + ": " + s.summary);
  return out;
}

void Pipeline::disable(const std::string& stage) {
  check_stage(stage);
  disabled_.insert(stage);
}

void Pipeline::after(std::set<std::string> stages, Hook hook) {
  for (const std::string& s : stages)
    if (s != "all") check_stage(s);
  hooks_.emplace_back(std::move(stages), std::move(hook));
}

CompiledStep Pipeline::run(ir::models::Model model) {
  CompiledStep s{.model = std::move(model)};
  runs_.clear();
  const auto begin = std::chrono::steady_clock::now();
  const int count = static_cast<int>(stages().size());
  // A progress event, once the compile has run past the threshold.
  auto report = [&](const std::string& stage, bool done) {
    const double elapsed =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
    if (!progress_ || elapsed < progress_after_ms_) return;
    progress_({.stage = stage,
               .index = static_cast<int>(runs_.size()) + 1,
               .count = count,
               .nodes = s.graph().num_nodes(),
               .elapsed_ms = elapsed,
               .done = done});
  };
  for (const Stage& stage : stages()) {
    StageRun r{.stage = stage.name};
    r.skipped = !stage.on(options_) || disabled_.contains(stage.name);
    // The executor needs an order: without the schedule stage, the graph's own.
    if (r.skipped && r.stage == "schedule")
      s.schedule = memory::schedule_ops(s.graph(), {.schedule = false});
    if (!r.skipped) {
      report(r.stage, false);
      const auto start = std::chrono::steady_clock::now();
      try {
        r.changed = stage.run(s, options_);
        if (r.changed) ir::verify(s.graph());
      } catch (const Error& e) {
        rethrow_with_context(e, "pipeline stage " + r.stage + ": ");
      }
      r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                 .count();
      report(r.stage, true);
      for (const auto& [names, hook] : hooks_)
        if (names.contains("all") || names.contains(r.stage)) hook(r.stage, s);
    }
    r.nodes = s.graph().num_nodes();
    runs_.push_back(r);
  }
  return s;
}

std::string progress_line(const CompileProgress& p) {
  char elapsed[32];
  std::snprintf(elapsed, sizeof elapsed, "%.1f s in", p.elapsed_ms / 1e3);
  const std::string where =
      "compile: " + p.stage + " (" + std::to_string(p.index) + "/" + std::to_string(p.count) + ")";
  return p.done ? where + " done, " + std::to_string(p.nodes) + " nodes, " + elapsed
                : where + " on " + std::to_string(p.nodes) + " nodes, " + elapsed;
}

std::string Pipeline::print_fusion_plan(const jit::FusionPlan& plan) {
  std::string text = "// fusion plan:\n";
  std::istringstream lines(plan.str());
  for (std::string line; std::getline(lines, line);) text += "//   " + line + "\n";
  return text;
}

std::string Pipeline::print_stage(const std::string& stage, const CompiledStep& s) {
  if (stage == "fusion" && s.fusion)
    return print_fusion_plan(*s.fusion) + ir::print_graph(s.graph());
  if (stage == "schedule" && s.schedule) return memory::print_schedule(s.graph(), s.schedule->live);
  if (stage == "remat" && s.schedule) {
    if (s.schedule->candidates.empty())
      return "// no eviction candidates (no memory cap, or remat and offload off)\n";
    return memory::print_candidates(s.schedule->candidates);
  }
  return ir::print_graph(s.graph());
}

}  // namespace disc::engine
