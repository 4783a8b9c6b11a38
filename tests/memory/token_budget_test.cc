// A token budget (the limit B*S <= max_tokens) under a memory cap: the check before the first step
// asks every worst shape of the staircase the limit leaves, not B and S both at their bounds (a
// batch that never comes); what it accepts, every admissible batch keeps, with the numbers of the
// run without a cap.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "base/error.h"
#include "engine/trainer.h"
#include "ir/models/model.h"
#include "memory/governor.h"

namespace disc::engine {
namespace {

constexpr int64_t kMaxBatch = 12, kMaxSeq = 24, kTokens = 48;

Trainer make_trainer(int64_t max_tokens, int64_t cap) {
  return Trainer(ir::models::build_llama({.vocab = 40,
                                          .hidden = 32,
                                          .layers = 2,
                                          .heads = 4,
                                          .kv_heads = 2,
                                          .ffn = 64,
                                          .max_batch = kMaxBatch,
                                          .max_seq = kMaxSeq,
                                          .max_tokens = max_tokens}),
                 {.device = "cpu", .threads = 2, .seed = 7, .memory = {.cap = cap}});
}

memory::HeldFor held_for(const Trainer& t) {
  return [&t](const ir::Bindings& b) { return t.bytes_held_for(b); };
}

Batch make_batch(int64_t b, int64_t s, uint64_t seed, memory::Allocator& alloc) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> tokens(b * s), targets(b * s);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % 40);
  for (auto& t : targets) t = static_cast<int32_t>(rng() % 40);
  return {{"tokens", Tensor::from<int32_t>({b, s}, tokens, alloc)},
          {"targets", Tensor::from<int32_t>({b, s}, targets, alloc)}};
}

TEST(TokenBudget, TheSmallestAcceptedCapIsFarBelowTheOneForBothBounds) {
  Trainer limited = make_trainer(kTokens, int64_t{1} << 30);
  Trainer boxed = make_trainer(0, int64_t{1} << 30);
  ASSERT_GT(limited.governor().worst_shapes().size(), 2u);
  ASSERT_EQ(boxed.governor().worst_shapes().size(), 1u);
  const int64_t every = limited.governor().smallest_cap(held_for(limited));
  const int64_t both_bounds = boxed.governor().smallest_cap(held_for(boxed));
  // 48 tokens a batch rather than 12 x 24 = 288: the activations shrink, the parameters stay.
  EXPECT_LT(every, both_bounds * 3 / 5) << every << " against " << both_bounds;
  EXPECT_NO_THROW(make_trainer(kTokens, every));
  try {
    make_trainer(kTokens, every - every / 50);
    ADD_FAILURE() << "a cap 2% below the smallest accepted one was accepted";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("is too small for the batch of shape (B="),
              std::string::npos)
        << e.what();
  }
}

TEST(TokenBudget, EveryAdmissibleBatchKeepsTheSmallestAcceptedCap) {
  Trainer sizing = make_trainer(kTokens, int64_t{1} << 30);
  const int64_t cap = sizing.governor().smallest_cap(held_for(sizing));
  Trainer t = make_trainer(kTokens, cap);
  int planned = 0;
  for (int64_t b = 1; b <= kMaxBatch; ++b) {
    for (int64_t s = 1; s <= kMaxSeq && b * s <= kTokens; ++s) {
      const ir::Bindings shape = t.step_graph().shapes().complete_and_check({{"B", b}, {"S", s}});
      EXPECT_NO_THROW(t.governor().plan(shape, t.bytes_held_for(shape))) << "B=" << b << " S=" << s;
      ++planned;
    }
  }
  EXPECT_GT(planned, 100);
}

TEST(TokenBudget, BatchesAcrossTheStaircaseGiveTheNumbersOfTheRunWithoutACap) {
  Trainer sizing = make_trainer(kTokens, int64_t{1} << 30);
  const int64_t cap = sizing.governor().smallest_cap(held_for(sizing));
  Trainer capped = make_trainer(kTokens, cap), uncapped = make_trainer(kTokens, 0);
  std::vector<std::pair<int64_t, int64_t>> shapes = {{2, 24}, {12, 4}, {3, 16}, {7, 6}, {1, 1}};
  // The greedy planner is not monotone: some smaller batches find no plan of their own under this
  // cap and run by a larger worst shape's plan. Two of them join the steps.
  const memory::Governor& gov = capped.governor();
  for (int64_t b = 1; b <= kMaxBatch && shapes.size() < 7; ++b) {
    for (int64_t s = 1; s <= kMaxSeq && b * s <= kTokens && shapes.size() < 7; ++s) {
      const ir::Bindings shape =
          capped.step_graph().shapes().complete_and_check({{"B", b}, {"S", s}});
      try {
        memory::plan_memory(capped.step_graph(), gov.liveness(), gov.candidates(), shape,
                            capped.bytes_held_for(shape), {.cap = cap});
      } catch (const OutOfMemory&) {
        shapes.emplace_back(b, s);
      }
    }
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto [b, s] = shapes[i];
    const StepResult a = capped.step(make_batch(b, s, i, capped.allocator()), 1e-2);
    const StepResult c = uncapped.step(make_batch(b, s, i, uncapped.allocator()), 1e-2);
    EXPECT_EQ(std::memcmp(&a.loss, &c.loss, sizeof a.loss), 0) << "B=" << b << " S=" << s;
    EXPECT_LE(a.stats.reserved_peak_bytes, cap) << "B=" << b << " S=" << s;
  }
}

TEST(TokenBudget, ABatchOverTheBudgetIsRefusedNamingTheLimit) {
  Trainer t = make_trainer(kTokens, 0);
  try {
    t.step(make_batch(3, 17, 1, t.allocator()), 1e-2);
    ADD_FAILURE() << "a batch of 51 tokens passed the limit of 48";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("B*S = 51 breaks the limit B*S <= 48"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace disc::engine
