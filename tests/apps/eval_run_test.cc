// The held-out loss of a run (eval.*) and `disc-train eval`: eval_loss every eval.every steps and
// at the end, in the metrics and the progress lines; the eval command gives a checkpoint's the
// run gave; bad input is one line, exit 2, and nothing written.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace disc::apps::testing {
namespace {

const char* kEvalRun =
    R"(model: {family: llama, hidden: 32, layers: 1, heads: 2, kv_heads: 1, ffn: 64}
data: {source: json, batch_size: 8, max_len: 48}
eval: {every: 10}
train: {steps: 25}
schedule: {lr: 3e-3, warmup_steps: 2}
logging: {every: 5, progress: lines}
checkpoint: {every: 25}
)";

std::string train(const Scratch& s) {
  return std::string(DISC_TRAIN) + " run --config " + s.path("run.yaml") +
         " data.path=" + s.path("train.json") + " eval.path=" + s.path("eval.json") +
         " logging.metrics=" + s.path("m.jsonl") + " checkpoint.dir=" + s.path("ck");
}

std::map<int64_t, double> eval_losses(const std::string& metrics) {
  std::map<int64_t, double> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("eval_loss")) out[j["step"].get<int64_t>()] = j["eval_loss"].get<double>();
  }
  return out;
}

TEST(EvalRun, EvalLossEveryEvalEveryStepsAndAtTheEndAndTheEvalCommandAgrees) {
  Scratch s;
  s.write("run.yaml", kEvalRun);
  s.write("train.json", count_records(120, 0));
  s.write("eval.json", count_records(30, 500));
  const Result r = run_command(train(s));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto evals = eval_losses(s.path("m.jsonl"));
  ASSERT_EQ(evals.size(), 3u) << r.out;  // steps 10, 20 and the last, 25
  EXPECT_TRUE(evals.contains(10) && evals.contains(20) && evals.contains(25));
  EXPECT_LT(evals.at(25), evals.at(10)) << "the held-out loss did not fall";
  EXPECT_NE(r.out.find("step 25/25 loss"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("eval_loss"), std::string::npos) << r.out;
  // The newest checkpoint (step 25) evaluated alone gives the run's last held-out loss.
  const std::string eval = std::string(DISC_TRAIN) + " eval --config " + s.path("run.yaml") +
                           " data.path=" + s.path("train.json") +
                           " eval.path=" + s.path("eval.json") + " checkpoint.dir=" + s.path("ck");
  const Result e = run_command(eval);
  ASSERT_EQ(e.code, 0) << e.out;
  char want[64];
  std::snprintf(want, sizeof want, "eval_loss %.6f over 30 examples", evals.at(25));
  EXPECT_NE(e.out.find(want), std::string::npos) << e.out << "\nwanted: " << want;
  // eval.max_examples takes the first N.
  const Result few = run_command(eval + " eval.max_examples=7");
  EXPECT_NE(few.out.find("over 7 examples"), std::string::npos) << few.out;
}

TEST(EvalRun, AMissingOrEmptyEvalFileIsOneLineExitTwoAndNothingWritten) {
  Scratch s;
  s.write("run.yaml", kEvalRun);
  s.write("train.json", count_records(40, 0));
  s.write("eval.json", "[]");
  Result r = run_command(train(s));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("eval.path: " + s.path("eval.json") + " holds no examples"),
            std::string::npos)
      << r.out;
  std::filesystem::remove(s.path("eval.json"));
  r = run_command(train(s));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("eval.path: cannot open"), std::string::npos) << r.out;
  EXPECT_EQ(s.entries(), 2u);  // run.yaml and train.json: no metrics, no checkpoints
  // Synthetic data has no file format to read eval.path in.
  r = run_command(std::string(DISC_TRAIN) + " validate eval.path=" + s.path("train.json"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("eval.path is set, but data.source is synthetic"), std::string::npos)
      << r.out;
  // The eval command without eval.path says what to set.
  r = run_command(std::string(DISC_TRAIN) + " eval --config " + s.path("run.yaml") +
                  " data.path=" + s.path("train.json"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("eval.path is empty"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace disc::apps::testing
