// Training in bf16 (TrainerOptions::precision): the losses follow the f32 run's within a band and
// repeat bit for bit; activations cost half, so a step holds less; checkpoints hold the f32
// masters and move between f32 and bf16 runs; what no device kernel runs is refused up front.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "base/error.h"
#include "engine/trainer.h"
#include "ir/models/model.h"

namespace disc::engine {
namespace {

ir::models::Model llama() {
  return ir::models::build_llama(
      {.vocab = 32, .hidden = 64, .layers = 2, .heads = 4, .kv_heads = 2, .ffn = 172});
}

Trainer trainer(DType precision, const std::string& device = "cpu") {
  TrainerOptions o;
  o.device = device, o.threads = 2, o.seed = 3, o.precision = precision;
  return Trainer(llama(), o);
}

// Counting sequences (start, start + stride, ...) of lengths 8..40, as tests/engine/
// training_test.cc draws them: step `step`'s batch, the same for every run.
Batch counting(Trainer& t, int step, int64_t b = 6) {
  std::mt19937_64 rng(static_cast<uint64_t>(step));
  const int64_t s = 8 + static_cast<int64_t>(rng() % 33);
  std::vector<int32_t> tokens(b * s), targets(b * s, -100);
  for (int64_t r = 0; r < b; ++r) {
    const int64_t start = static_cast<int64_t>(rng() % 32), stride = 1 + rng() % 3;
    for (int64_t i = 0; i < s; ++i)
      tokens[r * s + i] = static_cast<int32_t>((start + i * stride) % 32);
    for (int64_t i = 0; i + 1 < s; ++i) targets[r * s + i] = tokens[r * s + i + 1];
  }
  return {{"tokens", Tensor::from<int32_t>({b, s}, tokens, t.allocator())},
          {"targets", Tensor::from<int32_t>({b, s}, targets, t.allocator())}};
}

std::vector<float> losses(Trainer& t, int steps) {
  std::vector<float> out;
  for (int i = 0; i < steps; ++i) out.push_back(t.step(counting(t, i), 3e-3).loss);
  return out;
}

// bf16 rounds every matmul's operands and result to 8 significant bits: over 40 steps of
// learning, each loss stays within 3% (plus 0.02) of the f32 run's, and the run learns as much.
TEST(Precision, Bf16LossesFollowF32WithinABandAndRepeatBitForBit) {
  Trainer f32 = trainer(DType::kF32), bf16 = trainer(DType::kBF16), again = trainer(DType::kBF16);
  const std::vector<float> want = losses(f32, 40), got = losses(bf16, 40);
  EXPECT_EQ(losses(again, 40), got);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 0.03 * want[i] + 0.02) << "step " << i + 1;
  EXPECT_LT(got.back(), 0.5 * got.front());
  EXPECT_NE(got, want);  // the precision did change the numbers
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

TEST(Precision, WhatNoKernelRunsIsRefusedNamingTheDeviceAndWhatItTakes) {
  auto refused = [](DType p, const std::string& device) -> std::string {
    try {
      trainer(p, device);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(refused(DType::kBF16, "sim-gpu"),
            "precision bf16 is not supported on sim-gpu yet: its kernels are f32 only; use f32 "
            "there, or bf16 on cpu");
  EXPECT_EQ(refused(DType::kF16, "cpu"),
            "precision f16 is not supported yet on cpu (f16 with loss scaling is planned): use "
            "bf16 or f32");
  EXPECT_EQ(refused(DType::kF64, "cpu"),
            "precision f64 is not one disc trains in: use f32 or bf16");
}

}  // namespace
}  // namespace disc::engine
