// Fine-tuning a Hugging Face llama folder with disc-train, as a user would: weights from
// model.hf, frozen parameters by HF name, the trained model exported in HF layout, resume from a
// checkpoint; a sentencepiece tokenizer with an instruction template; bad folders refused.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "cli_test_util.h"
#include "formats/hf_llama.h"

namespace disc::apps {
namespace {

namespace fs = std::filesystem;
using testing::losses;
using testing::Result;
using testing::run_command;
using testing::Scratch;

const std::string kGqa = std::string(DISC_TEST_DATA_DIR) + "/reference/hf_llama_gqa";

// Synthetic tokens within the folder's 48-word vocabulary.
const char* kFineTune = R"(data:
  source: synthetic
  batch_size: 4
  synthetic:
    vocab: 48
    examples: 32
    min_len: 6
    max_len: 12
schedule:
  warmup_steps: 1
train:
  steps: 6
  seed: 2
  freeze: ["model.embed_tokens.*", "l1.w_*"]
logging:
  progress: none
checkpoint:
  every: 3
)";

bool same_bytes(const formats::HfLlama& a, const formats::HfLlama& b, const std::string& tensor) {
  const auto &x = a.tensors.at(tensor).entry->bytes, &y = b.tensors.at(tensor).entry->bytes;
  return std::equal(x.begin(), x.end(), y.begin(), y.end());
}

TEST(HfFineTune, TrainsExportsAndResumesAHuggingFaceFolder) {
  Scratch s;
  s.write("run.yaml", kFineTune);
  const std::string common =
      std::string(DISC_TRAIN) + " run --config " + s.path("run.yaml") + " model.hf=" + kGqa + " ";
  Result a = run_command(common + "logging.metrics=" + s.path("a.jsonl") +
                         " checkpoint.dir=" + s.path("ck_a") + " export.dir=" + s.path("out"));
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("frozen: 4 of 21 parameters"), std::string::npos) << a.out;

  // The export has the source's files, names and dtypes; frozen tensors keep their bits (bf16 to
  // f32 and back is exact), trained ones moved.
  formats::HfLlama source = formats::open_hf_llama(kGqa),
                   out = formats::open_hf_llama(s.path("out"));
  EXPECT_TRUE(out.sharded);
  EXPECT_EQ(out.tensors.at("lm_head.weight").entry->dtype, DType::kBF16);
  EXPECT_TRUE(same_bytes(source, out, "model.embed_tokens.weight"));
  EXPECT_TRUE(same_bytes(source, out, "model.layers.1.mlp.up_proj.weight"));
  EXPECT_FALSE(same_bytes(source, out, "model.layers.0.mlp.up_proj.weight"));
  EXPECT_FALSE(same_bytes(source, out, "lm_head.weight"));

  // `disc-train export` of the last checkpoint writes the same folder.
  Result e = run_command(std::string(DISC_TRAIN) + " export --config " + s.path("run.yaml") +
                         " model.hf=" + kGqa + " checkpoint.dir=" + s.path("ck_a") + " --to " +
                         s.path("out2"));
  ASSERT_EQ(e.code, 0) << e.out;
  formats::HfLlama out2 = formats::open_hf_llama(s.path("out2"));
  for (const auto& [tensor, stored] : out.tensors)
    EXPECT_TRUE(same_bytes(out, out2, tensor)) << tensor;

  // Resumed from step 3 (the step-6 checkpoint gone), the run gives the same losses bit for bit.
  Result b = run_command(common + "logging.metrics=" + s.path("b.jsonl") +
                         " checkpoint.dir=" + s.path("ck_b"));
  ASSERT_EQ(b.code, 0) << b.out;
  fs::remove_all(s.path("ck_b/step-00000006"));
  Result resumed = run_command(common + "logging.metrics=" + s.path("b.jsonl") +
                               " checkpoint.dir=" + s.path("ck_b") + " --resume");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("resumed from"), std::string::npos) << resumed.out;
  EXPECT_EQ(losses(s.path("a.jsonl")), losses(s.path("b.jsonl")));
  EXPECT_EQ(losses(s.path("a.jsonl")).size(), 6u);
}

// A Hugging Face llama (grouped-query heads, bf16 weights) trains packed as it trains padded: the
// same losses within f32 rounding, step for step, and the export after it loads.
TEST(HfFineTune, PackedStepsFollowThePaddedRun) {
  Scratch s;
  s.write("run.yaml", kFineTune);
  const std::string common =
      std::string(DISC_TRAIN) + " run --config " + s.path("run.yaml") + " model.hf=" + kGqa + " ";
  Result padded = run_command(common + "logging.metrics=" + s.path("pad.jsonl"));
  ASSERT_EQ(padded.code, 0) << padded.out;
  Result packed = run_command(common + "data.packing=true logging.metrics=" + s.path("pack.jsonl") +
                              " export.dir=" + s.path("out"));
  ASSERT_EQ(packed.code, 0) << packed.out;
  const auto want = testing::losses(s.path("pad.jsonl")),
             got = testing::losses(s.path("pack.jsonl"));
  ASSERT_EQ(got.size(), 6u);
  for (const auto& [step, loss] : want) {
    const double a = std::stod(got.at(step)), b = std::stod(loss);
    EXPECT_NEAR(a, b, 1e-5 * std::abs(b)) << "step " << step;
  }
  EXPECT_NO_THROW(formats::open_hf_llama(s.path("out")));
}

