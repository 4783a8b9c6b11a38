// Clipping in two passes (ir::OptimizerConfig::clip_passes): the first pass computes the global
// norm and applies nothing; the second, the same computation on the same batch, clips by that norm
// and updates each parameter as soon as its gradient is complete. Its steps are one pass's, bit for
// bit (AdamW and SGD, f32 and compact state, f16 loss scaling), in the memory of no clipping; the
// trainer takes two passes itself where the memory cap needs them.
#include <gtest/gtest.h>

#include <functional>

#include "base/error.h"
#include "engine/plan_summary.h"
#include "engine/trainer.h"
#include "tests/engine/loss_curve.h"

namespace disc::engine {
namespace {

using State = ir::OptimizerConfig::State;

// Clipping that bites: the counting llama's first gradients have norms near 1.
TrainerOptions clipping(int passes) {
  TrainerOptions o;
  o.threads = 2, o.seed = 3;
  o.optimizer.clip_norm = 0.25;
  o.optimizer.clip_passes = passes;
  return o;
}

std::vector<StepResult> run_steps(Trainer& t, int steps) {
  std::vector<StepResult> out;
  for (int i = 0; i < steps; ++i) out.push_back(t.step(testing::counting(t, i), testing::lr(i)));
  return out;
}

// Runs `steps` steps in one pass and in two, options changed by `change`, and requires the same
// losses, norms and parameters, bit for bit.
void expect_two_passes_as_one(const std::function<void(TrainerOptions&)>& change, int steps = 8) {
  TrainerOptions one = clipping(1), two = clipping(2);
  change(one), change(two);
  Trainer a(testing::counting_llama(), one), b(testing::counting_llama(), two);
  ASSERT_EQ(a.clip_passes(), 1);
  ASSERT_EQ(b.clip_passes(), 2);
  const std::vector<StepResult> ra = run_steps(a, steps), rb = run_steps(b, steps);
  int clipped = 0;
  for (int i = 0; i < steps; ++i) {
    EXPECT_EQ(ra[i].loss, rb[i].loss) << "step " << i + 1;
    EXPECT_EQ(ra[i].skipped, rb[i].skipped) << "step " << i + 1;
    if (ra[i].skipped) continue;  // a norm that overflowed: inf or NaN, alike in both
    EXPECT_EQ(ra[i].grad_norm, rb[i].grad_norm) << "step " << i + 1;
    clipped += ra[i].grad_norm > one.optimizer.clip_norm;
  }
  EXPECT_GT(clipped, 0) << "no step clipped: the test would not see a wrong clip";
  if (one.scales_loss()) {
    EXPECT_TRUE(ra.front().skipped) << "no step overflowed: the test would not see a wrong skip";
    EXPECT_EQ(ra.back().loss_scale, rb.back().loss_scale);
  }
  EXPECT_EQ(testing::parameters(a), testing::parameters(b));
}

TEST(ClipPasses, TwoPassesStepAsOnePassBitForBit) {
  expect_two_passes_as_one([](TrainerOptions&) {});
}

TEST(ClipPasses, TwoPassesStepAsOnePassWithCompactStateAndSgd) {
  expect_two_passes_as_one([](TrainerOptions& o) { o.optimizer.state = State::kInt8; });
  expect_two_passes_as_one([](TrainerOptions& o) { o.optimizer.state = State::kBF16; });
  expect_two_passes_as_one(
      [](TrainerOptions& o) { o.optimizer.kind = ir::OptimizerConfig::Kind::kSgd; });
}

// f16's loss scale starts high enough that the first steps overflow and are skipped: the second
// pass skips them too (its guard reads the first pass's norm), and the scale follows.
TEST(ClipPasses, TwoPassesSkipWhatOverflowsAsOnePass) {
  expect_two_passes_as_one(
      [](TrainerOptions& o) {
        o.precision = DType::kF16;
        o.loss_scale = 1e9;
        o.optimizer.state = State::kInt8;
      },
      16);
}

// The planned peak of `model`'s step under options `o`, made without weights.
int64_t lower_bound(ir::models::Model model, TrainerOptions o) {
  o.make_state = false, o.memory.cap = int64_t{1} << 40;
  Trainer t(std::move(model), o);
  return summarize_plan(t, t.largest_shape()).every_shape_lower_bound;
}

// With the passes left to it (clip_passes 0), the trainer takes one where the cap allows it and
// two where only they keep it; the capped run's losses are the uncapped one's, bit for bit.
TEST(ClipPasses, TheTrainerTakesTwoPassesWhereTheCapNeedsThem) {
  auto model = [] { return testing::counting_llama(6, 40); };
  const int64_t one = testing::smallest_cap(model(), clipping(1)),
                two = testing::smallest_cap(model(), clipping(2));
  ASSERT_LT(two, one) << "two passes should need less than one";
  TrainerOptions roomy = clipping(0), tight = clipping(0);
  roomy.memory.cap = one, tight.memory.cap = two;
  Trainer uncapped(model(), clipping(0)), a(model(), roomy), b(model(), tight);
  EXPECT_EQ(uncapped.clip_passes(), 1);
  EXPECT_EQ(a.clip_passes(), 1);
  EXPECT_EQ(b.clip_passes(), 2);
  const std::vector<StepResult> want = run_steps(uncapped, 6), got = run_steps(b, 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(got[i].loss, want[i].loss) << "step " << i + 1;
  EXPECT_EQ(testing::parameters(uncapped), testing::parameters(b));
  TrainerOptions below = clipping(0);
  below.memory.cap = lower_bound(model(), clipping(2)) - 4096;
  EXPECT_THROW(Trainer(model(), below), OutOfMemory);  // not even two passes keep it
}

// At TinyLlama-1.1B's shapes (B = 2, S = 512) two passes plan what no clipping plans: f32 state
// from 16.4 GiB to 12.8, int8 state from 10.3 GiB to 6.7.
TEST(ClipPasses, TwoPassesBringATinyLlamaFineTuneToTheBoundWithoutClipping) {
  auto bound = [](State state, double clip, int passes) {
    TrainerOptions o = clipping(passes);
    o.optimizer.state = state, o.optimizer.clip_norm = clip;
    return lower_bound(ir::models::build_llama(testing::tinyllama_shapes()), o);
  };
  for (State state : {State::kF32, State::kInt8}) {
    const int64_t one = bound(state, 1.0, 1), two = bound(state, 1.0, 2), none = bound(state, 0, 1);
    EXPECT_LT(two, one - (int64_t{3} << 30)) << "state " << static_cast<int>(state);
    EXPECT_LE(two, none + (int64_t{1} << 20)) << "state " << static_cast<int>(state);
  }
  EXPECT_LE(bound(State::kInt8, 1.0, 2), int64_t{7} << 30);
}

TEST(ClipPasses, TwoPassesRefuseWhatTheyCannotHelp) {
  TrainerOptions no_clip = clipping(2), accumulating = clipping(2);
  no_clip.optimizer.clip_norm = 0;
  accumulating.optimizer.accumulate = true;
  for (const TrainerOptions& o : {no_clip, accumulating}) {
    try {
      Trainer t(testing::counting_llama(), o);
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("optimizer.clip_passes"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace disc::engine
