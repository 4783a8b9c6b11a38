// Every kind of bad input to disc-train: one clear line on stderr, exit code 2, nothing written.
#include <gtest/gtest.h>

#include "cli_test_util.h"

namespace disc::apps {
namespace {

using testing::Scratch;

struct BadInput {
  const char* name;
  const char* config;     // YAML ("" for none), written as run.yaml
  const char* overrides;  // appended to the command
  const char* message;    // must appear in the one line
};

class CliErrors : public ::testing::TestWithParam<BadInput> {};

TEST_P(CliErrors, OneLineExitTwoNothingWritten) {
  Scratch s;
  const BadInput& b = GetParam();
  std::string cmd = std::string(DISC_TRAIN) + " run";
  if (*b.config) cmd += " --config " + s.write("run.yaml", b.config);
  size_t before = s.entries();
  cmd += std::string(" ") + b.overrides + " logging.metrics=" + s.path("out/m.jsonl") +
         " checkpoint.dir=" + s.path("out/ck") + " logging.trace=" + s.path("out/t.json");
  auto r = testing::run_command(cmd);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_EQ(r.out.rfind("disc-train: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(b.message), std::string::npos) << r.out;
  EXPECT_EQ(s.entries(), before) << "something was written";
}

INSTANTIATE_TEST_SUITE_P(
    BadInputs, CliErrors,
    ::testing::Values(
        BadInput{"missing_config", "", "--config /nonexistent/run.yaml", "cannot open config file /nonexistent/run.yaml"},
        BadInput{"malformed_yaml", "train:\n  steps: [1, 2\n", "", "run.yaml:3:1: malformed YAML"},
        BadInput{"unknown_key", "train:\n  step: 5\n", "", "run.yaml:2:3: unknown key `train.step` (did you mean `train.steps`?)"},
        BadInput{"unknown_section", "trian:\n  steps: 5\n", "", "unknown key `trian`"},
        BadInput{"wrong_type", "train:\n  steps: many\n", "", "train.steps must be an integer, not `many`"},
        BadInput{"out_of_range", "train:\n  steps: 0\n", "", "train.steps must be in [1, "},
        BadInput{"bad_choice", "optimizer:\n  name: adam\n", "", "must be one of adamw, sgd, not `adam` (did you mean `adamw`?)"},
        BadInput{"section_not_map", "model: llama\n", "", "`model` is a section and must hold keys"},
        BadInput{"bad_override_key", "", "train.stepz=3", "override `train.stepz=3`: unknown key `train.stepz` (did you mean `train.steps`?)"},
        BadInput{"bad_bytes", "", "memory.cap=lots", "memory.cap must be a byte size such as 2GiB or 512MiB, not `lots`"},
        BadInput{"override_without_value", "", "train.steps", "write overrides as key=value"},
        BadInput{"missing_dataset", "data:\n  source: jsonl\n  path: /nonexistent/data.jsonl\n", "", "/nonexistent/data.jsonl"},
        BadInput{"no_dataset_path", "data:\n  source: json\n", "", "data.path is empty"},
        BadInput{"heads_kv_mismatch", "model:\n  heads: 4\n  kv_heads: 3\n", "", "must be a multiple of model.kv_heads"},
        BadInput{"batch_over_bound", "data:\n  batch_size: 500\n", "", "exceeds model.max_batch"},
        BadInput{"resume_without_checkpoint", "", "--resume", "no complete checkpoint in"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(CliErrors, DatasetThatIsNotWhatTheConfigSays) {
  Scratch s;
  std::string list = s.write("list.json", "[{\"instruction\": \"a\", \"input\": \"\", \"output\": \"b\"}]\n");
  std::string cfg = s.write("run.yaml", "data:\n  source: jsonl\n  path: " + list + "\n");
  size_t before = s.entries();
  auto r = testing::run_command(std::string(DISC_TRAIN) + " run --config " + cfg + " logging.metrics=" + s.path("m.jsonl"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find("list.json:1"), std::string::npos) << r.out;
  EXPECT_EQ(s.entries(), before);
}

TEST(Cli, PrintConfigRoundTripsThroughLoad) {
  Scratch s;
  auto printed = testing::run_command(std::string(DISC_TRAIN) + " print-config train.steps=7 memory.cap=2GiB");
  ASSERT_EQ(printed.code, 0) << printed.out;
  EXPECT_NE(printed.out.find("steps: 7"), std::string::npos);
  EXPECT_NE(printed.out.find("cap: 2GiB"), std::string::npos);
  std::string cfg = s.write("printed.yaml", printed.out);
  auto again = testing::run_command(std::string(DISC_TRAIN) + " print-config --config " + cfg);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(again.out, printed.out);
}

TEST(Cli, ValidateWritesNothingAndPlanShowsSymbols) {
  Scratch s;
  auto v = testing::run_command(std::string(DISC_TRAIN) + " validate model.hidden=32 logging.metrics=" + s.path("m.jsonl"));
  EXPECT_EQ(v.code, 0) << v.out;
  EXPECT_NE(v.out.find("config OK"), std::string::npos) << v.out;
  EXPECT_FALSE(std::filesystem::exists(s.path("m.jsonl")));
  auto p = testing::run_command(std::string(DISC_TRAIN) + " plan model.hidden=32");
  EXPECT_EQ(p.code, 0) << p.out;
  EXPECT_NE(p.out.find("S in [1, 128]"), std::string::npos) << p.out.substr(0, 400);
  EXPECT_NE(p.out.find("adamw_update"), std::string::npos);
}

TEST(Cli, TrainsAForwardGraphReadFromAFile) {
  Scratch s;
  std::string graph = std::string(DISC_TEST_DATA_DIR) + "/graphs/llama.disc";
  auto r = testing::run_command(std::string(DISC_TRAIN) + " run model.graph=" + graph +
                                " train.steps=3 data.synthetic.max_len=32 logging.progress=none logging.metrics=" + s.path("m.jsonl"));
  EXPECT_EQ(r.code, 0) << r.out;
  std::ifstream in(s.path("m.jsonl"));
  EXPECT_EQ(std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n'), 3);
  auto bad = testing::run_command(std::string(DISC_TRAIN) + " run model.graph=" + std::string(DISC_TEST_DATA_DIR) + "/graphs/mlp.disc");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("disc-train feeds `tokens` i32[B, S]"), std::string::npos) << bad.out;
}

TEST(Cli, HelpListsTheSubcommands) {
  auto r = testing::run_command(std::string(DISC_TRAIN) + " --help");
  EXPECT_EQ(r.code, 0);
  for (const char* sub : {"run", "print-config", "validate", "plan"}) EXPECT_NE(r.out.find(sub), std::string::npos) << sub;
}

}  // namespace
}  // namespace disc::apps
