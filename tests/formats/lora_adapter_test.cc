// PEFT LoRA adapters (formats/lora_adapter.h): an adapter PEFT wrote over tests/reference/
// hf_llama_gqa (tools/peft_reference.py) gives in disc the logits PEFT recorded within 1e-3; disc
// writes it back in PEFT's layout; the merged weights give the adapted model's logits; adapters
// that do not fit the base, or that use what disc does not run, are refused naming the file and
// the tensor or key.
#include "formats/lora_adapter.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "devices/device.h"
#include "engine/executor.h"
#include "engine/init.h"
#include "engine/safetensors.h"
#include "formats/hf_llama.h"
#include "ir/training_step.h"
#include "tests/formats/reference.h"

namespace disc::formats {
namespace {

using testing::reference;
using testing::relative_error;

namespace fs = std::filesystem;
using engine::Tensor;
using nlohmann::json;

class PeftAdapter : public ::testing::Test {
 protected:
  void SetUp() override {
    root = fs::temp_directory_path() / ("disc_peft_" + std::to_string(::getpid()));
    fs::remove_all(root);
    fs::create_directories(root);
    llama = hf.config;
    llama.lora = read_peft_config(reference("peft_lora_gqa"));
  }
  void TearDown() override { fs::remove_all(root); }

  // The model's logits on the recorded batch, in f32, from `weights` (by disc name; a LoRA base
  // in bf16, as the trainer holds it).
  std::vector<float> logits(const ir::models::LlamaConfig& c,
                            const std::map<std::string, Tensor>& weights) {
    ir::models::Model m = ir::models::build_llama(c);
    ir::OptimizerConfig opt;
    opt.clip_norm = 0;
    std::vector<ir::Value*> trained;
    for (ir::Value* p : m.params)
      if (!m.frozen.contains(p->name())) trained.push_back(p);
    ir::build_training_step(*m.graph, m.loss, trained, opt, /*debug_outputs=*/true);
    engine::Executor ex(*m.graph, alloc);
    std::map<std::string, Tensor> args = engine::zero_state(*m.graph, alloc);
    for (const ir::Value* p : m.params)
      args[p->name()] = engine::as_dtype(weights.at(p->name()), p->dtype(), alloc);
    args["tokens"] = batch.tensors.at("input.tokens");
    args["targets"] = batch.tensors.at("input.tokens");
    args["lr"] = Tensor::from<float>({}, {0.0f}, alloc);
    args["step"] = Tensor::from<int64_t>({}, {1}, alloc);
    return ex.run(args).at("logits").to_vector<float>();
  }

  std::map<std::string, Tensor> base_weights() {
    std::map<std::string, Tensor> w;
    for (const HfName& n : hf_llama_names(hf.config)) w[n.disc] = read_hf_weight(hf, n, alloc);
    return w;
  }

  // A copy of the recorded adapter in `root`/name, its config changed by `edit`.
  std::string edited_copy(const std::string& name, const std::function<void(json&)>& edit) {
    const fs::path dir = root / name;
    fs::copy(reference("peft_lora_gqa"), dir);
    json j = json::parse(std::ifstream(dir / "adapter_config.json"));
    edit(j);
    std::ofstream(dir / "adapter_config.json") << j.dump(2);
    return dir.string();
  }

  std::string refusal(const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "nothing was refused";
    return "";
  }

