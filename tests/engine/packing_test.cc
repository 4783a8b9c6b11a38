// Packed steps against padded ones: the same examples, padded to their longest or packed into one
// stream of tokens with each example's offsets and positions, train llama (grouped-query heads,
// RoPE from the positions) and gpt2 (learned positions) to the same losses and gradient norms
// within 1e-5 relative, step for step. A packed run repeats bit for bit under a memory cap and
// without backward recompute; bad offsets and positions are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "base/error.h"
#include "devices/device.h"
#include "engine/trainer.h"
#include "ir/models/model.h"
#include "memory/governor.h"

namespace disc::engine {
namespace {

using Examples = std::vector<std::vector<int32_t>>;

// Counting sequences of the given lengths (as training_test's), token ids below `vocab`.
Examples counting(const std::vector<int64_t>& lengths, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Examples e;
  for (int64_t len : lengths) {
    const int64_t start = static_cast<int64_t>(rng() % vocab), stride = 1 + rng() % 3;
    std::vector<int32_t> s(len);
    for (int64_t t = 0; t < len; ++t) s[t] = static_cast<int32_t>((start + t * stride) % vocab);
    e.push_back(s);
  }
  return e;
}

// targets[t] = tokens[t + 1] within each example, -100 at its last token (and at padding).
Batch padded(const Examples& ex, memory::Allocator& alloc) {
  int64_t s = 0;
  for (const auto& e : ex) s = std::max<int64_t>(s, e.size());
  const int64_t b = static_cast<int64_t>(ex.size());
  std::vector<int32_t> tokens(b * s, 0), targets(b * s, -100);
  for (int64_t r = 0; r < b; ++r) {
    std::copy(ex[r].begin(), ex[r].end(), tokens.begin() + r * s);
    std::copy(ex[r].begin() + 1, ex[r].end(), targets.begin() + r * s);
  }
  return {{"tokens", Tensor::from<int32_t>({b, s}, tokens, alloc)},
          {"targets", Tensor::from<int32_t>({b, s}, targets, alloc)}};
}

Batch packed(const Examples& ex, memory::Allocator& alloc) {
  std::vector<int32_t> tokens, targets, positions, offsets = {0};
  for (const auto& e : ex) {
    tokens.insert(tokens.end(), e.begin(), e.end());
    targets.insert(targets.end(), e.begin() + 1, e.end());
    targets.push_back(-100);
    for (size_t p = 0; p < e.size(); ++p) positions.push_back(static_cast<int32_t>(p));
    offsets.push_back(static_cast<int32_t>(tokens.size()));
  }
  const int64_t t = static_cast<int64_t>(tokens.size()), n = static_cast<int64_t>(offsets.size());
  return {{"tokens", Tensor::from<int32_t>({t}, tokens, alloc)},
          {"targets", Tensor::from<int32_t>({t}, targets, alloc)},
          {"positions", Tensor::from<int32_t>({t}, positions, alloc)},
          {"offsets", Tensor::from<int32_t>({n}, offsets, alloc)}};
}

// Steps of 1 to 6 examples of lengths 1 (no target) to 61 (past one block of query rows).
std::vector<Examples> steps_of_examples() {
  std::vector<Examples> steps;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 6; ++i) {
    std::vector<int64_t> lengths(1 + i);
    for (auto& l : lengths) l = 2 + static_cast<int64_t>(rng() % 60);
    if (i == 2) lengths[0] = 1;
    steps.push_back(counting(lengths, 32, 100 + i));
  }
  return steps;
}

struct Trained {
  std::vector<float> losses, norms;
  int64_t evictions = 0;
};

Trained train(ir::models::Model model, bool pack, TrainerOptions o = {}) {
  o.seed = 3;
  Trainer t(std::move(model), o);
  Trained r;
  for (const Examples& ex : steps_of_examples()) {
    StepResult s = t.step(pack ? packed(ex, t.allocator()) : padded(ex, t.allocator()), 1e-3);
    r.losses.push_back(s.loss);
    r.norms.push_back(s.grad_norm);
    r.evictions += s.stats.evictions;
  }
  return r;
}

void expect_relative(const std::vector<float>& got, const std::vector<float>& want,
                     const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * std::abs(want[i])) << what << " at step " << i + 1;
}

