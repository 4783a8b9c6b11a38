// Trainer::evaluate: the forward pass alone gives the loss the step reports for the same batch
// and changes nothing; the same bits under any cap; dropout is off; a plan-only Trainer refuses.
#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/trainer.h"
#include "tests/engine/loss_curve.h"

namespace disc::engine {
namespace {

using testing::counting;
using testing::parameters;

TrainerOptions evaluate_options(int64_t cap = 0) {
  TrainerOptions o;
  o.threads = 2, o.seed = 3, o.memory.cap = cap;
  return o;
}

TEST(Evaluate, GivesTheStepsLossForTheBatchAndChangesNothing) {
  Trainer t(testing::counting_llama(16, 40), evaluate_options());
  for (int i = 0; i < 3; ++i) {
    const Batch b = counting(t, i, 16);
    const auto before = parameters(t);
    const float loss = t.evaluate(b);
    EXPECT_EQ(parameters(t), before) << "evaluate changed the parameters";
    EXPECT_EQ(t.steps_done(), i);
    EXPECT_NEAR(t.step(b, 3e-3).loss, loss, 1e-6 * loss) << "step " << i + 1;
    EXPECT_NE(t.evaluate(b), loss) << "the step's update did not reach evaluate";
  }
}

TEST(Evaluate, TheSmallestCapGivesTheSameBits) {
  Trainer free_run(testing::counting_llama(16, 40), evaluate_options());
  Trainer capped(
      testing::counting_llama(16, 40),
      evaluate_options(testing::smallest_cap(testing::counting_llama(16, 40), evaluate_options())));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(capped.evaluate(counting(capped, i, 16)),
              free_run.evaluate(counting(free_run, i, 16)));
    EXPECT_LE(capped.allocator().stats().live_bytes, capped.memory_cap());
  }
}

// gpt2 with dropout 0.5: the step draws masks by its seed; evaluate has none, whatever the seed.
TEST(Evaluate, DropoutIsOff) {
  Trainer t(ir::models::build_gpt2({.vocab = 32,
                                    .hidden = 32,
                                    .layers = 1,
                                    .heads = 2,
                                    .ffn = 64,
                                    .max_batch = 4,
                                    .max_seq = 64,
                                    .dropout = 0.5}),
            evaluate_options());
  std::vector<float> losses;
  for (int64_t seed : {1, 2}) {
    Batch b = counting(t, 0, 4);
    b["seed"] = Tensor::from<int64_t>({}, {seed}, t.allocator());
    losses.push_back(t.evaluate(b));
  }
  EXPECT_EQ(losses[0], losses[1]);
}

TEST(Evaluate, APlanOnlyTrainerRefuses) {
  TrainerOptions o = evaluate_options();
  o.make_state = false;
  Trainer t(testing::counting_llama(), o);
  EXPECT_THROW(t.evaluate(counting(t, 0)), InvalidArgument);
}

// Without optimizer state (what `disc-train eval` makes): the parameters alone, the same losses,
// a cap checked against the forward pass (one the step cannot keep is fine), and no step.
TEST(Evaluate, ATrainerWithoutOptimizerStateEvaluatesAlone) {
  auto model = [] { return testing::counting_llama(16, 40); };
  TrainerOptions o = evaluate_options();
  o.optimizer_state = false;
  Trainer full(model(), evaluate_options()), alone(model(), o);
  EXPECT_NO_THROW(full.parameter("l0.wq.m"));
  EXPECT_THROW(alone.parameter("l0.wq.m"), InvalidArgument);
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(alone.evaluate(counting(alone, i, 16)), full.evaluate(counting(full, i, 16)));
  EXPECT_THROW(alone.step(counting(alone, 0, 16), 1e-3), InvalidArgument);
  EXPECT_THROW(alone.save(::testing::TempDir() + "/no_state"), InvalidArgument);
  // A cap below what the step needs, which the forward pass keeps.
  TrainerOptions tight = o;
  tight.memory.cap = testing::smallest_cap(model(), evaluate_options()) * 6 / 10;
  EXPECT_THROW(Trainer(model(),
                       [&] {
                         TrainerOptions with_state = tight;
                         with_state.optimizer_state = true;
                         return with_state;
                       }()),
               OutOfMemory);
  Trainer capped(model(), tight);
  EXPECT_EQ(capped.evaluate(counting(capped, 0, 16)), full.evaluate(counting(full, 0, 16)));
}

}  // namespace
}  // namespace disc::engine
