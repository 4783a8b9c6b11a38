// disc-opt: reads a graph file, runs the named passes, prints the resulting graph and what the
// shape graph knows about its symbols.
//
//   disc-opt model.disc --passes=verify,canonicalize,cse,dce --facts
//   disc-opt model.disc --passes=canonicalize,dce --dump-after=canonicalize
//   disc-opt --model llama --train adamw            (the Trainer's compile pipeline on a model
//   family) disc-opt --model llama --train adamw --dump-after=fusion,schedule
#include <CLI/CLI.hpp>
#include <iostream>
#include <sstream>

#include "base/error.h"
#include "engine/pipeline.h"
#include "ir/binding.h"
#include "ir/models/model.h"
#include "ir/op_registry.h"
#include "ir/pass.h"
#include "ir/text_format.h"
#include "jit/fusion/fused_op.h"
#include "jit/fusion/fusion.h"
#include "memory/governor.h"
#include "onnx/import.h"

namespace {

std::string passes_help() {
  std::string s = "Passes, in order, comma-separated. Available:";
  for (const auto& name : disc::ir::pass_names()) {
    auto p = disc::ir::make_pass(name);
    s += "\n  " + name + ": " + std::string(p->summary());
  }
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

// The Trainer's compile pipeline (engine/pipeline.h) on a model family's training step: the
// step graph the executor would run, and with `dump` each named stage's result as it ends.
std::unique_ptr<disc::ir::Graph> compile_step(disc::ir::models::Model model,
                                              const std::string& train, const std::string& dump,
                                              const std::string& disable, bool stats) {
  disc::engine::TrainerOptions options;
  if (train == "sgd")
    options.optimizer.kind = disc::ir::OptimizerConfig::Kind::kSgd;
  else if (train != "adamw")
    throw disc::InvalidArgument("unknown optimizer `" + train + "`; use adamw or sgd");
  options.optimizer.clip_norm = 1.0;
  disc::engine::Pipeline pipeline(options);
  pipeline.progress([](const disc::engine::CompileProgress& p) {
    std::cerr << disc::engine::progress_line(p) << "\n";
  });
  for (const auto& name : disc::engine::split_names(disable)) pipeline.disable(name);
  if (!dump.empty()) {
    pipeline.after(disc::engine::split_names(dump),
                   [](const std::string& stage, disc::engine::CompiledStep& s) {
                     std::cout << "// ----- after " << stage << " -----\n"
                               << disc::engine::Pipeline::print_stage(stage, s);
                   });
  }
  disc::engine::CompiledStep step = pipeline.run(std::move(model));
  if (stats) {
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

disc::ir::models::Model onnx_model(const std::string& file) {
  disc::onnx::Imported imported = disc::onnx::import_file(file);
  return disc::onnx::language_model(imported);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"disc-opt: run graph passes on a disc graph file and print the result"};
  std::string file, passes = "verify", dump, disable, output;
  bool facts = false, stats = false, list_ops = false;
  std::string model, train;
  app.add_option("file", file,
                 "Graph file in the disc text format ('-' reads standard input), or an ONNX model "
                 "(FILE.onnx: its dim_params become symbols; with --train, trained with the "
                 "cross-entropy against `targets` added)");
  app.add_option("--passes", passes, passes_help())->capture_default_str();
  app.add_option("--dump-after", dump,
                 "Print the graph after these passes (comma-separated, or 'all'); with --train, "
                 "after these pipeline stages");
  app.add_option("--disable", disable,
                 "Skip these passes (comma-separated); with --train, these pipeline stages");
  app.add_flag("--facts", facts, "Print the symbolic shape facts after the graph");
  app.add_flag("--stats", stats, "Print per-pass timing and whether each changed the graph");
  app.add_flag("--list-ops", list_ops, "List every op in the registry and exit");
  app.add_option("--model", model,
                 "Instead of a file, build a model family: llama, gpt2, mlp, cnn");
  std::string stages =
      "With --model: the training step as the Trainer compiles it, with this optimizer: adamw or "
      "sgd. "
      "The pipeline's stages:";
  for (const std::string& d : disc::engine::Pipeline::stage_descriptions()) stages += "\n  " + d;
  app.add_option("--train", train, stages);
  bool memory = false, offload = false;
  int64_t cap = 0;
  std::string shape;
  app.add_flag(
      "--memory", memory,
      "Print the memory governor's schedule (bytes held per step), eviction candidates and plan");
  app.add_option("--cap", cap, "With --memory: the cap in bytes for the plan (0: none)");
  app.add_option(
      "--shape", shape,
      "With --memory: symbol values for the plan, e.g. B=8,S=64 (default: upper bounds)");
  app.add_flag("--offload", offload,
               "With --memory: allow offload to the host as well as recompute");
  bool fuse = false;
  app.add_flag("--fuse", fuse,
               "After the passes, plan the fusion of memory-bound ops: print the plan (which nodes "
               "land in which kernel) and the graph with `fused` nodes");
  CLI11_PARSE(app, argc, argv);

  if (list_ops) {
    print_ops();
    return 0;
  }
  if (file.empty() == model.empty()) {
    std::cerr << "disc-opt: give a graph file or --model (not both); run `disc-opt --help`\n";
    return 2;
  }
  try {
    disc::jit::register_fused_op();  // files may hold fused nodes
    std::unique_ptr<disc::ir::Graph> g;
    const bool onnx = file.ends_with(".onnx");
    if (!train.empty()) {
      if (model.empty() && !onnx) throw disc::InvalidArgument("--train needs --model or FILE.onnx");
      g = compile_step(onnx ? onnx_model(file) : build_model(model), train, dump, disable, stats);
      if (dump.empty()) std::cout << disc::ir::print_graph(*g);
      if (facts) print_facts(*g);
      if (memory) print_memory(*g, {.cap = cap, .offload = offload}, shape);
      return 0;
    }
    if (!model.empty()) {
      disc::ir::models::Model m = build_model(model);
      m.graph->add_output("loss", m.loss);
      g = std::move(m.graph);
    } else if (onnx) {
      g = std::move(disc::onnx::import_file(file).graph);
    } else if (file == "-") {
      std::string text((std::istreambuf_iterator<char>(std::cin)),
                       std::istreambuf_iterator<char>());
      g = disc::ir::parse_graph(text, "<stdin>");
    } else {
      g = disc::ir::parse_graph_file(file);
    }
    disc::ir::PassManager pm;
    pm.add_list(passes);
    for (const auto& name : disc::engine::split_names(disable)) {
      disc::ir::make_pass(name);  // rejects a misspelt name
      pm.disable(name);
    }
    if (!dump.empty()) {
      pm.dump_after(disc::engine::split_names(dump), [](const std::string& pass,
                                                        const disc::ir::Graph& graph) {
        std::cout << "// ----- after " << pass << " -----\n" << disc::ir::print_graph(graph);
      });
    }
    auto runs = pm.run(*g);
    if (fuse) {
      const disc::jit::FusionPlan plan = disc::jit::plan_fusion(*g);
      std::cout << "// ----- fusion plan -----\n";
      std::istringstream lines(plan.str());
      for (std::string line; std::getline(lines, line);) std::cout << "// " << line << "\n";
      g = disc::jit::apply_fusion(*g, plan);
    }
    if (dump.empty()) std::cout << disc::ir::print_graph(*g);
    if (facts) print_facts(*g);
    if (memory) print_memory(*g, {.cap = cap, .offload = offload}, shape);
    if (stats) {
      for (const auto& r : runs) {
        std::cerr << "pass " << r.pass << ": "
                  << (r.skipped   ? "disabled"
                      : r.changed ? "changed"
                                  : "unchanged")
                  << ", " << r.ms << " ms\n";
      }
    }
  } catch (const disc::Error& e) {
    std::cerr << "disc-opt: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
