// Hugging Face Llama folders (tests/reference/hf_llama_*, written by tools/hf_reference.py with
// PyTorch): disc reads them into its llama and must give PyTorch's logits, loss and gradients of
// HF's modeling_llama math within 1e-4, with grouped-query and multi-query attention, tied and
// untied heads, bf16 shards and an f16 file. Export then load gives the same bits; bad folders are
// refused in one message that names the file and the tensor or key.
#include "formats/hf_llama.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "devices/device.h"
#include "engine/executor.h"
#include "engine/init.h"
#include "engine/safetensors.h"
#include "engine/trainer.h"
#include "ir/training_step.h"
#include "tests/formats/reference.h"

namespace disc::formats {
using namespace engine;  // the Trainer, tensors and safetensors files the folders go in and out of
namespace {

using testing::reference;
using testing::relative_error;

namespace fs = std::filesystem;
using nlohmann::json;

// A disc [in, out] matrix as HF's [out, in].
std::vector<float> transposed(const Tensor& t) {
  std::vector<float> v = t.to_vector<float>(), out(v.size());
  const auto rows = static_cast<size_t>(t.shape()[0]), cols = static_cast<size_t>(t.shape()[1]);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) out[c * rows + r] = v[r * cols + c];
  return out;
}

class HfReference : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<devices::Device> dev = devices::make_cpu_device(2);
  memory::DeviceAllocator alloc{*dev};
};

TEST_P(HfReference, LogitsLossAndGradientsMatchPyTorch) {
  HfLlama hf = open_hf_llama(reference(GetParam()));
  TensorFile ref = read_safetensors(reference(GetParam() + ".safetensors"), alloc);
  ir::models::Model m = ir::models::build_llama(hf.config);
  ir::OptimizerConfig opt;
  opt.clip_norm = 0;
  ir::build_training_step(*m.graph, m.loss, m.params, opt, /*debug_outputs=*/true);
  Executor ex(*m.graph, alloc);
  std::map<std::string, Tensor> args = zero_state(*m.graph, alloc);
  for (const HfName& n : hf_llama_names(hf.config)) args[n.disc] = read_hf_weight(hf, n, alloc);
  args["tokens"] = ref.tensors.at("input.tokens");
  args["targets"] = ref.tensors.at("input.targets");
  args["lr"] = Tensor::from<float>({}, {1e-3f}, alloc);
  args["step"] = Tensor::from<int64_t>({}, {1}, alloc);
  auto out = ex.run(args);
  auto theirs = [&](const std::string& name) { return ref.tensors.at(name).to_vector<float>(); };
  EXPECT_LT(relative_error(out.at("loss").to_vector<float>(), theirs("loss")), 1e-4);
  EXPECT_LT(relative_error(out.at("logits").to_vector<float>(), theirs("logits")), 1e-4);
  EXPECT_LT(relative_error(out.at("grad_norm").to_vector<float>(), theirs("grad_norm")), 1e-4);
  for (const HfName& n : hf_llama_names(hf.config)) {
    const Tensor& g = out.at("grad." + n.disc);
    EXPECT_LT(
        relative_error(n.transposed ? transposed(g) : g.to_vector<float>(), theirs("grad." + n.hf)),
        1e-4)
        << n.hf;
  }
}

// The Trainer's own pipeline (fused attention, the fused head and cross-entropy, JIT kernels) on
// the loaded weights gives PyTorch's loss and gradient norm too.
TEST_P(HfReference, TheTrainersStepOnLoadedWeightsMatchesPyTorch) {
  HfLlama hf = open_hf_llama(reference(GetParam()));
  TensorFile ref = read_safetensors(reference(GetParam() + ".safetensors"), alloc);
  ir::models::LlamaConfig c = hf.config;
  c.max_batch = 4, c.max_seq = 16;
  TrainerOptions o;
  o.threads = 2;
  Trainer trainer(ir::models::build_llama(c), o);
  load_hf_weights(hf, trainer);
  Batch b = {{"tokens", ref.tensors.at("input.tokens")},
             {"targets", ref.tensors.at("input.targets")}};
  StepResult r = trainer.step(b, 1e-3);
  EXPECT_NEAR(r.loss, ref.tensors.at("loss").to_vector<float>()[0], 1e-4 * std::abs(r.loss));
  float norm = ref.tensors.at("grad_norm").to_vector<float>()[0];
  EXPECT_NEAR(r.grad_norm, norm, 1e-4 * norm);
}

