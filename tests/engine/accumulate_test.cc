// Gradient accumulation (TrainerOptions::optimizer.accumulate, Trainer::step over micro-batches):
// K micro-batches of different lengths step as the one batch that holds them all, within rounding;
// runs repeat bit for bit, under a cap too; a checkpoint holds no accumulation buffer and resumes
// bit for bit; f16 loss scaling still skips what overflows.
#include <gtest/gtest.h>

#include <filesystem>

#include "base/error.h"
#include "engine/plan_summary.h"
#include "engine/safetensors.h"
#include "engine/trainer.h"
#include "tests/engine/loss_curve.h"

namespace disc::engine {
namespace {

constexpr int kMicro = 3;

TrainerOptions accumulating(bool on = true) {
  TrainerOptions o;
  o.threads = 2, o.seed = 3;
  o.optimizer.clip_norm = 1.0;
  o.optimizer.accumulate = on;
  return o;
}

// Step `step`'s micro-batches: counting rows of a length of their own each (so that their real
// tokens differ), 2 rows apiece.
std::vector<Batch> micro_batches(Trainer& t, int step) {
  std::vector<Batch> out;
  for (int k = 0; k < kMicro; ++k) out.push_back(testing::counting(t, step * kMicro + k, 2));
  return out;
}

// The same rows as one batch, padded to the longest (padding targets -100 count nothing).
Batch one_batch(Trainer& t, const std::vector<Batch>& micro) {
  int64_t rows = 0, seq = 0;
  for (const Batch& b : micro)
    rows += b.at("tokens").shape()[0], seq = std::max(seq, b.at("tokens").shape()[1]);
  std::vector<int32_t> tokens(rows * seq, 0), targets(rows * seq, -100);
  int64_t r0 = 0;
  for (const Batch& b : micro) {
    const auto tk = b.at("tokens").to_vector<int32_t>(), tg = b.at("targets").to_vector<int32_t>();
    const int64_t n = b.at("tokens").shape()[0], s = b.at("tokens").shape()[1];
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < s; ++i) {
        tokens[(r0 + r) * seq + i] = tk[r * s + i];
        targets[(r0 + r) * seq + i] = tg[r * s + i];
      }
    r0 += n;
  }
  return {{"tokens", Tensor::from<int32_t>({rows, seq}, tokens, t.allocator())},
          {"targets", Tensor::from<int32_t>({rows, seq}, targets, t.allocator())}};
}

std::vector<float> accumulated_losses(Trainer& t, int steps) {
  std::vector<float> out;
  for (int i = 0; i < steps; ++i)
    out.push_back(t.step_micro_batches(micro_batches(t, i), testing::lr(i)).loss);
  return out;
}

TEST(Accumulate, MicroBatchesStepAsTheOneBatchThatHoldsThem) {
  Trainer acc(testing::counting_llama(), accumulating());
  Trainer whole(testing::counting_llama(), accumulating(false));
  for (int i = 0; i < 12; ++i) {
    const float a = acc.step_micro_batches(micro_batches(acc, i), testing::lr(i)).loss;
    const float w = whole.step(one_batch(whole, micro_batches(whole, i)), testing::lr(i)).loss;
    EXPECT_NEAR(a, w, 2e-5 * w) << "step " << i + 1;
  }
  EXPECT_EQ(acc.steps_done(), 12);
  for (const std::string p : {"l0.wq", "lm_head"}) {
    const auto a = acc.parameter(p).to_vector<float>(), w = whole.parameter(p).to_vector<float>();
    for (size_t i = 0; i < a.size(); i += 97) EXPECT_NEAR(a[i], w[i], 1e-4) << p << "[" << i << "]";
  }
}

TEST(Accumulate, RepeatsBitForBitUnderACap) {
  TrainerOptions probe_options = accumulating();
  probe_options.memory.cap = int64_t{1} << 30;
  Trainer probe(testing::counting_llama(2, 40), probe_options);
  const PlanSummary plan = summarize_plan(probe, probe.largest_shape());
  ASSERT_TRUE(plan.every_shape_smallest_cap);
  // The step holds the other micro-batches' inputs beside the one it runs (tokens and targets:
  // 8 bytes a position, not in the plan): a little room for them.
  TrainerOptions capped = accumulating();
  capped.memory.cap = *plan.every_shape_smallest_cap + kMicro * 2 * 40 * 8;
  Trainer a(testing::counting_llama(2, 40), accumulating()),
      b(testing::counting_llama(2, 40), capped);
  EXPECT_EQ(accumulated_losses(a, 6), accumulated_losses(b, 6));
  EXPECT_GT(b.step_micro_batches(micro_batches(b, 6), 1e-3).stats.evictions, 0);
}

TEST(Accumulate, CheckpointsHoldNoBuffersAndResumeBitForBit) {
  const std::string dir = ::testing::TempDir() + "/accumulate_ck";
  std::filesystem::remove_all(dir);
  Trainer a(testing::counting_llama(), accumulating());
  accumulated_losses(a, 3);
  a.save(dir);
  const auto saved = read_safetensors(dir + "/state.safetensors", a.allocator()).tensors;
  EXPECT_FALSE(saved.contains("l0.wq.grad_sum"));
  EXPECT_FALSE(saved.contains("accumulated.count"));
  EXPECT_TRUE(saved.contains("l0.wq.m"));
  std::vector<float> want;
  for (int i = 3; i < 6; ++i)
    want.push_back(a.step_micro_batches(micro_batches(a, i), testing::lr(i)).loss);
  Trainer b(testing::counting_llama(), accumulating());
  b.load(dir);
  for (int i = 3; i < 6; ++i)
    EXPECT_EQ(b.step_micro_batches(micro_batches(b, i), testing::lr(i)).loss, want[i - 3])
        << "step " << i + 1;
  std::filesystem::remove_all(dir);
}

TEST(Accumulate, AFailedMicroBatchLeavesNoPartialSum) {
  Trainer a(testing::counting_llama(8, 64), accumulating()),
      b(testing::counting_llama(8, 64), accumulating());
  std::vector<Batch> bad = micro_batches(a, 0);
  bad.back().erase("targets");  // the last micro-batch fails after the first two added theirs
  EXPECT_THROW(a.step_micro_batches(bad, 1e-3), InvalidArgument);
  EXPECT_EQ(a.step_micro_batches(micro_batches(a, 1), 1e-3).loss,
            b.step_micro_batches(micro_batches(b, 1), 1e-3).loss);
}

// Under f16 loss scaling the backward runs on each micro-batch's mean loss, at the magnitudes the
// scale is set for; the weighing by counts is in f32 after it. The run follows one-batch f16.
TEST(Accumulate, F16LossScalingFollowsTheOneBatchRun) {
  TrainerOptions o = accumulating(), whole_options = accumulating(false);
  o.precision = whole_options.precision = DType::kF16;
  Trainer acc(testing::counting_llama(), o), whole(testing::counting_llama(), whole_options);
  for (int i = 0; i < 20; ++i) {
    const StepResult a = acc.step_micro_batches(micro_batches(acc, i), testing::lr(i)),
                     w = whole.step(one_batch(whole, micro_batches(whole, i)), testing::lr(i));
    EXPECT_EQ(a.skipped, w.skipped) << "step " << i + 1;
    if (!w.skipped) {
      EXPECT_NEAR(a.loss, w.loss, 1e-2 * w.loss) << "step " << i + 1;
    }
  }
}

TEST(Accumulate, SeveralMicroBatchesNeedAnAccumulatingTrainer) {
  Trainer t(testing::counting_llama(), accumulating(false));
  EXPECT_THROW(t.step_micro_batches(micro_batches(t, 0), 1e-3), InvalidArgument);
  EXPECT_NO_THROW(t.step(micro_batches(t, 0).front(), 1e-3));
}

}  // namespace
}  // namespace disc::engine
