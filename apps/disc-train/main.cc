// disc-train: train a model from a YAML config.
//
//   disc-train run --config configs/default.yaml train.steps=100 logging.metrics=out/m.jsonl
//   disc-train run --config run.yaml --resume
//   disc-train print-config --config run.yaml      (every key, resolved, with its help)
//   disc-train validate --config run.yaml          (checks config, data and model; writes nothing)
//   disc-train plan --config run.yaml [--shape B=8,S=64]  (schedule, evictions, memory plan)
//   disc-train export --config run.yaml --to DIR   (the llama as a Hugging Face folder)
//   disc-train eval --config run.yaml              (the held-out loss of the newest checkpoint)
//
// Bad input: one line on stderr naming what and where, exit code 2, nothing written.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "base/error.h"
#include "base/version.h"
#include "config.h"
#include "devices/cpu/openmp_spin.h"
#include "engine/pipeline.h"
#include "engine/world.h"
#include "evaluation.h"
#include "export.h"
#include "run.h"

namespace {

// https://no-color.org: a non-empty NO_COLOR turns colour off.
void honour_no_color() {
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color == nullptr || *no_color == '\0') return;
  for (auto& sink : spdlog::default_logger()->sinks()) {
    if (auto* color = dynamic_cast<spdlog::sinks::stdout_color_sink_mt*>(sink.get()))
      color->set_color_mode(spdlog::color_mode::never);
  }
}

// Bad input's one line and exit code 2. In a data-parallel run the failing rank ends every rank
// (the others would wait for it forever in the step's next collective).
int refuse(const char* what) {
  std::cerr << "disc-train: " << what << "\n";
  if (auto world = disc::engine::mpi_world_if_started(); world && world->size() > 1) {
    std::cerr.flush();
    world->abort(2);
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  disc::devices::cpu::run_again_with_short_openmp_spin(argv);
  honour_no_color();
  CLI::App app{"disc-train: train dynamic-shape models with disc from a YAML config"};
  app.set_version_flag("--version", std::string("disc-train ") + disc::version());
  app.require_subcommand(1);
  std::string config;
  std::vector<std::string> overrides;
  disc::apps::RunFlags flags;
  auto add_common = [&](CLI::App* sub) {
    sub->add_option("--config,-c", config, "YAML config (defaults when omitted)");
    sub->add_option("overrides", overrides,
                    "key=value overrides, e.g. train.steps=100 memory.cap=2GiB");
  };
  CLI::App* run = app.add_subcommand("run", "Train");
  add_common(run);
  run->add_flag("--resume", flags.resume,
                "Continue from the newest complete checkpoint in checkpoint.dir");
  run->add_flag("--allow-changes", flags.allow_changes,
                "With --resume: continue although keys that change the numbers (model, data, "
                "optimizer, schedule, seed) differ from the checkpoint's run");
  CLI::App* print = app.add_subcommand("print-config", "Print the resolved config with defaults");
  add_common(print);
  CLI::App* check =
      app.add_subcommand("validate", "Check the config, the data and the model; write nothing");
  add_common(check);
  CLI::App* show = app.add_subcommand("plan",
                                      "Print symbols, the op schedule, eviction candidates and the "
                                      "memory plan (for a memory.cap too small, where it fails)");
  add_common(show);
  std::string shape, dump;
  show->add_option("--shape", shape,
                   "symbol values for the memory plan, e.g. B=8,S=64 (default: upper bounds)");
  std::string stages =
      "also print what these compile pipeline stages made (comma-separated, or 'all'):";
  for (const std::string& d : disc::engine::Pipeline::stage_descriptions()) stages += "\n  " + d;
  show->add_option("--dump-after", dump, stages);
  bool json = false;
  show->add_flag("--json", json,
                 "print the summary alone, as JSON (shape, symbols, peaks, lower bound, smallest "
                 "cap)");
  CLI::App* hf = app.add_subcommand(
      "export",
      "Write the llama as a Hugging Face folder (config.json, safetensors), or a model.onnx "
      "model as an ONNX file with its initializers trained, from the newest checkpoint in "
      "checkpoint.dir, or the initial weights when there is none");
  add_common(hf);
  std::string to, from;
  hf->add_option("--to", to,
                 "the folder to write (new, or empty); for model.onnx, FILE.onnx (new, unless "
                 "--force)")
      ->required();
  hf->add_option("--checkpoint", from, "a checkpoint folder to export instead of the newest");
  bool force = false;
  hf->add_flag("--force", force, "replace what --to names when it exists");
  CLI::App* eval = app.add_subcommand(
      "eval",
      "Print the loss over eval.path's held-out examples of the newest checkpoint in "
      "checkpoint.dir, or of the weights a run starts from (model.hf's: a merged export's)");
  add_common(eval);
  std::string eval_from;
  eval->add_option("--checkpoint", eval_from, "a checkpoint folder to evaluate instead");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2, as bad configs do.
    return app.exit(e) == 0 ? 0 : 2;
  }

  try {
    auto c = disc::apps::Config::load(config, overrides);
    if (*print) {
      std::cout << c.to_yaml();
      return 0;
    }
    if (*check) return disc::apps::validate(c);
    if (*show) return disc::apps::plan(c, shape, dump, json);
    if (*hf) return disc::apps::export_model(c, to, from, force);
    if (*eval) return disc::apps::evaluate_command(c, eval_from);
    return disc::apps::run_training(c, flags);
  } catch (const disc::Error& e) {
    return refuse(e.what());
  } catch (const std::exception& e) {  // a library's own error (filesystem, YAML): still one line
    return refuse(e.what());
  }
}
