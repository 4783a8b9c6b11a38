// The embedding API holds up to what a stranger does with it: tensors kept after their Trainer is
// gone, batch entries the model does not have, a model too large for the machine.
#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/trainer.h"
#include "ir/graph.h"
#include "ir/models/model.h"
#include "ir/text_format.h"
#include "memory/allocator.h"
#include "memory/governor.h"

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

// set_parameter takes a tensor from the host (a checkpoint read there) into a GPU's memory, and
// parameter() of a GPU's trainer copies back into a host tensor: each copy crosses devices.
TEST(TrainerApi, SetParameterTakesAHostTensorOnEveryDevice) {
  auto cpu = make_device("cpu", 1);
  memory::DeviceAllocator host(*cpu);
  for (const char* device : {"cpu", "sim-gpu"}) {
    Trainer t = mlp_trainer(device);
    const std::string name = t.parameter_names()[0];
    const std::vector<int64_t> shape = t.parameter(name).shape();
    std::vector<float> values(static_cast<size_t>(t.parameter(name).numel()));
    for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f + static_cast<float>(i);
    t.set_parameter(name, Tensor::from<float>(shape, values, host));
    EXPECT_EQ(t.parameter(name).to_vector<float>(), values) << device;
    Tensor back = Tensor::from<float>(shape, std::vector<float>(values.size()), host);
    back.copy_from(t.parameter(name));
    EXPECT_EQ(back.to_vector<float>(), values) << device;
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

namespace disc::engine {
namespace {

Trainer llama_trainer(std::set<std::string> frozen) {
  ir::models::LlamaConfig c;
  c.vocab = 20, c.hidden = 16, c.layers = 2, c.heads = 2, c.kv_heads = 1, c.ffn = 24;
  c.max_batch = 2, c.max_seq = 8;
  TrainerOptions o;
  o.threads = 1, o.seed = 3, o.frozen = std::move(frozen);
  o.optimizer.clip_norm = 0;  // each parameter's update then depends on its own gradient alone
  return Trainer(ir::models::build_llama(c), o);
}

// Frozen parameters keep their values, get no gradient and no optimizer state; every other
// parameter trains exactly as it would with nothing frozen.
TEST(TrainerApi, FrozenParametersStayAsTheyAreAndTheRestTrainAsBefore) {
  Trainer all = llama_trainer({}), some = llama_trainer({"embed", "l0.wq"});
  auto batch = [](Trainer& t) {
    return Batch{
        {"tokens", Tensor::from<int32_t>({2, 4}, {1, 5, 7, 2, 3, 3, 9, 0}, t.allocator())},
        {"targets", Tensor::from<int32_t>({2, 4}, {5, 7, 2, 4, 3, 9, -100, -100}, t.allocator())}};
  };
  const std::vector<float> embed = some.parameter("embed").to_vector<float>();
  all.step(batch(all), 0.01), some.step(batch(some), 0.01);
  // After one step the models differ only in what was frozen; later steps see that difference.
  for (const char* p : {"l0.wk", "l1.w_down", "lm_head"}) {
    std::vector<float> a = all.parameter(p).to_vector<float>(),
                       b = some.parameter(p).to_vector<float>();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6) << p;
  }
  some.step(batch(some), 0.01);
  EXPECT_EQ(some.parameter("embed").to_vector<float>(), embed);
  EXPECT_NE(all.parameter("embed").to_vector<float>(), embed);
  EXPECT_EQ(some.parameter("l0.wq").to_vector<float>(),
            llama_trainer({}).parameter("l0.wq").to_vector<float>());
  for (const ir::Value* a : some.graph().arguments()) {
    EXPECT_NE(a->name(), "embed.m");
    EXPECT_NE(a->name(), "l0.wq.v");
  }
  // Neither the optimizer state nor the gradients are held.
  EXPECT_LT(some.bytes_held_for(some.largest_shape()), all.bytes_held_for(all.largest_shape()));
}

TEST(TrainerApi, FreezingWhatIsNoParameterOrEverythingIsRefused) {
  try {
    llama_trainer({"l0.wz"});
    FAIL() << "an unknown parameter was frozen";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("cannot freeze `l0.wz`: the model has no parameter"),
              std::string::npos)
        << e.what();
  }
  ir::models::MlpConfig c;
  c.in = 3, c.classes = 2, c.hidden = {};
  TrainerOptions o;
  o.frozen = {"fc0.w", "fc0.b"};
  EXPECT_THROW(Trainer(ir::models::build_mlp(c), o), InvalidArgument);
}

// A step that no plan can fit in the device's memory is refused when the Trainer is built, naming
// both numbers (a 32 GiB constant, as an ONNX ConstantOfShape makes one, failed at step 1).
TEST(TrainerApi, AStepTheDeviceCanNeverHoldIsRefusedAtOnce) {
  auto g = ir::parse_graph(R"(graph @huge {
  sym B in [1, 4]
  input %x : f32[B, 4]
  param %w : f32[4, 65536]
  %h = matmul(%x, %w) : f32[B, 65536]
  %big = full() {shape = [65536, 131072], value = 0.5} : f32[65536, 131072]
  %y = matmul(%h, %big) : f32[B, 131072]
  %loss = reduce_sum(%y) {axes = [0, 1], keepdims = false} : f32[]
  output loss = %loss
}
)");
  TrainerOptions o;
  o.threads = 1;
  try {
    Trainer t(ir::models::model_from_graph(std::move(g), 0.02), o);
    FAIL() << "built";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("the step at its largest shape (B=4) needs at least "),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace disc::engine

namespace disc::engine {
namespace {

// `disc-train plan` makes no parameters or state (make_state off): it plans what a Trainer with
// them plans, byte for byte, and refuses to train.
TEST(TrainerApi, APlanOnlyTrainerPlansAsOneWithItsStateAndRefusesToTrain) {
  TrainerOptions with;
  with.memory.cap = 256 << 20;  // above the largest batch's smallest cap (131 MiB)
  TrainerOptions without = with;
  without.make_state = false;
  const ir::models::LlamaConfig config{.vocab = 64, .hidden = 32, .layers = 2, .ffn = 88};
  Trainer full(ir::models::build_llama(config), with);
  Trainer plan(ir::models::build_llama(config), without);
  for (const ir::Bindings& b : {full.largest_shape(), ir::Bindings{{"B", 3}, {"S", 17}}}) {
    EXPECT_EQ(plan.bytes_held_for(b), full.bytes_held_for(b));
    EXPECT_EQ(plan.governor().lower_bound(b, plan.bytes_held_for(b)),
              full.governor().lower_bound(b, full.bytes_held_for(b)));
  }
  EXPECT_GT(full.allocator().stats().live_bytes, 0);
  EXPECT_EQ(plan.allocator().stats().live_bytes, 0);
  try {
    plan.step({}, 1e-3);
    ADD_FAILURE() << "a plan-only Trainer stepped";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("only plans"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plan.parameter(plan.parameter_names().front()), InvalidArgument);
  EXPECT_THROW(plan.save(::testing::TempDir() + "/plan-only"), InvalidArgument);
}

}  // namespace
}  // namespace disc::engine
