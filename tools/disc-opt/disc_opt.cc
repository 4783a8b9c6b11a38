// disc-opt: runs the compile pipeline's stages (engine/pipeline.h) over a graph file, or every
// stage over a model family's training step, and prints the result and what the shape graph knows
// about its symbols.
//
//   disc-opt model.disc --passes=verify,canonicalize,cse,dce --facts
//   disc-opt model.disc --passes=canonicalize,dce --dump-after=canonicalize
//   disc-opt model.disc --fuse                          # the fusion stage's plan and graph
//   disc-opt --model llama --train adamw --dump-after=fusion,schedule
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <set>
#include <sstream>

#include "base/error.h"
#include "engine/pipeline.h"
#include "formats/onnx/import.h"
#include "ir/binding.h"
#include "ir/models/model.h"
#include "ir/op_registry.h"
#include "ir/passes/passes.h"
#include "ir/text_format.h"
#include "jit/fusion/fused_op.h"
#include "memory/governor.h"

namespace {

struct Flags {
  std::string file, model, train, passes = "verify", dump, disable, precision, shape;
  bool facts = false, stats = false, list_ops = false, fuse = false, memory = false,
       offload = false;
  int64_t cap = 0;
};

std::string passes_help() {
  std::string s =
      "Pipeline stages to run over the file's graph, in this order, comma-separated: its graph "
      "passes, fusion, schedule (loss and training_step need --train). The stages:";
  for (const std::string& d : disc::engine::Pipeline::stage_descriptions()) s += "\n  " + d;
  return s;
}

void print_facts(const disc::ir::Graph& g) {
  std::cout << "// symbolic shape facts:\n";
  auto facts = g.shapes().facts();
  if (facts.empty()) std::cout << "//   (none beyond the declared ranges)\n";
  for (const auto& f : facts) std::cout << "//   " << f << "\n";
}

void print_ops() {
  for (const auto* op : disc::ir::OpRegistry::instance().all()) {
    std::cout << op->name << " [" << disc::ir::category_name(op->category) << "]: " << op->summary
              << "\n";
  }
}

// A model family at its default (small) size.
disc::ir::models::Model build_model(const std::string& family) {
  namespace m = disc::ir::models;
  return family == "llama"  ? m::build_llama({})
         : family == "gpt2" ? m::build_gpt2({})
         : family == "mlp"  ? m::build_mlp({})
         : family == "cnn"  ? m::build_cnn({})
                            : throw disc::InvalidArgument("unknown model `" + family +
                                                          "`; models: llama, gpt2, mlp, cnn");
}

// What the flags name: a model family or an ONNX file (trained with --train), else a graph file
// (or standard input) with no loss to train.
disc::ir::models::Model load(const Flags& f) {
  const bool onnx = f.file.ends_with(".onnx");
  if (!f.train.empty()) {
    if (f.model.empty() && !onnx) throw disc::InvalidArgument("--train needs --model or FILE.onnx");
    if (!onnx) return build_model(f.model);
    disc::onnx::Imported imported = disc::onnx::import_file(f.file);
    return disc::onnx::language_model(imported);
  }
  if (!f.model.empty()) {
    disc::ir::models::Model m = build_model(f.model);
    m.graph->add_output("loss", m.loss);
    return m;
  }
  if (onnx) return {.graph = std::move(disc::onnx::import_file(f.file).graph)};
  if (f.file != "-") return {.graph = disc::ir::parse_graph_file(f.file)};
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  return {.graph = disc::ir::parse_graph(text, "<stdin>")};
}

// The compile pipeline (engine/pipeline.h) over `model`: with --train, every stage the Trainer
// runs for that optimizer; else the stages --passes names. Prints what --dump-after, --fuse and
// --stats ask for; returns the graph the executor would run.
std::unique_ptr<disc::ir::Graph> compile(disc::ir::models::Model model, const Flags& f) {
  disc::engine::TrainerOptions options;
  if (f.train == "sgd")
    options.optimizer.kind = disc::ir::OptimizerConfig::Kind::kSgd;
  else if (!f.train.empty() && f.train != "adamw")
    throw disc::InvalidArgument("unknown optimizer `" + f.train + "`; use adamw or sgd");
  options.optimizer.clip_norm = 1.0;
  // Over a file, the precision stage runs when named, in bf16 unless told; a step trains in f32
  // unless told.
  const std::string precision = !f.precision.empty() ? f.precision
                                : f.train.empty()    ? "bf16"
                                                     : "f32";
  const std::optional<disc::DType> dtype = disc::parse_dtype(precision);
  if (!dtype) throw disc::InvalidArgument("--precision " + precision + ": use bf16 or f16");
  disc::ir::check_precision(*dtype);
  options.precision = *dtype;
  disc::engine::Pipeline pipeline(options);
  pipeline.progress([](const disc::engine::CompileProgress& p) {
    std::cerr << disc::engine::progress_line(p) << "\n";
  });
  if (f.train.empty()) {
    std::vector<std::string> stages = disc::engine::split_list(f.passes);
    if (f.fuse && std::find(stages.begin(), stages.end(), "fusion") == stages.end())
      stages.push_back("fusion");
    pipeline.only(std::move(stages));
  }
  for (const auto& name : disc::engine::split_names(f.disable)) pipeline.disable(name);
  if (!f.dump.empty()) pipeline.dump_after(f.dump, std::cout);
  disc::engine::CompiledStep step = pipeline.run(std::move(model));
  const std::set<std::string> dumped = disc::engine::split_names(f.dump);
  if (f.fuse && step.fusion && !dumped.contains("fusion") && !dumped.contains("all"))
    std::cout << disc::engine::Pipeline::print_fusion_plan(*step.fusion);
  if (f.stats) {
    for (const auto& r : pipeline.runs())
      std::cerr << "stage " << r.stage << ": "
                << (r.skipped   ? "skipped"
                    : r.changed ? "changed"
                                : "unchanged")
                << ", " << r.ms << " ms\n";
  }
  return step.fused ? std::move(step.fused) : std::move(step.model.graph);
}

// The governor's view of the graph: schedule with symbolic bytes, candidates, plan at `shape`
// (nothing is held before the step: the plan counts produced values only).
void print_memory(const disc::ir::Graph& g, const disc::memory::GovernorOptions& options,
                  const std::string& shape) {
  disc::memory::Governor gov(g, options);
  const disc::ir::Bindings b = disc::ir::parse_bindings(shape, g, disc::ir::largest_bindings(g));
  std::cout << "// ----- memory -----\n"
            << disc::memory::print_schedule(g, gov.liveness()) << gov.report(b, 0);
}

void add_flags(CLI::App& app, Flags& f) {
  app.add_option("file", f.file,
                 "Graph file in the disc text format ('-' reads standard input), or an ONNX model "
                 "(FILE.onnx: its dim_params become symbols; with --train, trained with the "
                 "cross-entropy against `targets` added)");
  app.add_option("--passes", f.passes, passes_help())->capture_default_str();
  app.add_option("--dump-after", f.dump,
                 "Print the result after these stages (comma-separated, or 'all')");
  app.add_option("--disable", f.disable, "Skip these stages (comma-separated)");
  app.add_option("--precision", f.precision,
                 "The precision stage's low dtype: bf16 (default over a file) or f16; with "
                 "--train, the step's precision (f32 by default)");
  app.add_flag("--facts", f.facts, "Print the symbolic shape facts after the graph");
  app.add_flag("--stats", f.stats, "Print per-stage timing and whether each changed the graph");
  app.add_flag("--list-ops", f.list_ops, "List every op in the registry and exit");
  app.add_option("--model", f.model,
                 "Instead of a file, build a model family: llama, gpt2, mlp, cnn");
  app.add_option("--train", f.train,
                 "With --model or FILE.onnx: every stage of the training step as the Trainer "
                 "compiles it, with this optimizer: adamw or sgd (the stages: see --passes)");
  app.add_flag(
      "--memory", f.memory,
      "Print the memory governor's schedule (bytes held per step), eviction candidates and plan");
  app.add_option("--cap", f.cap, "With --memory: the cap in bytes for the plan (0: none)");
  app.add_option(
      "--shape", f.shape,
      "With --memory: symbol values for the plan, e.g. B=8,S=64 (default: upper bounds)");
  app.add_flag("--offload", f.offload,
               "With --memory: allow offload to the host as well as recompute");
  app.add_flag("--fuse", f.fuse,
               "After the stages, the fusion stage: print its plan (which nodes land in which "
               "kernel) and the graph with `fused` nodes");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "disc-opt: run the compile pipeline's stages on a disc graph file and print the result"};
  Flags f;
  add_flags(app, f);
  CLI11_PARSE(app, argc, argv);

  if (f.list_ops) {
    print_ops();
    return 0;
  }
  if (f.file.empty() == f.model.empty()) {
    std::cerr << "disc-opt: give a graph file or --model (not both); run `disc-opt --help`\n";
    return 2;
  }
  try {
    disc::jit::register_fused_op();  // files may hold fused nodes
    std::unique_ptr<disc::ir::Graph> g = compile(load(f), f);
    if (f.dump.empty()) std::cout << disc::ir::print_graph(*g);
    if (f.facts) print_facts(*g);
    if (f.memory) print_memory(*g, {.cap = f.cap, .offload = f.offload}, f.shape);
  } catch (const disc::Error& e) {
    std::cerr << "disc-opt: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