INSTANTIATE_TEST_SUITE_P(Folders, HfReference, ::testing::Values("hf_llama_gqa", "hf_llama_tied"));

// A folder under a scratch directory, removed afterwards.
class HfFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    root = fs::temp_directory_path() /
           ("disc-hf-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root);
    fs::create_directories(root);
  }
  void TearDown() override { fs::remove_all(root); }

  // A copy of a reference folder to damage.
  fs::path copy(const std::string& name) {
    fs::copy(reference(name), root / name, fs::copy_options::recursive);
    return root / name;
  }
  static json read_json(const fs::path& p) { return json::parse(std::ifstream(p)); }
  static void write_json(const fs::path& p, const json& j) { std::ofstream(p) << j.dump(2); }
  static std::string bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  // The message open_hf_llama refuses `dir` with ("" when it does not).
  static std::string refusal(const fs::path& dir) {
    try {
      open_hf_llama(dir.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path root;
  std::unique_ptr<devices::Device> dev = devices::make_cpu_device(2);
  memory::DeviceAllocator alloc{*dev};
};

Trainer loaded_trainer(const HfLlama& hf) {
  ir::models::LlamaConfig c = hf.config;
  c.max_batch = 2, c.max_seq = 8;
  TrainerOptions o;
  o.threads = 1;
  Trainer t(ir::models::build_llama(c), o);
  load_hf_weights(hf, t);
  return t;
}

TEST_F(HfFolder, ExportWritesTheSourceFolderBackBitForBit) {
  for (std::string name : {"hf_llama_gqa", "hf_llama_tied"}) {
    HfLlama hf = open_hf_llama(reference(name));
    Trainer t = loaded_trainer(hf);
    fs::path out = root / (name + "-out");
    write_hf_llama(parameters_of(t), hf.config, out.string(), &hf, std::nullopt);
    // The same files, each the same bytes except the checksums disc records in the header; the
    // tensors' bytes and the config are identical.
    std::set<std::string> want, got;
    for (const auto& e : fs::directory_iterator(reference(name))) want.insert(e.path().filename());
    for (const auto& e : fs::directory_iterator(out)) got.insert(e.path().filename());
    EXPECT_EQ(got, want) << name;
    EXPECT_EQ(bytes(out / "config.json"), bytes(fs::path(reference(name)) / "config.json"));
    HfLlama again = open_hf_llama(out.string());
    for (const auto& [tensor, stored] : hf.tensors) {
      const auto& a = *stored.entry;
      const auto& b = *again.tensors.at(tensor).entry;
      EXPECT_EQ(a.dtype, b.dtype) << tensor;
      EXPECT_EQ(a.shape, b.shape) << tensor;
      EXPECT_TRUE(std::equal(a.bytes.begin(), a.bytes.end(), b.bytes.begin(), b.bytes.end()))
          << tensor;
      EXPECT_EQ(fs::path(stored.file->path()).filename(),
                fs::path(again.tensors.at(tensor).file->path()).filename());
    }
    if (hf.sharded) {
      json a = read_json(fs::path(reference(name)) / "model.safetensors.index.json");
      json b = read_json(out / "model.safetensors.index.json");
      EXPECT_EQ(a["weight_map"], b["weight_map"]);
      EXPECT_EQ(a["metadata"]["total_size"], b["metadata"]["total_size"]);
    }
  }
}

TEST_F(HfFolder, AnF32ExportLoadsBackAsTheSameParameters) {
  HfLlama hf = open_hf_llama(reference("hf_llama_gqa"));
  Trainer t = loaded_trainer(hf);
  t.step({{"tokens", Tensor::from<int32_t>({1, 3}, {1, 2, 3}, t.allocator())},
          {"targets", Tensor::from<int32_t>({1, 3}, {2, 3, 4}, t.allocator())}},
         0.1);  // trained weights are no longer bf16 values: f32 keeps every bit
  fs::path out = root / "f32";
  write_hf_llama(parameters_of(t), hf.config, out.string(), &hf, DType::kF32);
  HfLlama again = open_hf_llama(out.string());
  EXPECT_EQ(read_json(out / "config.json")["torch_dtype"], "float32");
  Trainer u = loaded_trainer(again);
  for (const std::string& p : t.parameter_names())
    EXPECT_EQ(t.parameter(p).to_vector<float>(), u.parameter(p).to_vector<float>()) << p;
}

TEST_F(HfFolder, AFolderMadeFromScratchLoadsAsTheSameModel) {
  ir::models::LlamaConfig c;
  c.vocab = 20, c.hidden = 16, c.layers = 1, c.heads = 2, c.kv_heads = 1, c.ffn = 24;
  c.max_batch = 2, c.max_seq = 8;
  Trainer t(ir::models::build_llama(c), {});
  write_hf_llama(parameters_of(t), c, (root / "new").string(), nullptr, DType::kBF16);
  HfLlama hf = open_hf_llama((root / "new").string());
  EXPECT_EQ(hf.config.hidden, 16);
  EXPECT_EQ(hf.config.kv_heads, 1);
  EXPECT_FALSE(hf.sharded);
  EXPECT_EQ(hf.tensors.at("model.embed_tokens.weight").entry->dtype, DType::kBF16);
}

TEST_F(HfFolder, ExportRefusesAFolderThatHoldsFiles) {
  HfLlama hf = open_hf_llama(reference("hf_llama_tied"));
  Trainer t = loaded_trainer(hf);
  fs::create_directories(root / "busy");
  std::ofstream(root / "busy" / "keep.txt") << "mine";
  EXPECT_THROW(
      write_hf_llama(parameters_of(t), hf.config, (root / "busy").string(), &hf, std::nullopt),
      InvalidArgument);
  EXPECT_EQ(bytes(root / "busy" / "keep.txt"), "mine");
  EXPECT_FALSE(fs::exists(root / ".busy.partial"));
}

// Weights that an f16 export cannot hold (past 65504) are refused, naming the tensor and its
// largest magnitude, with nothing written (it wrote infinities and exited 0).
TEST_F(HfFolder, AnF16ExportOfWeightsPastItsRangeIsRefused) {
  HfLlama hf = open_hf_llama(reference("hf_llama_tied"));
  Trainer t = loaded_trainer(hf);
  std::map<std::string, Tensor> params = parameters_of(t);
  const std::string name = params.begin()->first;
  std::vector<float> v = params.at(name).to_vector<float>();
  v[1] = -70000;
  params[name] = Tensor::from<float>(params.at(name).shape(), v, alloc);
  try {
    write_hf_llama(params, hf.config, (root / "out").string(), &hf, DType::kF16);
    FAIL() << "exported";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("its largest magnitude, 70000, is beyond f16's range"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(root / "out"));
  write_hf_llama(params, hf.config, (root / "out").string(), &hf, DType::kBF16);  // bf16 holds it
  EXPECT_TRUE(fs::exists(root / "out" / "config.json"));
}

// transformers loads model.safetensors when a folder also holds an index (a leftover of an older
// download): so does disc.
TEST_F(HfFolder, ASingleFileWinsOverAnIndexBesideIt) {
  fs::path d = copy("hf_llama_gqa");
  std::map<std::string, Tensor> all;
  for (const char* shard : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"})
    for (auto& [name, tensor] : read_safetensors((d / shard).string(), alloc).tensors)
      all[name] = tensor;
  write_safetensors((d / "model.safetensors").string(), all, {{"format", "pt"}});
  fs::remove(d / "model-00002-of-00002.safetensors");  // the index's files are not read
  const HfLlama hf = open_hf_llama(d.string());
  EXPECT_FALSE(hf.sharded);
  ASSERT_EQ(hf.files.size(), 1u);
  EXPECT_EQ(fs::path(hf.files[0]->path()).filename(), "model.safetensors");
}

// What transformers accepts and disc can honour: a list of end tokens (Llama 3), RoPE's
// frequencies saved as a buffer by older conversions.
TEST_F(HfFolder, AListOfEndTokensAndASavedRopeBufferAreAccepted) {
  fs::path d = copy("hf_llama_gqa");
  json config = read_json(d / "config.json");
  config["eos_token_id"] = {7, 9};
  write_json(d / "config.json", config);
  const std::string shard = (d / "model-00002-of-00002.safetensors").string();
  TensorFile file = read_safetensors(shard, alloc);
  const std::string buffer = "model.layers.1.self_attn.rotary_emb.inv_freq";
  file.tensors[buffer] = Tensor::from<float>({4}, {1, 0.1f, 0.01f, 0.001f}, alloc);
  write_safetensors(shard, file.tensors, file.metadata);
  json index = read_json(d / "model.safetensors.index.json");
  index["weight_map"][buffer] = "model-00002-of-00002.safetensors";
  write_json(d / "model.safetensors.index.json", index);
  HfLlama hf = open_hf_llama(d.string());
  EXPECT_EQ(hf.eos_id, 7);
  EXPECT_FALSE(hf.tensors.contains(buffer));
}

TEST_F(HfFolder, ExportCopiesTheTokenizerButNoOtherWeights) {
  fs::path d = copy("hf_llama_tied");
  for (const char* name : {"tokenizer.model", "tokenizer_config.json", "generation_config.json",
                           "pytorch_model.bin", "adapter_model.bin"})
    std::ofstream(d / name) << name;
  HfLlama hf = open_hf_llama(d.string());
  Trainer t = loaded_trainer(hf);
  write_hf_llama(parameters_of(t), hf.config, (root / "out").string(), &hf, std::nullopt);
  EXPECT_EQ(bytes(root / "out" / "tokenizer.model"), "tokenizer.model");
  EXPECT_TRUE(fs::exists(root / "out" / "tokenizer_config.json"));
  EXPECT_TRUE(fs::exists(root / "out" / "generation_config.json"));
  EXPECT_FALSE(fs::exists(root / "out" / "pytorch_model.bin"));
  EXPECT_FALSE(fs::exists(root / "out" / "adapter_model.bin"));
}

TEST_F(HfFolder, BadFoldersAreRefusedNamingWhatIsWrong) {
  struct Case {
    std::string what, expected;
    std::function<void(const fs::path&)> damage;
  };
  const std::string layer1_up = "model.layers.1.mlp.up_proj.weight";
  std::vector<Case> cases = {
      {"a config key missing", "lacks `num_hidden_layers`",
       [](const fs::path& d) {
         json j = read_json(d / "config.json");
         j.erase("num_hidden_layers");
         write_json(d / "config.json", j);
       }},
      {"a size that misshapes a tensor", "is [32,40], but config.json's sizes need [32,41]",
       [](const fs::path& d) {
         json j = read_json(d / "config.json");
         j["intermediate_size"] = 41;
         write_json(d / "config.json", j);
       }},
      {"a layer the weights lack",
       "`num_hidden_layers` is 3, but the weight files hold 21 tensors, enough for 2 layers",
       [](const fs::path& d) {
         json j = read_json(d / "config.json");
         j["num_hidden_layers"] = 3;
         write_json(d / "config.json", j);
       }},
      // Refused before anything is sized by it (it grew to 24 GB and was killed, no message).
      {"an absurd layer count", "`num_hidden_layers` is 4294967298, but the weight files hold 21",
       [](const fs::path& d) {
         json j = read_json(d / "config.json");
         j["num_hidden_layers"] = 4294967298;
         write_json(d / "config.json", j);
       }},
      {"a size that is no integer", "`hidden_size` is 96.5, not an integer",
       [](const fs::path& d) {
         json j = read_json(d / "config.json");
         j["hidden_size"] = 96.5;
         write_json(d / "config.json", j);
       }},
      {"a size past 64 bits, quoted as written",
       "`vocab_size` is 18446744073709551712, not an integer",
       [](const fs::path& d) {
         json j = read_json(d / "config.json");
         j["vocab_size"] = 1;
         std::string text = j.dump(2);
         text.replace(text.find("\"vocab_size\": 1"), 15, "\"vocab_size\": 18446744073709551712");
         std::ofstream(d / "config.json") << text;
       }},
      {"config.json linked to /dev/zero", "config.json: it is not a regular file",
       [](const fs::path& d) {
         fs::remove(d / "config.json");
         fs::create_symlink("/dev/zero", d / "config.json");
       }},
      // Opening a FIFO waits for a writer: validate hung there forever.
      {"a shard that is a FIFO", "model-00002-of-00002.safetensors: not a regular file",
       [](const fs::path& d) {
         fs::remove(d / "model-00002-of-00002.safetensors");
         ASSERT_EQ(::mkfifo((d / "model-00002-of-00002.safetensors").c_str(), 0644), 0);
       }},
      {"a NaN in a weight", "`" + layer1_up + "` holds 2 NaN or infinite values",
       [&](const fs::path& d) {
         const fs::path shard = d / "model-00002-of-00002.safetensors";
         auto cpu = devices::make_cpu_device(1);
         memory::DeviceAllocator host(*cpu);
         std::map<std::string, Tensor> tensors = read_safetensors(shard.string(), host).tensors;
         const Tensor& up = tensors.at(layer1_up);  // bf16 in this folder
         std::vector<uint16_t> bits = up.to_vector<uint16_t>();
         bits[3] = 0x7FC0, bits[7] = 0x7F80;  // NaN, infinity
         Tensor bad = Tensor::empty(up.dtype(), up.shape(), host);
         bad.upload(bits.data());
         tensors[layer1_up] = bad;
         write_safetensors(shard.string(), tensors, {{"format", "pt"}});
       }},
      {"a head that tying makes extra", "`lm_head.weight` is no parameter",
       [](const fs::path& d) {
         json j = read_json(d / "config.json");
         j["tie_word_embeddings"] = true;
         write_json(d / "config.json", j);
       }},
      {"rope scaling", "`rope_scaling` is",
       [](const fs::path& d) {
         json j = read_json(d / "config.json");
         j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
         write_json(d / "config.json", j);
       }},
      {"a truncated shard", "model-00002-of-00002.safetensors: ",
       [](const fs::path& d) {
         fs::path shard = d / "model-00002-of-00002.safetensors";
         fs::resize_file(shard, fs::file_size(shard) - 100);
       }},
      {"a tensor missing from the index", "`" + layer1_up + "`, which",
       [&](const fs::path& d) {
         json j = read_json(d / "model.safetensors.index.json");
         j["weight_map"].erase(layer1_up);
         write_json(d / "model.safetensors.index.json", j);
       }},
      {"an index naming a missing shard", "model-00003-of-00003.safetensors",
       [&](const fs::path& d) {
         json j = read_json(d / "model.safetensors.index.json");
         j["weight_map"][layer1_up] = "model-00003-of-00003.safetensors";
         write_json(d / "model.safetensors.index.json", j);
       }},
      {"config.json that is not JSON", "config.json is not valid JSON",
       [](const fs::path& d) { std::ofstream(d / "config.json") << "{\"vocab_size\": 4"; }},
  };
  for (const Case& c : cases) {
    fs::path d = copy("hf_llama_gqa");
    c.damage(d);
    std::string message = refusal(d);
    EXPECT_NE(message.find(c.expected), std::string::npos)
        << c.what << ": got \"" << message << "\"";
    fs::remove_all(d);
  }
}

}  // namespace
}  // namespace disc::formats