  fs::path root;
  std::unique_ptr<devices::Device> dev = devices::make_cpu_device(2);
  memory::DeviceAllocator alloc{*dev};
  HfLlama hf = open_hf_llama(reference("hf_llama_gqa"));
  engine::TensorFile batch =
      engine::read_safetensors(reference("peft_lora_gqa.safetensors"), alloc);
  ir::models::LlamaConfig llama;
};

TEST_F(PeftAdapter, GivesTheLogitsPeftRecorded) {
  EXPECT_EQ(llama.lora.rank, 4);
  EXPECT_EQ(llama.lora.alpha, 8);
  std::map<std::string, Tensor> w = base_weights();
  w.merge(read_peft_adapter(reference("peft_lora_gqa"), llama, alloc));
  EXPECT_LT(relative_error(logits(llama, w), batch.tensors.at("logits").to_vector<float>()), 1e-3);
}

TEST_F(PeftAdapter, MergedWeightsGiveTheAdaptedLogits) {
  std::map<std::string, Tensor> w = base_weights();
  w.merge(read_peft_adapter(reference("peft_lora_gqa"), llama, alloc));
  const std::map<std::string, Tensor> merged = merge_lora(w, llama, alloc);
  EXPECT_FALSE(merged.contains("l0.wq.lora_A"));
  EXPECT_LT(relative_error(logits(hf.config, merged), logits(llama, w)), 1e-5);
}

TEST_F(PeftAdapter, WrittenBackItIsPeftsLayout) {
  std::map<std::string, Tensor> w = read_peft_adapter(reference("peft_lora_gqa"), llama, alloc);
  const std::string out = (root / "out").string();
  write_peft_adapter(w, llama, out, "hf_llama_gqa");
  const auto theirs = engine::read_safetensors(reference("peft_lora_gqa/adapter_model.safetensors"),
                                               alloc)
                          .tensors,
             ours = engine::read_safetensors(out + "/adapter_model.safetensors", alloc).tensors;
  ASSERT_EQ(ours.size(), theirs.size());
  for (const auto& [name, t] : theirs) {
    ASSERT_TRUE(ours.contains(name)) << name;
    EXPECT_EQ(ours.at(name).shape(), t.shape()) << name;
    EXPECT_EQ(ours.at(name).to_vector<float>(),
              engine::as_dtype(t, DType::kF32, alloc).to_vector<float>())
        << name;
  }
  const json j = json::parse(std::ifstream(out + "/adapter_config.json"));
  EXPECT_EQ(j["peft_type"], "LORA");
  EXPECT_EQ(j["task_type"], "CAUSAL_LM");
  EXPECT_EQ(j["r"], 4);
  EXPECT_EQ(j["lora_alpha"], 8.0);
  EXPECT_EQ(j["bias"], "none");
  EXPECT_EQ(j["base_model_name_or_path"], "hf_llama_gqa");
  EXPECT_EQ(j["target_modules"], json({"q_proj", "v_proj", "gate_proj", "down_proj"}));
  const ir::models::LoraConfig back = read_peft_config(out);
  EXPECT_EQ(back.rank, 4);
  EXPECT_EQ(back.targets, (std::vector<std::string>{"q_proj", "v_proj", "gate_proj", "down_proj"}));
  EXPECT_NE(refusal([&] { write_peft_adapter(w, llama, out, ""); }).find("not an empty folder"),
            std::string::npos);
}

TEST_F(PeftAdapter, WhatDoesNotFitTheBaseOrDiscIsRefused) {
  auto refused_config = [&](const char* name, const std::function<void(json&)>& edit) {
    return refusal([&] { read_peft_config(edited_copy(name, edit)); });
  };
  EXPECT_NE(refused_config("dora", [](json& j) { j["use_dora"] = true; }).find("DoRA"),
            std::string::npos);
  EXPECT_NE(refused_config("rs", [](json& j) { j["use_rslora"] = true; }).find("use_rslora"),
            std::string::npos);
  EXPECT_NE(refused_config("regex", [](json& j) { j["target_modules"] = ".*proj"; })
                .find("target_modules"),
            std::string::npos);
  EXPECT_NE(refused_config("other", [](json& j) { j["target_modules"] = {"c_attn"}; })
                .find("`c_attn` matches no layer"),
            std::string::npos);
  EXPECT_NE(
      refused_config("prompt", [](json& j) { j["peft_type"] = "PROMPT_TUNING"; }).find("not LORA"),
      std::string::npos);
  // Another base: the tied model's hidden size is 24, the adapter's 32.
  HfLlama tied = open_hf_llama(reference("hf_llama_tied"));
  ir::models::LlamaConfig other = tied.config;
  other.lora = llama.lora;
  const std::string shape =
      refusal([&] { read_peft_adapter(reference("peft_lora_gqa"), other, alloc); });
  EXPECT_NE(shape.find("belongs to another base model"), std::string::npos) << shape;
  // A rank the tensors do not have, and targets the file lacks.
  ir::models::LlamaConfig more = llama;
  more.lora.targets.push_back("up_proj");
  const std::string lacks =
      refusal([&] { read_peft_adapter(reference("peft_lora_gqa"), more, alloc); });
  EXPECT_NE(lacks.find("lacks `base_model.model.model.layers.0.mlp.up_proj.lora_A.weight`"),
            std::string::npos)
      << lacks;
  ir::models::LlamaConfig fewer = llama;
  fewer.lora.targets = {"q_proj", "v_proj", "gate_proj"};
  const std::string extra =
      refusal([&] { read_peft_adapter(reference("peft_lora_gqa"), fewer, alloc); });
  EXPECT_NE(extra.find("down_proj"), std::string::npos) << extra;
  EXPECT_NE(extra.find("which is no adapter of this base"), std::string::npos) << extra;
}

}  // namespace
}  // namespace disc::formats
