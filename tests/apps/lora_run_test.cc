// LoRA with disc-train (model.lora.*, export.lora): a run trains the adapters alone, resumes bit
// for bit, packs as it pads, exports merged and as PEFT's adapter, and the two give the same
// held-out loss within bf16 rounding; an adapter loads back to continue; a Hugging Face folder
// takes an adapter PEFT wrote; bad LoRA input is one line, exit 2, nothing written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace disc::apps::testing {
namespace {

const char* kLoraRun =
    R"(model: {family: llama, hidden: 32, layers: 2, heads: 2, kv_heads: 1, ffn: 64,
        lora: {rank: 4, alpha: 8, targets: [q_proj, v_proj, down_proj]}}
data: {source: json, batch_size: 8, max_len: 40, tokenizer: bytes}
train: {steps: 8, seed: 4}
schedule: {lr: 1e-2, warmup_steps: 1}
logging: {progress: none}
checkpoint: {every: 4}
)";

double eval_loss(const Result& r) {
  const size_t at = r.out.find("eval_loss ");
  EXPECT_NE(at, std::string::npos) << r.out;
  return at == std::string::npos ? 0 : std::stod(r.out.substr(at + 10));
}

TEST(LoraRun, TrainsResumesAndExportsMergedAndAdapterWithOneEvalLoss) {
  Scratch s;
  s.write("run.yaml", kLoraRun);
  s.write("train.json", count_records(64, 0));
  s.write("eval.json", count_records(16, 300));
  const std::string cfg = " --config " + s.path("run.yaml") + " data.path=" + s.path("train.json") +
                          " eval.path=" + s.path("eval.json");
  const std::string run = std::string(DISC_TRAIN) + " run" + cfg;
  Result a = run_command(run + " logging.metrics=" + s.path("a.jsonl") +
                         " checkpoint.dir=" + s.path("ck_a"));
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("LoRA r 4 on q_proj, v_proj, down_proj"), std::string::npos) << a.out;
  // Resumed from step 4, the same losses bit for bit.
  Result b = run_command(run + " logging.metrics=" + s.path("b.jsonl") +
                         " checkpoint.dir=" + s.path("ck_b"));
  ASSERT_EQ(b.code, 0) << b.out;
  std::filesystem::remove_all(s.path("ck_b/step-00000008"));
  Result resumed = run_command(run + " logging.metrics=" + s.path("b.jsonl") +
                               " checkpoint.dir=" + s.path("ck_b") + " --resume");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_EQ(losses(s.path("a.jsonl")), losses(s.path("b.jsonl")));
  // Packed, the same losses within f32 rounding.
  Result packed = run_command(run + " data.packing=true logging.metrics=" + s.path("p.jsonl"));
  ASSERT_EQ(packed.code, 0) << packed.out;
  const auto padded_losses = losses(s.path("a.jsonl")), packed_losses = losses(s.path("p.jsonl"));
  ASSERT_EQ(packed_losses.size(), padded_losses.size());
  for (const auto& [step, loss] : padded_losses)
    EXPECT_NEAR(std::stod(packed_losses.at(step)), std::stod(loss), 1e-4 * std::stod(loss))
        << "step " << step;

  // The last checkpoint, exported both ways, evaluated three ways.
  const std::string from_ck = cfg + " checkpoint.dir=" + s.path("ck_a");
  Result merged =
      run_command(std::string(DISC_TRAIN) + " export" + from_ck + " --to " + s.path("merged"));
  ASSERT_EQ(merged.code, 0) << merged.out;
  Result adapter = run_command(std::string(DISC_TRAIN) + " export" + from_ck +
                               " export.lora=adapter --to " + s.path("adapter"));
  ASSERT_EQ(adapter.code, 0) << adapter.out;
  EXPECT_TRUE(std::filesystem::exists(s.path("adapter/adapter_model.safetensors")));
  const std::string eval = std::string(DISC_TRAIN) + " eval" + cfg;
  const double checkpoint = eval_loss(run_command(eval + " checkpoint.dir=" + s.path("ck_a")));
  // The adapter over the same (seeded, bf16) base, and the merged folder as a plain llama.
  const double with_adapter =
      eval_loss(run_command(eval + " model.lora.rank=0 model.lora.alpha=16" +
                            " model.lora.targets=[] model.lora.from=" + s.path("adapter")));
  const double with_merged = eval_loss(run_command(
      eval +
      " model.lora.rank=0 model.lora.alpha=16 model.lora.targets=[] model.hf=" + s.path("merged")));
  EXPECT_EQ(with_adapter, checkpoint);
  EXPECT_NEAR(with_merged, checkpoint, 1e-2 * checkpoint);  // merged and rounded to bf16 once
  EXPECT_NE(with_merged, 0);

  // The adapter loads back to continue training.
  Result more = run_command(run + " model.lora.rank=0 model.lora.alpha=16 model.lora.targets=[]" +
                            " model.lora.from=" + s.path("adapter") + " train.steps=2");
  EXPECT_EQ(more.code, 0) << more.out;
  EXPECT_NE(more.out.find("LoRA adapters from"), std::string::npos) << more.out;
}

