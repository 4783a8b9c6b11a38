#include "engine/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "base/error.h"
#include "devices/communicator.h"
#include "ir/pass.h"
#include "ir/text_format.h"
#include "ir/training_step.h"
#include "ir/verifier.h"
#include "memory/liveness.h"
#include "memory/remat.h"

namespace disc::engine {
namespace {

// A stage: a graph pass of ir/pass.h under its own name when `run` is null, else an engine step
// with a summary of its own.
struct Stage {
  const char* name;
  bool (*on)(const TrainerOptions&);                            // whether the options ask for it
  bool (*run)(CompiledStep&, const TrainerOptions&) = nullptr;  // returns whether anything changed
  const char* summary = nullptr;
};

bool always(const TrainerOptions&) {
  return true;
}

// Runs an ir/ graph pass over the unfused graph; the loss follows it when it replaces the loss's
// node.
bool run_pass(const char* name, CompiledStep& s, const TrainerOptions& o) {
  ir::Graph& g = *s.model.graph;
  const bool changed = ir::make_pass(name, {.precision = o.precision})->run(g);
  for (const auto& [output, v] : g.outputs())
    if (output == "loss") s.model.loss = v;
  return changed;
}

// A graph file's model has no loss to train (disc-opt --passes).
void require_loss(const CompiledStep& s, const char* stage) {
  if (!s.model.loss)
    throw InvalidArgument(std::string("stage `") + stage +
                          "` needs a model with a loss: give disc-opt --model or --train");
}

// The step returns the loss alone: the forward graph's other outputs (the logits) would keep
// alive what the passes can do without, and dce would drop the loss, which no output reads yet.
bool loss_output(CompiledStep& s, const TrainerOptions&) {
  require_loss(s, "loss");
  ir::Graph& g = *s.model.graph;
  g.keep_outputs([](const std::string&) { return false; });
  g.add_output("loss", s.model.loss);
  return true;
}

// Frozen parameters stay arguments of the step but get neither gradient nor update.
bool training_step(CompiledStep& s, const TrainerOptions& o) {
  require_loss(s, "training_step");
  std::vector<ir::Value*> trained;
  std::set<std::string> unknown = o.frozen;
  for (ir::Value* p : s.model.params) {
    if (unknown.erase(p->name()) > 0 || s.model.frozen.contains(p->name())) continue;
    if (is_half_float(p->dtype()))
      throw InvalidArgument("parameter `" + p->name() + "` is " + p->type().str() +
                            ": a trained parameter keeps an f32 master; only frozen ones are " +
                            "held in 16 bits");
    trained.push_back(p);
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
  optimizer.loss_scaling = o.scales_loss();
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
  if (!s.schedule) throw InvalidArgument("stage `remat` needs `schedule` before it");
  s.schedule->candidates = memory::remat_candidates(s.graph(), *s.schedule, o.memory);
  return !s.schedule->candidates.empty();
}

// The pipeline, in order. Each line says why the stage is where it is.
const std::vector<Stage>& stages() {
  static const std::vector<Stage> list = {
      {"loss", always, loss_output, "the loss becomes the graph's one output, `loss`"},
      {"verify", always},
      {"canonicalize", always},
      {"cse", always},
      {"dce", always},
      // Before attention, which then finds exported attention (keys transposed, scores scaled).
      {"layers", always},
      // Before autodiff, so that attention's gradient is one attention_grad too.
      {"attention", [](const TrainerOptions& o) { return o.fuse_attention; }},
      {"linear_cross_entropy", [](const TrainerOptions& o) { return o.fuse_cross_entropy; }},
      // On the forward graph, so that autodiff gives the backward the forward's dtypes.
      {"precision", [](const TrainerOptions& o) { return o.precision != DType::kF32; }},
      {"training_step", always, training_step,
       "autodiff and the optimizer: backward, gradient norm, clipping, updates (with ranks: the "
       "global batch's loss, gradients summed over the ranks in buckets)"},
      {"backward_recompute", [](const TrainerOptions& o) { return o.backward_recompute; }},
      // After autodiff: causal attention's products in both directions skip their zero triangle.
      {"tril", always},
      {"fusion", [](const TrainerOptions& o) { return o.jit; }, fusion,
       "memory-bound nodes grouped into `fused` kernels"},
      // Over the graph that runs, fused or not: the governor's order names its nodes.
      {"schedule", always, schedule,
       "the op order with the lowest peak of live bytes, and its liveness"},
      {"remat", always, remat,
       "eviction candidates and how each is regenerated (with a memory cap)"},
  };
  return list;
}

const Stage& stage_named(const std::string& name) {
  std::string names;
  for (const Stage& s : stages()) {
    if (name == s.name) return s;
    names += (names.empty() ? "" : ", ") + std::string(s.name);
  }
  throw InvalidArgument("no pipeline stage named `" + name + "`; the stages are " + names);
}

void check_stage(const std::string& name) {
  stage_named(name);
}

// The stages a run goes through: all of them, or those only() names, in its order.
std::vector<const Stage*> order_of(const std::optional<std::vector<std::string>>& only) {
  std::vector<const Stage*> order;
  if (only)
    for (const std::string& name : *only) order.push_back(&stage_named(name));
  else
    for (const Stage& s : stages()) order.push_back(&s);
  return order;
}

}  // namespace

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= s.size();) {
    const size_t comma = std::min(s.find(',', start), s.size());
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::set<std::string> split_names(const std::string& s) {
  const std::vector<std::string> list = split_list(s);
  return {list.begin(), list.end()};
}

std::vector<std::string> Pipeline::stage_descriptions() {
  std::vector<std::string> out;
  for (const Stage& s : stages())
    out.push_back(std::string(s.name) + ": " +
                  (s.summary ? s.summary : std::string(ir::make_pass(s.name)->summary())));
  return out;
}

void Pipeline::disable(const std::string& stage) {
  check_stage(stage);
  disabled_.insert(stage);
}

void Pipeline::only(std::vector<std::string> stages) {
  bool fused = false;
  for (const std::string& s : stages) {
    check_stage(s);
    // The stages before fusion change the unfused graph, which a fused step no longer runs.
    if (fused && s != "schedule" && s != "remat")
      throw InvalidArgument("stage `" + s + "` changes the unfused graph: name it before `fusion`");
    fused = fused || s == "fusion";
  }
  only_ = std::move(stages);
}

void Pipeline::after(std::set<std::string> stages, Hook hook) {
  for (const std::string& s : stages)
    if (s != "all") check_stage(s);
  hooks_.emplace_back(std::move(stages), std::move(hook));
}

void Pipeline::dump_after(const std::string& stages, std::ostream& out) {
  after(split_names(stages), [&out](const std::string& stage, CompiledStep& s) {
    out << "// ----- after " << stage << " -----\n" << print_stage(stage, s);
  });
}

CompiledStep Pipeline::run(ir::models::Model model) {
  CompiledStep s{.model = std::move(model)};
  runs_.clear();
  const auto begin = std::chrono::steady_clock::now();
  const std::vector<const Stage*> order = order_of(only_);
  const int count = static_cast<int>(order.size());
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
  for (const Stage* at : order) {
    const Stage& stage = *at;
    StageRun r{.stage = stage.name};
    r.skipped = (!only_ && !stage.on(options_)) || disabled_.contains(stage.name);
    // The executor needs an order: without the schedule stage, the graph's own.
    if (r.skipped && r.stage == "schedule")
      s.schedule = memory::schedule_ops(s.graph(), {.schedule = false});
    if (!r.skipped) {
      report(r.stage, false);
      const auto start = std::chrono::steady_clock::now();
      try {
        r.changed = stage.run ? stage.run(s, options_) : run_pass(stage.name, s, options_);
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