TEST(HfFineTune, ABadFolderIsOneLineExitTwoAndNothingWritten) {
  Scratch s;
  s.write("run.yaml", kFineTune);
  fs::copy(kGqa, s.path("bad"), fs::copy_options::recursive);
  fs::resize_file(s.path("bad/model-00001-of-00002.safetensors"), 1000);
  for (const std::string& folder : {s.path("bad"), s.path("missing")}) {
    Result r = run_command(std::string(DISC_TRAIN) + " run --config " + s.path("run.yaml") +
                           " model.hf=" + folder + " logging.metrics=" + s.path("m.jsonl") +
                           " checkpoint.dir=" + s.path("ck") + " export.dir=" + s.path("out"));
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_NE(r.out.find(folder), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(s.path("m.jsonl")));
    EXPECT_FALSE(fs::exists(s.path("ck")));
    EXPECT_FALSE(fs::exists(s.path("out")));
  }
}

// Byte ids would mean nothing to a model trained on its own tokenizer; an export from a
// checkpoint folder that holds none would quietly be the starting weights.
TEST(HfFineTune, NoTokenizerModelAndNoCheckpointToExportAreRefused) {
  Scratch s;
  s.write("data.jsonl", R"({"instruction": "a", "output": "b"})"
                        "\n");
  Result r = run_command(std::string(DISC_TRAIN) + " validate model.hf=" + kGqa +
                         " data.source=jsonl data.path=" + s.path("data.jsonl"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("has no tokenizer.model"), std::string::npos) << r.out;
  fs::create_directories(s.path("ck"));
  Result e = run_command(std::string(DISC_TRAIN) + " export model.hf=" + kGqa +
                         " data.synthetic.vocab=48 checkpoint.dir=" + s.path("ck") + " --to " +
                         s.path("out"));
  EXPECT_EQ(e.code, 2) << e.out;
  EXPECT_NE(e.out.find("holds no complete checkpoint"), std::string::npos) << e.out;
  EXPECT_FALSE(fs::exists(s.path("out")));
  // Token ids past the model's vocabulary: the refusal says which number is short, and by how much
  // (it advised "use the model's own tokenizer", which such runs already do).
  Result v = run_command(std::string(DISC_TRAIN) + " validate model.hf=" + kGqa +
                         " data.synthetic.vocab=64");
  EXPECT_EQ(v.code, 2) << v.out;
  EXPECT_NE(v.out.find("has vocab_size 48, so the embedding has rows for ids below 48 only: the "
                       "model needs vocab_size 64 or more"),
            std::string::npos)
      << v.out;
}

// A sentencepiece model trained here (Debian's spm_train), a llama made for its vocabulary by
// `disc-train export`, and instruction records through a template whose prompt the loss skips.
TEST(HfFineTune, SentencepieceTokenizerAndAResponseOnlyLoss) {
  if (run_command("command -v spm_train").code != 0) GTEST_SKIP() << "spm_train is not installed";
  Scratch s;
  std::string text;
  for (int i = 0; i < 400; ++i)
    text += "Write a function that adds " + std::to_string(i) +
            " to x.\ndef f(x):\n    return x + " + std::to_string(i) + "\n";
  s.write("text.txt", text);
  Result spm =
      run_command("cd " + s.path("") + " && spm_train --input=text.txt --model_prefix=sp " +
                  "--vocab_size=300 --model_type=bpe --byte_fallback=true " +
                  "--bos_id=1 --eos_id=2 --unk_id=0 --minloglevel=2");
  ASSERT_EQ(spm.code, 0) << spm.out;
  Result made = run_command(std::string(DISC_TRAIN) + " export --to " + s.path("base") +
                            " model.vocab=300 model.hidden=16 model.layers=1 model.heads=2" +
                            " model.kv_heads=1 model.ffn=24 data.synthetic.vocab=300");
  ASSERT_EQ(made.code, 0) << made.out;
  fs::copy_file(s.path("sp.model"), s.path("base/tokenizer.model"));
  s.write("data.jsonl",
          R"({"instruction": "Add 3 to x.", "output": "def f(x):\n    return x + 3"}
{"instruction": "Add 7 to x.", "input": "x is an int", "output": "return x + 7"}
)");
  s.write("run.yaml", R"(data:
  source: jsonl
  batch_size: 2
  max_len: 64
  template:
    prompt: "Q: {instruction} {input}\nA: "
    response: "{output}"
  train_on: response
train:
  steps: 2
logging:
  progress: none
)");
  Result r = run_command(std::string(DISC_TRAIN) + " run --config " + s.path("run.yaml") +
                         " model.hf=" + s.path("base") + " data.path=" + s.path("data.jsonl") +
                         " logging.metrics=" + s.path("m.jsonl"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("sentencepiece tokenizer.model (300 pieces)"), std::string::npos) << r.out;
  EXPECT_EQ(losses(s.path("m.jsonl")).size(), 2u);
}

}  // namespace
}  // namespace disc::apps
