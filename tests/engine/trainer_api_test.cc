// The embedding API holds up to what a stranger does with it: tensors kept after their Trainer is
// gone, batch entries the model does not have, a model too large for the machine.
#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/trainer.h"
#include "ir/models/model.h"

namespace disc::engine {
namespace {

Trainer mlp_trainer(const std::string& device, int64_t in = 6, int64_t hidden = 5) {
  ir::models::MlpConfig c;
  c.in = in, c.classes = 3, c.hidden = {hidden}, c.max_batch = 4;
  TrainerOptions o;
  o.device = device, o.threads = 1;
  return Trainer(ir::models::build_mlp(c), o);
}

Batch mlp_batch(Trainer& t) {
  return {{"x", Tensor::from<float>({1, 6}, {1, 2, 3, 4, 5, 6}, t.allocator())},
          {"labels", Tensor::from<int32_t>({1}, {2}, t.allocator())}};
}

// Before the tensors held their allocator, the last one to go freed its bytes into an allocator
// that had died with the Trainer (AddressSanitizer: heap-use-after-free).
TEST(TrainerApi, TensorsMayOutliveTheirTrainer) {
  for (const char* device : {"cpu", "sim-gpu"}) {
    Tensor weight, input;
    std::vector<float> expected;
    {
      Trainer t = mlp_trainer(device);
      Batch b = mlp_batch(t);
      t.step(b, 0.1);
      weight = t.parameter(t.parameter_names()[0]);
      expected = weight.to_vector<float>();
      input = b.at("x");
    }
    EXPECT_EQ(weight.to_vector<float>(), expected) << device;
    EXPECT_EQ(input.to_vector<float>()[5], 6.0f) << device;
  }
}

TEST(TrainerApi, ABatchEntryTheModelDoesNotHaveIsRefused) {
  Trainer t = mlp_trainer("cpu");
  Batch b = mlp_batch(t);
  b["lables"] = b.at("labels");
  try {
    t.step(b, 0.1);
    FAIL() << "a misspelt batch entry was ignored";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "batch entry `lables` is not an input of the model; its inputs are x, labels"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(t.steps_done(), 0);
  EXPECT_EQ(t.input_names(), (std::vector<std::string>{"x", "labels"}));
}

// 2^21 x 2^21 weights are 16 TiB with AdamW's moments: refused before a byte is drawn.
TEST(TrainerApi, AModelTheMachineCannotHoldIsRefusedNamingBothSizes) {
  try {
    mlp_trainer("cpu", int64_t{1} << 21, int64_t{1} << 21);
    FAIL() << "a 16 TiB model was accepted";
  } catch (const OutOfMemory& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("the memory of device cpu (", 0), 0u) << m;
    EXPECT_NE(m.find("cannot hold the parameters and optimizer state (48.0 TiB)"),
              std::string::npos)
        << m;
  }
}

}  // namespace
}  // namespace disc::engine
