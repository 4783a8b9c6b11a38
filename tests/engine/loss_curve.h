// The curve that training options which change the numbers (a 16-bit precision, a compact
// optimizer state) are held against: a small llama learning to count, 300 steps at a cosine
// learning rate, its losses compared window by window with the f32 run's.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "engine/trainer.h"
#include "ir/models/model.h"
#include "memory/governor.h"

namespace disc::engine::testing {

inline ir::models::Model counting_llama(int64_t max_batch = 64, int64_t max_seq = 1024) {
  return ir::models::build_llama({.vocab = 32,
                                  .hidden = 64,
                                  .layers = 2,
                                  .heads = 4,
                                  .kv_heads = 2,
                                  .ffn = 172,
                                  .max_batch = max_batch,
                                  .max_seq = max_seq});
}

// TinyLlama-1.1B's shapes at B = 2, S = 512: where the fine-tuning issue's memory goals are set.
inline ir::models::LlamaConfig tinyllama_shapes() {
  return {.vocab = 32000,
          .hidden = 2048,
          .layers = 22,
          .heads = 32,
          .kv_heads = 4,
          .ffn = 5632,
          .max_batch = 2,
          .max_seq = 512};
}

// The smallest cap the planner reaches at `model`'s largest batch under options `o`, from a
// Trainer that plans under a generous cap first.
inline int64_t smallest_cap(ir::models::Model model, TrainerOptions o) {
  o.memory.cap = int64_t{1} << 30;
  Trainer probe(std::move(model), o);
  const ir::Bindings largest = probe.largest_shape();
  return probe.governor().smallest_feasible_cap(largest, probe.bytes_held_for(largest));
}

// Counting sequences (start, start + stride, ...) of lengths 8..40, as tests/engine/
// training_test.cc draws them: step `step`'s batch, the same for every run.
inline Batch counting(Trainer& t, int step, int64_t b = 6) {
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

inline std::map<std::string, std::vector<float>> parameters(const Trainer& t) {
  std::map<std::string, std::vector<float>> out;
  for (const std::string& p : t.parameter_names()) out[p] = t.parameter(p).to_vector<float>();
  return out;
}

// The curves' 300 steps and the windows they are compared in.
inline constexpr int kSteps = 300, kWindow = 25;

// The learning rate of step `i`: from 3e-3 down to 3e-4 along a cosine over kSteps, so that the
// runs settle rather than wander on a plateau.
inline double lr(int i) {
  return 3e-4 + 2.7e-3 * 0.5 * (1 + std::cos(std::numbers::pi * std::min(i, kSteps) / kSteps));
}

inline std::vector<float> losses(Trainer& t, int steps) {
  std::vector<float> out;
  for (int i = 0; i < steps; ++i) out.push_back(t.step(counting(t, i), lr(i)).loss);
  return out;
}

// The f32 run (AdamW, f32 state, seed 3) the others are held against.
inline const std::vector<float>& f32_losses() {
  static const std::vector<float> kLosses = [] {
    TrainerOptions o;
    o.threads = 2, o.seed = 3;
    Trainer f32(counting_llama(), o);
    return losses(f32, kSteps);
  }();
  return kLosses;
}

// Mean loss of each window of kWindow steps: the curve, without one batch's noise.
inline std::vector<double> curve(const std::vector<float>& l) {
  std::vector<double> out(l.size() / kWindow, 0.0);
  for (size_t i = 0; i < out.size() * kWindow; ++i) out[i / kWindow] += l[i] / kWindow;
  return out;
}

// Run `a` over 300 steps: each of its first 40 losses within `first` (relative, plus 0.02) of the
// f32 run's, its curve within `band` (relative, plus 0.01) of the f32 curve, and it learns as
// much; `b`, of the same options, repeats its first 40 losses bit for bit; the options did change
// the numbers.
inline void expect_losses_follow_f32(Trainer a, Trainer b, double first_band, double band) {
  const std::vector<float>& want = f32_losses();
  const std::vector<float> got = losses(a, kSteps);
  const std::vector<float> first(got.begin(), got.begin() + 40);
  EXPECT_EQ(losses(b, 40), first);
  for (size_t i = 0; i < first.size(); ++i)
    EXPECT_NEAR(got[i], want[i], first_band * want[i] + 0.02) << "step " << i + 1;
  const std::vector<double> got_curve = curve(got), want_curve = curve(want);
  for (size_t w = 0; w < want_curve.size(); ++w) {
    std::printf("  steps %3zu-%3zu: mean loss %.4f (f32 %.4f)\n", w * kWindow + 1,
                (w + 1) * kWindow, got_curve[w], want_curve[w]);
    EXPECT_NEAR(got_curve[w], want_curve[w], band * want_curve[w] + 0.01) << "window " << w;
  }
  EXPECT_LT(got_curve.back(), 0.1 * got_curve.front());
  EXPECT_NE(got, want);
}

}  // namespace disc::engine::testing
