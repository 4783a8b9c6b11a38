// Training in bf16 and f16 (TrainerOptions::precision): the losses follow the f32 run's within a
// band and repeat bit for bit; activations cost half, so a step holds less; checkpoints hold the
// f32 masters and move between f32 and bf16 runs; f16's loss scaling skips steps whose gradients
// overflow and resumes bit for bit; what no device kernel runs is refused up front.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numbers>
#include <random>

#include "base/error.h"
#include "engine/trainer.h"
#include "ir/models/model.h"
#include "tests/engine/loss_curve.h"

namespace disc::engine {
namespace {

using testing::counting;
using testing::losses;
using testing::parameters;

Trainer trainer(DType precision, const std::string& device = "cpu", double loss_scale = 65536,
                int64_t growth_interval = 2000) {
  TrainerOptions o;
  o.device = device, o.threads = 2, o.seed = 3, o.precision = precision;
  o.loss_scale = loss_scale, o.loss_scale_growth_interval = growth_interval;
  return Trainer(testing::counting_llama(), o);
}

// A 16-bit run: each of its first 40 losses within 3% (plus 0.02) of the f32 run's, its curve
// within 10% (plus 0.01) of the f32 curve (measured here: bf16 within 9.5%, 0.016, f16 within
// 4.4%); and it repeats bit for bit (loss_curve.h).
void expect_losses_follow_f32(Trainer a, Trainer b) {
  testing::expect_losses_follow_f32(std::move(a), std::move(b), 0.03, 0.1);
}

// bf16 rounds every matmul's operands and result to 8 significant bits.
TEST(Precision, Bf16LossesFollowF32WithinABandAndRepeatBitForBit) {
  expect_losses_follow_f32(trainer(DType::kBF16), trainer(DType::kBF16));
}

// The backward recomputes SwiGLU's silu(gate) rather than hold it from the forward
// (TrainerOptions::backward_recompute); fused kernels round each bf16 value they make, so the
// recompute gives the bits the forward made, and the losses are the same either way.
TEST(Precision, Bf16LossesAreTheSameBitsWithAndWithoutBackwardRecompute) {
  std::vector<float> got[2];
  for (bool recompute : {false, true}) {
    TrainerOptions o;
    o.threads = 2, o.seed = 3, o.precision = DType::kBF16, o.backward_recompute = recompute;
    Trainer t(testing::counting_llama(), o);
    got[recompute] = losses(t, 8);
  }
  EXPECT_EQ(got[0], got[1]);
}

// A step's tracked peak on a batch of 16 rows: the activations a bf16 step keeps for the
// backward cost half the bytes; parameters, gradients and AdamW moments stay f32 (a small part
// here).
TEST(Precision, ABf16StepHoldsLessThanAnF32Step) {
  int64_t peak[2] = {};
  for (DType p : {DType::kF32, DType::kBF16}) {
    Trainer t = trainer(p);
    peak[p == DType::kBF16] = t.step(counting(t, 5, 16), 1e-3).stats.live_peak_bytes;
  }
  EXPECT_LT(peak[1], peak[0] * 0.85) << peak[1] << " of " << peak[0];
}

// A checkpoint holds the f32 masters: an f32 run's restores into a bf16 run bit for bit, and the
// bf16 run goes on from there as a bf16 run started from those weights does.
TEST(Precision, CheckpointsMoveBetweenF32AndBf16Runs) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("disc-precision-" + std::to_string(getpid())))
          .string();
  Trainer f32 = trainer(DType::kF32);
  losses(f32, 3);
  f32.save(dir);
  Trainer bf16 = trainer(DType::kBF16);
  bf16.load(dir);
  for (const std::string& p : f32.parameter_names())
    ASSERT_EQ(bf16.parameter(p).to_vector<float>(), f32.parameter(p).to_vector<float>()) << p;
  const float next = bf16.step(counting(bf16, 3), 3e-3).loss;
  Trainer other = trainer(DType::kBF16);
  other.load(dir);
  EXPECT_EQ(other.step(counting(other, 3), 3e-3).loss, next);
  bf16.save(dir + "-bf16");
  f32.load(dir + "-bf16");  // and back
  EXPECT_EQ(f32.steps_done(), 4);
  std::filesystem::remove_all(dir), std::filesystem::remove_all(dir + "-bf16");
}

