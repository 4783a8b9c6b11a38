// Training an ONNX model with disc-train, as a user would: `model.onnx` names a llama exported from
// PyTorch (tests/reference/llama.onnx, vocabulary 32); the run trains it from its initializers,
// `disc-train export` writes the trained weights back into a copy of the file, disc-opt prints the
// imported graph, and bad files are one line, exit 2, nothing written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli_test_util.h"
#include "formats/onnx/import.h"

namespace disc::apps {
namespace {

namespace fs = std::filesystem;
using testing::losses;
using testing::Result;
using testing::run_command;
using testing::Scratch;

const std::string kLlama = std::string(DISC_TEST_DATA_DIR) + "/reference/llama.onnx";

const char* kOnnxRun = R"(data:
  source: synthetic
  batch_size: 4
  synthetic:
    vocab: 32
    examples: 32
    min_len: 6
    max_len: 12
schedule:
  warmup_steps: 1
train:
  steps: 6
  seed: 2
logging:
  progress: none
checkpoint:
  every: 3
)";

TEST(OnnxRun, TrainsAnExportedModelAndExportsItsWeightsBack) {
  Scratch s;
  s.write("run.yaml", kOnnxRun);
  const std::string config = " --config " + s.path("run.yaml") + " model.onnx=" + kLlama + " ";
  Result r = run_command(std::string(DISC_TRAIN) + " run" + config + "logging.metrics=" +
                         s.path("m.jsonl") + " checkpoint.dir=" + s.path("ck"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("llama.onnx (ONNX, opset 17)"), std::string::npos) << r.out;
  EXPECT_EQ(losses(s.path("m.jsonl")).size(), 6u);

  Result e = run_command(std::string(DISC_TRAIN) + " export" + config +
                         "checkpoint.dir=" + s.path("ck") + " --to " + s.path("trained.onnx"));
  ASSERT_EQ(e.code, 0) << e.out;
  onnx::Imported source = onnx::import_file(kLlama),
                 trained = onnx::import_file(s.path("trained.onnx"));
  EXPECT_EQ(trained.weights.size(), source.weights.size());
  EXPECT_NE(trained.weights.at("l0.wq"), source.weights.at("l0.wq"));  // trained six steps

  // The exported model trains on from the trained weights: its first loss is below the source's.
  Result again = run_command(std::string(DISC_TRAIN) + " run --config " + s.path("run.yaml") +
                             " model.onnx=" + s.path("trained.onnx") + " train.steps=1 " +
                             "logging.metrics=" + s.path("again.jsonl") + " checkpoint.dir=");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_LT(std::stod(losses(s.path("again.jsonl")).at(1)),
            std::stod(losses(s.path("m.jsonl")).at(1)));

  Result opt = run_command(std::string(DISC_OPT) + " " + kLlama + " --facts");
  ASSERT_EQ(opt.code, 0) << opt.out;
  EXPECT_NE(opt.out.find("sym batch in [1, 4096]"), std::string::npos) << opt.out;
  EXPECT_NE(opt.out.find("input %tokens : i32[batch, seq]"), std::string::npos) << opt.out;
}

// Packed (data.packing): the same examples in one row a step, attention inside each example and
// RoPE (llama) or the learned position embeddings (gpt2) at each token's position in its own
// example. The packed run follows the padded one step for step; a token budget runs too.
TEST(OnnxRun, ExportedLlamaAndGpt2TrainPackedAsPadded) {
  Scratch s;
  s.write("run.yaml", kOnnxRun);
  for (const char* model : {"llama", "gpt2"}) {
    const std::string common = std::string(DISC_TRAIN) + " run --config " + s.path("run.yaml") +
                               " model.onnx=" + DISC_TEST_DATA_DIR + "/reference/" + model +
                               ".onnx checkpoint.dir= logging.metrics=" + s.path(model);
    Result padded = run_command(common + "-pad.jsonl");
    ASSERT_EQ(padded.code, 0) << padded.out;
    Result packed = run_command(common + "-pack.jsonl data.packing=true");
    ASSERT_EQ(packed.code, 0) << packed.out;
    EXPECT_NE(packed.out.find("(89% of the 216 positions computed)"), std::string::npos)
        << packed.out;  // 192 targets: each example's last token has none
    for (const char* key : {"loss", "grad_norm"}) {
      const auto want = testing::by_step(s.path(model) + "-pad.jsonl", key),
                 got = testing::by_step(s.path(model) + "-pack.jsonl", key);
      ASSERT_EQ(got.size(), 6u) << model;
      for (const auto& [step, v] : want) {
        const double a = std::stod(got.at(step)), b = std::stod(v);
        EXPECT_NEAR(a, b, 1e-5 * std::abs(b)) << model << " " << key << " step " << step;
      }
    }
    Result budget = run_command(common + "-budget.jsonl data.packing=true data.token_budget=40");
    ASSERT_EQ(budget.code, 0) << budget.out;
    EXPECT_EQ(losses(s.path(model) + "-budget.jsonl").size(), 6u) << model;
  }
}

TEST(OnnxRun, ABadModelIsOneLineExitTwoAndNothingWritten) {
  Scratch s;
  s.write("run.yaml", kOnnxRun);
  s.write("garbage.onnx", "not a protobuf \xff\xff\xff");
  for (const std::string& model : {s.path("garbage.onnx"), s.path("missing.onnx")}) {
    for (const std::string& tool :
         {std::string(DISC_TRAIN) + " run --config " + s.path("run.yaml") + " model.onnx=" + model +
              " logging.metrics=" + s.path("m.jsonl") + " checkpoint.dir=" + s.path("ck"),
          std::string(DISC_OPT) + " " + model}) {
      Result r = run_command(tool);
      EXPECT_EQ(r.code, 2) << r.out;
      EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
      EXPECT_NE(r.out.find(model), std::string::npos) << r.out;
    }
  }
  EXPECT_FALSE(fs::exists(s.path("m.jsonl")));
  EXPECT_FALSE(fs::exists(s.path("ck")));
  // A vocabulary smaller than the data's token ids is refused before the run.
  Result r = run_command(std::string(DISC_TRAIN) + " validate --config " + s.path("run.yaml") +
                         " model.onnx=" + kLlama + " data.synthetic.vocab=64");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("embedding %embed has 32 rows"), std::string::npos) << r.out;
  // Examples longer than a learned position table, padded or packed: refused before the run (it
  // failed at step 1, blaming the token ids).
  for (const char* packing : {"false", "true"}) {
    Result p =
        run_command(std::string(DISC_TRAIN) + " validate --config " + s.path("run.yaml") +
                    " model.onnx=" + DISC_TEST_DATA_DIR +
                    "/reference/gpt2.onnx data.synthetic.max_len=17 data.packing=" + packing);
    EXPECT_EQ(p.code, 2) << p.out;
    EXPECT_NE(p.out.find("position embedding %wpe has 16 rows, but the data's examples run to 17 "
                         "tokens: lower data.synthetic.max_len to 16"),
              std::string::npos)
        << p.out;
  }
}

// The ONNX export refuses an existing file as the Hugging Face export refuses a folder (it
// overwrote it silently), unless --force; and nothing inside checkpoint.dir, whose saves own it.
TEST(OnnxRun, ExportReplacesAFileOnlyWithForceAndNeverWritesIntoCheckpoints) {
  Scratch s;
  s.write("run.yaml", kOnnxRun);
  s.write("mine.onnx", "mine");
  const std::string exporting = std::string(DISC_TRAIN) + " export --config " + s.path("run.yaml") +
                                " model.onnx=" + kLlama + " ";
  Result r = run_command(exporting + "checkpoint.dir= --to " + s.path("mine.onnx"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("exists: name a new one, or pass --force"), std::string::npos) << r.out;
  std::ifstream mine(s.path("mine.onnx"));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(mine), {}), "mine");
  r = run_command(exporting + "checkpoint.dir= --to " + s.path("mine.onnx") + " --force");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(onnx::import_file(s.path("mine.onnx")).weights.size(),
            onnx::import_file(kLlama).weights.size());

  r = run_command(exporting + "checkpoint.dir=" + s.path("ck") + " --to " +
                  s.path("ck/step-00000006/model.onnx"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("inside checkpoint.dir"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(s.path("ck")));
}

}  // namespace
}  // namespace disc::apps