// An adapter PEFT wrote (tools/peft_reference.py) over the Hugging Face folder it belongs to.
TEST(LoraRun, AHuggingFaceFolderTakesAnAdapterPeftWrote) {
  const std::string ref = std::string(DISC_TEST_DATA_DIR) + "/reference/";
  Result r = run_command(std::string(DISC_TRAIN) + " run model.hf=" + ref +
                         "hf_llama_gqa model.lora.from=" + ref +
                         "peft_lora_gqa data.synthetic.vocab=48 data.synthetic.min_len=6 " +
                         "data.synthetic.max_len=12 " + "train.steps=3 logging.progress=none");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("LoRA r 4 on q_proj, v_proj, gate_proj, down_proj"), std::string::npos)
      << r.out;
}

struct BadLora {
  const char* name;
  std::string overrides;
  const char* message;
};
void PrintTo(const BadLora& x, std::ostream* os) {
  *os << x.name;
}

class LoraErrors : public ::testing::TestWithParam<BadLora> {};

TEST_P(LoraErrors, OneLineExitTwoNothingWritten) {
  Scratch s;
  const size_t before = s.entries();
  const Result r =
      run_command(std::string(DISC_TRAIN) + " run " + GetParam().overrides +
                  " logging.metrics=" + s.path("m.jsonl") + " checkpoint.dir=" + s.path("ck"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find(GetParam().message), std::string::npos) << r.out;
  EXPECT_EQ(s.entries(), before) << "something was written";
}

const std::string kRef = std::string(DISC_TEST_DATA_DIR) + "/reference/";

INSTANTIATE_TEST_SUITE_P(
    BadInputs, LoraErrors,
    ::testing::Values(
        BadLora{"target_matching_nothing", "model.lora.rank=4 model.lora.targets=[qkv_proj]",
                "model.lora.targets: LoRA target `qkv_proj` matches no layer"},
        BadLora{"rank_zero_with_targets", "model.lora.targets=[q_proj]",
                "model.lora.targets is set but model.lora.rank is 0"},
        BadLora{"rank_above_the_smaller_side", "model.lora.rank=129",
                "LoRA rank 129 is above l0.wq's smaller side (128)"},
        BadLora{"lora_on_onnx",
                "model.lora.rank=4 data.synthetic.vocab=32 model.onnx=" + kRef + "llama.onnx",
                "model.lora adapts a llama's projections (disc's llama or model.hf's), not "
                "model.onnx"},
        BadLora{"lora_on_gpt2", "model.lora.rank=4 model.family=gpt2", "not model.family gpt2"},
        BadLora{"adapter_of_another_base",
                "model.hf=" + kRef + "hf_llama_tied model.lora.from=" + kRef +
                    "peft_lora_gqa data.synthetic.vocab=40 data.synthetic.max_len=32",
                "belongs to another base model"},
        BadLora{
            "adapter_disagreeing_with_the_rank",
            "model.hf=" + kRef + "hf_llama_gqa model.lora.from=" + kRef +
                "peft_lora_gqa model.lora.rank=8 data.synthetic.vocab=48 data.synthetic.max_len=32",
            "model.lora.rank is 8, but the adapter in"}),
    [](const ::testing::TestParamInfo<BadLora>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace disc::apps::testing