ir::models::LlamaConfig llama(bool pack) {
  return {.vocab = 32,
          .hidden = 64,
          .layers = 2,
          .heads = 4,
          .kv_heads = 2,
          .ffn = 96,
          .max_batch = 8,
          .max_seq = 64,
          .packed = pack};
}

ir::models::Gpt2Config gpt2(bool pack) {
  return {.vocab = 32,
          .hidden = 32,
          .layers = 2,
          .heads = 2,
          .ffn = 64,
          .max_batch = 8,
          .max_seq = 64,
          .packed = pack};
}

TEST(Packing, LlamaPackedFollowsPaddedStepForStep) {
  const Trained pad = train(ir::models::build_llama(llama(false)), false);
  const Trained pack = train(ir::models::build_llama(llama(true)), true);
  expect_relative(pack.losses, pad.losses, "loss");
  expect_relative(pack.norms, pad.norms, "gradient norm");
}

TEST(Packing, Gpt2PackedFollowsPaddedStepForStep) {
  const Trained pad = train(ir::models::build_gpt2(gpt2(false)), false);
  const Trained pack = train(ir::models::build_gpt2(gpt2(true)), true);
  expect_relative(pack.losses, pad.losses, "loss");
  expect_relative(pack.norms, pad.norms, "gradient norm");
}

TEST(Packing, PackedRunsRepeatBitForBitUnderACapAndWithoutRecompute) {
  const Trained plain = train(ir::models::build_llama(llama(true)), true);
  EXPECT_EQ(train(ir::models::build_llama(llama(true)), true).losses, plain.losses);
  TrainerOptions no_recompute;
  no_recompute.backward_recompute = false;
  const Trained other = train(ir::models::build_llama(llama(true)), true, no_recompute);
  EXPECT_EQ(other.losses, plain.losses);
  EXPECT_EQ(other.norms, plain.norms);
  // T bounded by the largest step's tokens: the smallest cap the planner accepts for that step
  // forces evictions there.
  ir::models::LlamaConfig bounded = llama(true);
  for (const Examples& ex : steps_of_examples()) {
    int64_t t = 0;
    for (const auto& e : ex) t += static_cast<int64_t>(e.size());
    bounded.max_tokens = std::max(bounded.max_tokens, t);
  }
  TrainerOptions probe;  // a cap, so that the governor finds what it may evict
  probe.memory.cap = int64_t{1} << 30;
  Trainer t(ir::models::build_llama(bounded), probe);
  const ir::Bindings worst = t.largest_shape();
  TrainerOptions capped;
  capped.memory.cap = t.governor().smallest_feasible_cap(worst, t.bytes_held_for(worst));
  const Trained under_cap = train(ir::models::build_llama(bounded), true, capped);
  EXPECT_GT(under_cap.evictions, 0);
  EXPECT_EQ(under_cap.losses, plain.losses);
  EXPECT_EQ(under_cap.norms, plain.norms);
}

TEST(Packing, TheGraphBoundsTokensAndSequences) {
  const ir::models::Model m = ir::models::build_llama(llama(true));
  const ir::Value* offsets = m.graph->find_value("offsets");
  ASSERT_NE(offsets, nullptr);
  EXPECT_EQ(offsets->role(), ir::Role::kInput);
  EXPECT_EQ(ir::models::build_llama(llama(false)).graph->find_value("offsets"), nullptr);
  Trainer t(ir::models::build_llama(llama(true)), {});
  const ir::Bindings worst = t.largest_shape();
  EXPECT_EQ(worst.at("T"), 8 * 64);  // max_batch * max_seq without a token budget
  ir::models::LlamaConfig budget = llama(true);
  budget.max_tokens = 100;
  Trainer b(ir::models::build_llama(budget), {});
  EXPECT_EQ(b.largest_shape().at("T"), 100);
}

TEST(Packing, BadOffsetsAreRefused) {
  Trainer t(ir::models::build_llama(llama(true)), {});
  Batch b = packed(counting({3, 4}, 32, 1), t.allocator());
  const std::vector<int32_t> bad = {0, 8, 7};  // offsets must reach T = 7 without decreasing
  b["offsets"] = Tensor::from<int32_t>({3}, bad, t.allocator());
  try {
    t.step(b, 1e-3);
    FAIL() << "bad offsets were taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("offsets"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace disc::engine
