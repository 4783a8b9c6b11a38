// bench_compile: compile time against graph size, stage by stage, to show that compiling grows
// near-linearly with the number of nodes (issue 31, item 9: fusion was quadratic in a group's
// size, the schedule and the remat candidates in the number of layers).
//
// Three families, each at growing sizes, through the Trainer's compile pipeline (engine/pipeline.h)
// with the JIT on, as `disc-train` compiles them:
//   chain   a forward chain of N elementwise nodes over f32[B, 256] (a matmul every 8th node with
//           --matmul), text the parser reads, ending in a scalar loss: one long fusion group
//   relus   a GEMM and a chain of N relus (1000, 3000, 9000, 27000 and --max-relus)
//   llama   ir::models::build_llama with L layers
// Each row prints the nodes after the pipeline, every stage's milliseconds and the whole compile
// in microseconds per node: flat columns mean linear growth.
//
// usage: bench_compile [--max-chain N] [--max-relus N] [--max-layers L | --layers 16,32,64,96]
//                      [--matmul]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/pipeline.h"
#include "ir/text_format.h"
#include "timing.h"

namespace disc::bench {
namespace {

// A chain of `n` relus after a GEMM, as a hostile ONNX file makes one (issue 52: 30,000 of them
// crashed the compile): the backward is a select of a compare per relu, and backward_recompute
// makes the whole chain again.
std::string relu_chain_text(int n) {
  std::string s =
      "graph @relus {\n  sym B in [1, 512] hint 64\n  input %x : f32[B, 16]\n"
      "  param %w : f32[16, 16]\n  %v0 = matmul(%x, %w) : f32[B, 16]\n";
  for (int i = 1; i <= n; ++i)
    s += "  %v" + std::to_string(i) + " = relu(%v" + std::to_string(i - 1) + ") : f32[B, 16]\n";
  s += "  %loss = reduce_sum(%v" + std::to_string(n) +
       ") {axes = [0, 1], keepdims = false} : f32[]\n";
  return s + "  output loss = %loss\n}\n";
}

// A chain of `n` nodes: add, mul, tanh, sub over x in turn; with `matmul`, every 8th a GEMM.
std::string chain_text(int n, bool matmul) {
  std::string s =
      "graph @chain {\n  sym B in [1, 512] hint 64\n  input %x : f32[B, 256]\n"
      "  param %w : f32[256, 256]\n";
  std::string prev = "%x";
  static const char* kOps[] = {"add", "mul", "tanh", "sub"};
  for (int i = 0; i < n; ++i) {
    const std::string v = "%v" + std::to_string(i);
    const std::string op = kOps[i % 4];
    if (matmul && i % 8 == 7)
      s += "  " + v + " = matmul(" + prev + ", %w) : f32[B, 256]\n";
    else if (op == "tanh")
      s += "  " + v + " = tanh(" + prev + ") : f32[B, 256]\n";
    else
      s += "  " + v + " = " + op + "(" + prev + ", %x) : f32[B, 256]\n";
    prev = v;
  }
  s += "  %loss = reduce_sum(" + prev + ") {axes = [0, 1], keepdims = false} : f32[]\n";
  return s + "  output loss = %loss\n}\n";
}

struct Row {
  std::string what;
  size_t nodes = 0;
  double parse_ms = 0, total_ms = 0;
  std::vector<engine::StageRun> stages;
};

Row compile(const std::string& what, ir::models::Model model, double parse_ms) {
  engine::TrainerOptions options;
  options.optimizer.clip_norm = 1.0;
  engine::Pipeline pipeline(options);
  const double start = now_seconds();
  engine::CompiledStep step = pipeline.run(std::move(model));
  Row r{.what = what, .parse_ms = parse_ms, .stages = pipeline.runs()};
  r.total_ms = (now_seconds() - start) * 1e3 + parse_ms;
  r.nodes = step.model.graph->num_nodes();
  return r;
}

void print_header(const Row& r) {
  std::printf("%-12s %8s %8s", "graph", "nodes", "parse");
  for (const engine::StageRun& s : r.stages)
    if (!s.skipped)
      std::printf(" %*s", std::max<int>(7, static_cast<int>(s.stage.size())), s.stage.c_str());
  std::printf(" %9s %8s\n", "total ms", "us/node");
}

void print_row(const Row& r) {
  std::printf("%-12s %8zu %8.1f", r.what.c_str(), r.nodes, r.parse_ms);
  for (const engine::StageRun& s : r.stages)
    if (!s.skipped) std::printf(" %*.1f", std::max<int>(7, static_cast<int>(s.stage.size())), s.ms);
  std::printf(" %9.1f %8.2f\n", r.total_ms, r.total_ms * 1e3 / static_cast<double>(r.nodes));
  std::fflush(stdout);
}

}  // namespace
}  // namespace disc::bench

int main(int argc, char** argv) {
  using namespace disc;
  CLI::App app{"bench_compile: compile time against nodes, per pipeline stage"};
  int max_chain = 100000, max_layers = 128, max_relus = 30000;
  bool matmul = false;
  std::vector<int> layer_counts;
  app.add_option("--max-chain", max_chain, "Largest chain, in forward nodes")
      ->capture_default_str();
  app.add_option("--max-layers", max_layers, "Most llama layers")->capture_default_str();
  app.add_option("--layers", layer_counts, "Llama layer counts (else 2, 4, ... up to --max-layers)")
      ->delimiter(',');
  app.add_option("--max-relus", max_relus, "Longest relu chain (0: none)")->capture_default_str();
  app.add_flag("--matmul", matmul, "A matmul every 8th chain node (many small fusion groups)");
  CLI11_PARSE(app, argc, argv);
  std::printf("bench_compile: %s\n(nodes: the training step's, after the pipeline; columns: ms)\n",
              bench::machine_load().c_str());
  std::vector<int> sizes;
  for (int n = 1000; n < max_chain; n *= 2) sizes.push_back(n);
  if (max_chain >= 1000) sizes.push_back(max_chain);
  bool header = false;
  for (int n : sizes) {
    const double start = bench::now_seconds();
    auto g = ir::parse_graph(bench::chain_text(n, matmul), "<chain>");
    const double parse_ms = (bench::now_seconds() - start) * 1e3;
    bench::Row r = bench::compile("chain " + std::to_string(n),
                                  ir::models::model_from_graph(std::move(g), 0.02), parse_ms);
    if (!header) bench::print_header(r), header = true;
    bench::print_row(r);
  }
  header = false;
  std::vector<int> relus;
  for (int n = 1000; n < max_relus; n *= 3) relus.push_back(n);
  if (max_relus > 0) relus.push_back(max_relus);
  for (int n : relus) {
    auto g = ir::parse_graph(bench::relu_chain_text(n), "<relus>");
    bench::Row r = bench::compile("relus " + std::to_string(n),
                                  ir::models::model_from_graph(std::move(g), 0.02), 0);
    if (!header) std::printf("\n"), bench::print_header(r), header = true;
    bench::print_row(r);
  }
  header = false;
  if (layer_counts.empty()) {
    for (int layers = 2; layers <= max_layers; layers *= 2) layer_counts.push_back(layers);
  }
  for (int layers : layer_counts) {
    bench::Row r = bench::compile("llama L" + std::to_string(layers),
                                  ir::models::build_llama({.layers = layers}), 0);
    if (!header) std::printf("\n"), bench::print_header(r), header = true;
    bench::print_row(r);
  }
  return 0;
}