// f16 (10 significant bits, range to 65504) with dynamic loss scaling from 2^16.
TEST(Precision, F16WithLossScalingFollowsF32AndRepeatsBitForBit) {
  expect_losses_follow_f32(trainer(DType::kF16), trainer(DType::kF16));
}

// GradScaler's semantics: at a scale of 2^40 the f16 gradients overflow, so each step is skipped
// (nothing changes, bit for bit) and halves the scale, until the gradients fit.
TEST(Precision, AnOverflowSkipsTheStepAndHalvesTheScale) {
  Trainer t = trainer(DType::kF16, "cpu", 0x1p40);
  const auto initial = parameters(t);
  double scale = 0x1p40;
  int skipped = 0;
  for (int step = 0;; ++step) {
    const StepResult r = t.step(counting(t, step), 3e-3);
    ASSERT_EQ(r.loss_scale, scale) << "step " << step + 1;
    ASSERT_TRUE(std::isfinite(r.loss));
    if (!r.skipped) break;
    EXPECT_FALSE(std::isfinite(r.grad_norm));
    EXPECT_EQ(parameters(t), initial) << "a skipped step changed the parameters";
    scale /= 2, ++skipped;
    ASSERT_LT(skipped, 40) << "the scale never came down far enough";
  }
  EXPECT_GT(skipped, 5);
  EXPECT_NE(parameters(t), initial);
}

// ... and after `growth_interval` clean steps in a row the scale doubles.
TEST(Precision, CleanStepsDoubleTheScale) {
  Trainer t = trainer(DType::kF16, "cpu", 0x1p10, 3);
  for (int step = 0; step < 3; ++step) {
    const StepResult r = t.step(counting(t, step), 3e-3);
    ASSERT_FALSE(r.skipped) << "step " << step + 1;
    EXPECT_EQ(r.loss_scale, 0x1p10);
  }
  EXPECT_EQ(t.step(counting(t, 3), 3e-3).loss_scale, 0x1p11);
}

// The scale and its count of clean steps are part of a checkpoint: a resumed f16 run continues as
// the uninterrupted one, bit for bit (saved at step 6, between the doublings after steps 4 and 8).
TEST(Precision, AResumedF16RunContinuesBitForBit) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("disc-f16-" + std::to_string(getpid()))).string();
  Trainer a = trainer(DType::kF16, "cpu", 0x1p12, 4);
  for (int i = 0; i < 6; ++i) a.step(counting(a, i), 3e-3);
  a.save(dir);
  Trainer b = trainer(DType::kF16, "cpu", 0x1p12, 4);
  b.load(dir);
  for (int i = 6; i < 12; ++i) {
    const StepResult ra = a.step(counting(a, i), 3e-3), rb = b.step(counting(b, i), 3e-3);
    EXPECT_EQ(ra.loss, rb.loss) << "step " << i + 1;
    EXPECT_EQ(ra.loss_scale, rb.loss_scale) << "step " << i + 1;
    EXPECT_EQ(ra.skipped, rb.skipped) << "step " << i + 1;
  }
  EXPECT_EQ(parameters(a), parameters(b));
  EXPECT_EQ(a.step(counting(a, 12), 3e-3).loss_scale, 0x1p15);  // doubled after 4, 8 and 12
  std::filesystem::remove_all(dir);
}

// TF32 is an NVIDIA tensor-core mode: elsewhere asking for it is an error, not silently f32.
TEST(Precision, Tf32OffAnNvidiaGpuIsRefusedSayingWhere) {
  for (const char* device : {"cpu", "sim-gpu"}) {
    try {
      Trainer t(ir::models::build_mlp({.in = 2, .classes = 2, .hidden = {2}, .max_batch = 1}),
                {.device = device, .tf32 = true});
      ADD_FAILURE() << device << " accepted tf32";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()), "tf32 is a mode of NVIDIA GPUs' tensor cores; " +
                                           std::string(device) +
                                           " computes f32 matmuls in f32: drop tf32, or train on "
                                           "cuda:N");
    }
  }
}

TEST(Precision, APrecisionDiscDoesNotTrainInIsRefusedNamingThoseItDoes) {
  try {
    trainer(DType::kF64, "cpu");
    ADD_FAILURE() << "f64 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "precision f64 is not one disc trains in: use f32, bf16 or f16");
  }
}

}  // namespace
}  // namespace disc::engine
