// Models exported from PyTorch 1.13 (tools/onnx_export.py: torch_reference.py's llama and gpt2,
// dynamic batch and sequence axes), imported and trained by disc: the same loss, logits,
// gradients and AdamW steps as PyTorch's recording of the same weights and batch
// (tests/reference/<family>.safetensors), within 1e-4.
#include <gtest/gtest.h>

#include "devices/device.h"
#include "engine/safetensors.h"
#include "formats/onnx/import.h"
#include "formats/onnx/weights.h"
#include "reference_steps.h"

namespace disc::onnx {
namespace {

const std::string kReference = std::string(DISC_TEST_DATA_DIR) + "/reference/";

class OnnxReference : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<devices::Device> dev = devices::make_cpu_device(2);
  memory::DeviceAllocator alloc{*dev};
};

TEST_P(OnnxReference, LogitsGradientsAndAdamWStepsMatchPyTorch) {
  const std::string file = GetParam(), family = file.substr(0, file.find('_'));
  engine::TensorFile ref = engine::read_safetensors(kReference + family + ".safetensors", alloc);
  Imported imported = import_file(kReference + file + ".onnx");
  // The initializers are the recording's weights, bit for bit: the comparison below starts from
  // the weights PyTorch exported.
  int params = 0;
  for (const auto& [name, t] : ref.tensors) {
    if (name.rfind("param.", 0) != 0) continue;
    ++params;
    ASSERT_TRUE(imported.weights.contains(name.substr(6))) << name;
    EXPECT_EQ(imported.weights.at(name.substr(6)), t.to_vector<float>()) << name;
  }
  EXPECT_EQ(static_cast<int>(imported.weights.size()), params);
  engine::expect_matches_reference(language_model(imported), ref, alloc);
}

// The same first step through the Trainer: its compile pipeline rewrites the imported layers into
// disc's ops (the layers pass: rms_norm, rope, silu; attention; linear_cross_entropy) and fuses
// kernels, which round as disc's kernels do. The loss and gradient norm stay within 1e-4.
TEST_P(OnnxReference, TrainersStepMatchesPyTorch) {
  const std::string file = GetParam(), family = file.substr(0, file.find('_'));
  engine::TensorFile ref = engine::read_safetensors(kReference + family + ".safetensors", alloc);
  Imported imported = import_file(kReference + file + ".onnx");
  engine::Trainer trainer(language_model(imported), {.threads = 2});
  load_weights(imported, trainer);
  const engine::StepResult r =
      trainer.step(engine::reference_batch(ref, trainer.input_names(), trainer.allocator()), 0.0);
  EXPECT_LT(engine::scalar_error(r.loss, ref, "loss"), 1e-4);
  EXPECT_LT(engine::scalar_error(r.grad_norm, ref, "grad_norm"), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Exported, OnnxReference,
                         ::testing::Values("llama", "gpt2", "gpt2_opset14"));

}  // namespace
}  // namespace disc::onnx
