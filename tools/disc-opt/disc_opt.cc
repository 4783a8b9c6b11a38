// disc-opt: reads a graph file, runs the named passes, prints the resulting graph and what the
// shape graph knows about its symbols.
//
//   disc-opt model.disc --passes=verify,canonicalize,cse,dce --facts
//   disc-opt model.disc --passes=canonicalize,dce --dump-after=canonicalize
//   disc-opt --model llama --train adamw            (a model family's training-step graph)
#include <CLI/CLI.hpp>
#include <iostream>
#include <sstream>

#include "ir/error.h"
#include "ir/models/model.h"
#include "ir/op_registry.h"
#include "ir/training_step.h"
#include "ir/pass.h"
#include "ir/text_format.h"
#include "jit/fused_op.h"
#include "jit/fusion.h"
#include "memory/governor.h"
#include "memory/shapes.h"

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

// A model family at its default (small) size; with `train`, its whole training step.
std::unique_ptr<disc::ir::Graph> model_graph(const std::string& family, const std::string& train) {
  namespace m = disc::ir::models;
  m::Model model = family == "llama" ? m::build_llama({})
                   : family == "gpt2" ? m::build_gpt2({})
                   : family == "mlp"  ? m::build_mlp({})
                   : family == "cnn"  ? m::build_cnn({})
                                      : throw disc::InvalidArgument("unknown model `" + family +
                                                                    "`; models: llama, gpt2, mlp, cnn");
  if (!train.empty()) {
    disc::ir::OptimizerConfig opt;
    if (train == "sgd") opt.kind = disc::ir::OptimizerConfig::Kind::kSgd;
    else if (train != "adamw") throw disc::InvalidArgument("unknown optimizer `" + train + "`; use adamw or sgd");
    opt.clip_norm = 1.0;
    disc::ir::build_training_step(*model.graph, model.loss, model.params, opt);
  } else {
    model.graph->add_output("loss", model.loss);
  }
  return std::move(model.graph);
}

// The governor's view of the graph: schedule with symbolic bytes, candidates, plan at `shape`
// (nothing is held before the step: the plan counts produced values only).
void print_memory(const disc::ir::Graph& g, const disc::memory::GovernorOptions& options, const std::string& shape) {
  disc::memory::Governor gov(g, options);
  const disc::ir::Bindings b = disc::memory::parse_bindings(shape, g, disc::memory::largest_bindings(g));
  std::cout << "// ----- memory -----\n" << disc::memory::print_schedule(g, gov.liveness()) << gov.report(b, 0);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"disc-opt: run graph passes on a disc graph file and print the result"};
  std::string file, passes = "verify", dump, disable, output;
  bool facts = false, stats = false, list_ops = false;
  std::string model, train;
  app.add_option("file", file, "Graph file in the disc text format ('-' reads standard input)");
  app.add_option("--passes", passes, passes_help())->capture_default_str();
  app.add_option("--dump-after", dump, "Print the graph after these passes (comma-separated, or 'all')");
  app.add_option("--disable", disable, "Skip these passes (comma-separated)");
  app.add_flag("--facts", facts, "Print the symbolic shape facts after the graph");
  app.add_flag("--stats", stats, "Print per-pass timing and whether each changed the graph");
  app.add_flag("--list-ops", list_ops, "List every op in the registry and exit");
  app.add_option("--model", model, "Instead of a file, build a model family: llama, gpt2, mlp, cnn");
  app.add_option("--train", train, "With --model: the training step (forward, backward, update) with this optimizer: adamw or sgd");
  bool memory = false, offload = false;
  int64_t cap = 0;
  std::string shape;
  app.add_flag("--memory", memory, "Print the memory governor's schedule (bytes held per step), eviction candidates and plan");
  app.add_option("--cap", cap, "With --memory: the cap in bytes for the plan (0: none)");
  app.add_option("--shape", shape, "With --memory: symbol values for the plan, e.g. B=8,S=64 (default: upper bounds)");
  app.add_flag("--offload", offload, "With --memory: allow offload to the host as well as recompute");
  bool fuse = false;
  app.add_flag("--fuse", fuse, "After the passes, plan the fusion of memory-bound ops: print the plan (which nodes land in which kernel) and the graph with `fused` nodes");
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
    if (!model.empty()) {
      g = model_graph(model, train);
    } else if (file == "-") {
      std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
      g = disc::ir::parse_graph(text, "<stdin>");
    } else {
      g = disc::ir::parse_graph_file(file);
    }
    disc::ir::PassManager pm;
    pm.add_list(passes);
    auto split = [](const std::string& s) {
      std::set<std::string> out;
      for (size_t start = 0; start <= s.size();) {
        size_t comma = std::min(s.find(',', start), s.size());
        if (comma > start) out.insert(s.substr(start, comma - start));
        start = comma + 1;
      }
      return out;
    };
    for (const auto& name : split(disable)) {
      disc::ir::make_pass(name);  // rejects a misspelt name
      pm.disable(name);
    }
    if (!dump.empty()) {
      pm.dump_after(split(dump), [](const std::string& pass, const disc::ir::Graph& graph) {
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
                  << (r.skipped ? "disabled" : r.changed ? "changed" : "unchanged") << ", "
                  << r.ms << " ms\n";
      }
    }
  } catch (const disc::Error& e) {
    std::cerr << "disc-opt: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
