// The batcher: shapes and padding, shifted targets, targets masked before a loss start, token
// budgets, epochs, awkward batch sizes, and bit-exact resume from a cursor.
#include "apps/data/batcher.h"

#include <algorithm>
#include <set>

#include "base/error.h"
#include "test_util.h"

namespace disc::data {
namespace {

using testing::message_of;
using Data = std::vector<std::vector<int32_t>>;

// Sequence i holds i * 1000 + 1, i * 1000 + 2, ...: its first token names it, and no real token
// equals the pad id 0.
Data numbered(const std::vector<int64_t>& lengths) {
  Data d;
  for (size_t i = 0; i < lengths.size(); ++i) {
    d.emplace_back();
    for (int64_t t = 0; t < lengths[i]; ++t)
      d.back().push_back(static_cast<int32_t>(i * 1000 + t + 1));
  }
  return d;
}

// Lengths 2..40 in a scrambled but fixed pattern.
std::vector<int64_t> varied(int n) {
  std::vector<int64_t> l;
  for (int i = 0; i < n; ++i) l.push_back(2 + (i * 17 + 5) % 39);
  return l;
}

// Which sequences a batch holds, by their first token.
std::vector<int64_t> ids(const HostBatch& b) {
  std::vector<int64_t> out;
  for (int64_t r = 0; r < b.batch; ++r) out.push_back(b.tokens[r * b.seq] / 1000);
  return out;
}

// Checks one batch against the sequences it claims to hold: padding, targets, real_tokens.
void expect_well_formed(const HostBatch& b, const Data& data, const BatchSpec& spec,
                        const std::vector<int32_t>& loss_start = {}) {
  ASSERT_EQ(b.tokens.size(), static_cast<size_t>(b.batch * b.seq));
  ASSERT_EQ(b.targets.size(), b.tokens.size());
  int64_t longest = 0, real = 0;
  for (int64_t r = 0; r < b.batch; ++r) {
    const auto& s = data[ids(b)[r]];
    auto len = static_cast<int64_t>(s.size());
    int64_t start = loss_start.empty() ? 0 : loss_start[ids(b)[r]];
    longest = std::max(longest, len);
    for (int64_t t = 0; t < b.seq; ++t) {
      int32_t token = t < len ? s[t] : spec.pad_id;
      bool counts = t < len - 1 && t + 1 >= start;
      int32_t target = counts ? s[t + 1] : spec.ignore_index;
      real += counts;
      ASSERT_EQ(b.tokens[r * b.seq + t], token) << "row " << r << " position " << t;
      ASSERT_EQ(b.targets[r * b.seq + t], target) << "row " << r << " position " << t;
    }
  }
  EXPECT_EQ(b.seq, longest);  // padded to this batch's longest, not beyond
  EXPECT_EQ(b.real_tokens, real);
}

TEST(Batcher, PadsToTheBatchsLongestAndShiftsTargets) {
  Data data = numbered({3, 5, 2, 4});
  BatchSpec spec{.batch_size = 2, .shuffle = false};
  Batcher batcher(data, spec);
  HostBatch b = batcher.next();
  EXPECT_EQ(b.batch, 2);
  EXPECT_EQ(b.seq, 5);
  EXPECT_EQ(b.tokens, (std::vector<int32_t>{1, 2, 3, 0, 0, 1001, 1002, 1003, 1004, 1005}));
  EXPECT_EQ(b.targets,
            (std::vector<int32_t>{2, 3, -100, -100, -100, 1002, 1003, 1004, 1005, -100}));
  EXPECT_EQ(b.real_tokens, 6);
  b = batcher.next();
  EXPECT_EQ(b.seq, 4);  // this batch's own longest
  EXPECT_EQ(ids(b), (std::vector<int64_t>{2, 3}));
  expect_well_formed(b, data, spec);
}

TEST(Batcher, UsesThePadIdAndIgnoreIndexItIsGiven) {
  Data data = numbered({1, 3});
  BatchSpec spec{.batch_size = 2, .shuffle = false, .pad_id = 7, .ignore_index = -1};
  HostBatch b = Batcher(data, spec).next();
  EXPECT_EQ(b.tokens, (std::vector<int32_t>{1, 7, 7, 1001, 1002, 1003}));
  EXPECT_EQ(b.targets, (std::vector<int32_t>{-1, -1, -1, 1002, 1003, -1}));
  EXPECT_EQ(b.real_tokens, 2);  // a 1-token sequence has no target
}

// Runs whole epochs and checks each visits every sequence once, with batches of `expect` sizes.
void check_epochs(const Data& data, BatchSpec spec, const std::vector<int64_t>& expect_sizes) {
  Batcher batcher(data, spec);
  std::vector<std::vector<int64_t>> orders;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> order, sizes;
    while (order.size() < data.size()) {
      ASSERT_EQ(batcher.cursor().epoch, epoch);
      HostBatch b = batcher.next();
      expect_well_formed(b, data, spec);
      for (int64_t id : ids(b)) order.push_back(id);
      sizes.push_back(b.batch);
    }
    EXPECT_EQ(sizes, expect_sizes);
    EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()).size(), data.size())
        << "epoch " << epoch;
    orders.push_back(order);
  }
  EXPECT_EQ(batcher.cursor().epoch, 3);
  EXPECT_EQ(batcher.cursor().position, 0);
  // Shuffled, each epoch has its own order; unshuffled, every epoch is in file order.
  EXPECT_EQ(orders[0] != orders[1], spec.shuffle);
}

TEST(Batcher, EveryEpochVisitsEverySequenceOnce) {
  Data data = numbered(varied(20));
  check_epochs(data, {.batch_size = 1}, std::vector<int64_t>(20, 1));
  check_epochs(data, {.batch_size = 7}, {7, 7, 6});  // a prime: the epoch's last batch is short
  check_epochs(data, {.batch_size = 100}, {20});     // larger than the dataset: one batch per epoch
  check_epochs(data, {.batch_size = 20}, {20});
  check_epochs(data, {.batch_size = 3, .shuffle = false}, {3, 3, 3, 3, 3, 3, 2});
}

TEST(Batcher, WithoutShuffleBatchesComeInFileOrder) {
  Batcher batcher(numbered(varied(5)), {.batch_size = 2, .shuffle = false});
  EXPECT_EQ(ids(batcher.next()), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(ids(batcher.next()), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ids(batcher.next()), (std::vector<int64_t>{4}));
  EXPECT_EQ(ids(batcher.next()), (std::vector<int64_t>{0, 1}));
}

TEST(Batcher, ShuffleIsFixedBySeedAndEpoch) {
  Data data = numbered(varied(10));
  auto first = [&](uint64_t seed) {
    return ids(Batcher(data, {.batch_size = 10, .seed = seed}).next());
  };
  EXPECT_EQ(first(1), first(1));
  EXPECT_NE(first(1), first(2));
  // Pinned: our own Fisher-Yates over mt19937_64 gives this order with every standard library.
  EXPECT_EQ(first(0), (std::vector<int64_t>{6, 1, 2, 4, 7, 5, 3, 0, 9, 8}));
}

TEST(Batcher, TokenBudgetStopsAtMaxRows) {
  Data data(50, std::vector<int32_t>(3, 1));  // short sequences: the budget alone would take all 50
  BatchSpec spec;
  spec.token_budget = 1000, spec.max_rows = 7, spec.shuffle = false;
  Batcher b(data, spec);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(b.next().batch, 7);
  EXPECT_EQ(b.next().batch, 1);  // the epoch's remainder
}

TEST(Batcher, TokenBudgetBoundsBatchTimesLongest) {
  Data data = numbered(varied(200));
  BatchSpec spec{.token_budget = 100, .shuffle = false};
  Batcher batcher(data, spec);
  size_t seen = 0;
  while (seen < data.size()) {
    HostBatch b = batcher.next();
    expect_well_formed(b, data, spec);
    EXPECT_LE(b.batch * b.seq, 100);
    seen += b.batch;
    // Greedy: the next sequence in file order would have broken the budget.
    if (seen < data.size()) {
      auto next_len = static_cast<int64_t>(data[seen].size());
      EXPECT_GT((b.batch + 1) * std::max(b.seq, next_len), 100) << "batch ending before " << seen;
    }
  }
  EXPECT_EQ(seen, data.size());
}

TEST(Batcher, ASequenceLongerThanTheBudgetGoesAlone) {
  Batcher batcher(numbered({50, 3, 3}), {.token_budget = 10, .shuffle = false});
  HostBatch b = batcher.next();
  EXPECT_EQ(b.batch, 1);
  EXPECT_EQ(b.seq, 50);
  EXPECT_EQ(batcher.next().batch, 2);  // 2 * 3 <= 10, and the epoch ends there
}

// A packed batch against the padded batch of the same spec: the same sequences in the same order,
// each one's tokens and targets where its offset says, positions from 0 in each, no padding.
void expect_packs(const HostBatch& packed, const HostBatch& padded) {
  ASSERT_TRUE(packed.packed());
  EXPECT_FALSE(padded.packed());
  EXPECT_EQ(packed.batch, padded.batch);
  EXPECT_EQ(packed.lengths, padded.lengths);
  EXPECT_EQ(packed.real_tokens, padded.real_tokens);
  ASSERT_EQ(packed.offsets.size(), static_cast<size_t>(packed.batch + 1));
  EXPECT_EQ(packed.offsets.front(), 0);
  EXPECT_EQ(packed.offsets.back(), packed.computed());
  ASSERT_EQ(packed.positions.size(), packed.tokens.size());
  for (int64_t r = 0; r < padded.batch; ++r) {
    const int64_t len = padded.lengths[r];
    ASSERT_EQ(packed.offsets[r + 1] - packed.offsets[r], len);
    for (int64_t t = 0; t < len; ++t) {
      EXPECT_EQ(packed.tokens[packed.offsets[r] + t], padded.tokens[r * padded.seq + t]);
      EXPECT_EQ(packed.targets[packed.offsets[r] + t], padded.targets[r * padded.seq + t]);
      EXPECT_EQ(packed.positions[packed.offsets[r] + t], t);
    }
  }
}

TEST(Batcher, PackedBatchesHoldThePaddedBatchesExamplesWithoutPadding) {
  const Data data = numbered(varied(37));
  std::vector<int32_t> loss_start;  // masks and targets mean what they mean padded
  for (const auto& s : data) loss_start.push_back(std::min<int32_t>(3, s.size() - 1));
  Batcher padded(data, {.batch_size = 5, .seed = 9}, loss_start);
  Batcher packed(data, {.batch_size = 5, .packing = true, .seed = 9}, loss_start);
  for (int i = 0; i < 12; ++i) expect_packs(packed.next(), padded.next());  // into a 2nd epoch
  EXPECT_EQ(packed.cursor().epoch, padded.cursor().epoch);
  EXPECT_EQ(packed.cursor().position, padded.cursor().position);
}

TEST(Batcher, PackedTokenBudgetTakesWholeExamplesWhileTheyFit) {
  const Data data = numbered(varied(200));
  Batcher batcher(data, {.token_budget = 100, .packing = true, .shuffle = false});
  size_t seen = 0;
  while (seen < data.size()) {
    const HostBatch b = batcher.next();
    EXPECT_LE(b.computed(), 100);
    seen += b.batch;
    if (seen < data.size()) {  // the next example would have passed the budget
      EXPECT_GT(b.computed() + static_cast<int64_t>(data[seen].size()), 100);
    }
  }
  EXPECT_EQ(seen, data.size());
}

TEST(Batcher, PackedRefusesAnExampleLongerThanTheBudget) {
  EXPECT_NE(message_of<InvalidArgument>([] {
              Batcher(numbered({5, 50}), {.token_budget = 10, .packing = true});
            }).find("sequence 1 has 50 tokens, more than token_budget 10"),
            std::string::npos);
}

TEST(Batcher, RankSharesOfAPackedBatchJoinToIt) {
  const Data data = numbered(varied(7));
  Batcher batcher(data, {.batch_size = 7, .packing = true, .shuffle = false});
  const HostBatch global = batcher.next();
  std::vector<int32_t> tokens;
  int64_t real = 0;
  for (int rank = 0; rank < 3; ++rank) {
    const HostBatch share = rank_share(global, rank, 3, 0, -100);
    EXPECT_TRUE(share.packed());
    tokens.insert(tokens.end(), share.tokens.begin(), share.tokens.end());
    real += share.real_tokens;
  }
  EXPECT_EQ(tokens, global.tokens);
  EXPECT_EQ(real, global.real_tokens);
  // More ranks than examples: an empty share is one token whose target is ignored.
  Batcher one(numbered({4}), {.batch_size = 1, .packing = true});
  const HostBatch empty = rank_share(one.next(), 0, 2, 0, -100);  // rank 1 holds the example
  EXPECT_EQ(empty.offsets, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(empty.targets, (std::vector<int32_t>{-100}));
  EXPECT_EQ(empty.real_tokens, 0);
}

TEST(Batcher, LossStartMasksTheTargetsBeforeIt) {
  Data data = numbered({5, 4, 3});
  // Sequence 0's loss starts at token 3: targets 2 and 3 (predicting tokens 3 and 4) count.
  // Sequence 1's at 0 and sequence 2's at 1: every target counts.
  Batcher batcher(data, {.batch_size = 3, .shuffle = false}, {3, 0, 1});
  HostBatch b = batcher.next();
  EXPECT_EQ(b.tokens, (std::vector<int32_t>{1, 2, 3, 4, 5, 1001, 1002, 1003, 1004, 0, 2001, 2002,
                                            2003, 0, 0}));
  EXPECT_EQ(b.targets, (std::vector<int32_t>{-100, -100, 4, 5, -100, 1002, 1003, 1004, -100, -100,
                                             2002, 2003, -100, -100, -100}));
  EXPECT_EQ(b.real_tokens, 2 + 3 + 2);
}

TEST(Batcher, LossStartsFollowTheirSequencesThroughShuffledEpochs) {
  Data data = numbered(varied(20));
  std::vector<int32_t> loss_start;
  for (size_t i = 0; i < data.size(); ++i)
    loss_start.push_back(static_cast<int32_t>(i % data[i].size()));
  for (BatchSpec spec : {BatchSpec{.batch_size = 7, .seed = 5}, BatchSpec{.token_budget = 64}}) {
    Batcher batcher(data, spec, loss_start);
    for (int i = 0; i < 12; ++i) expect_well_formed(batcher.next(), data, spec, loss_start);
  }
}

TEST(Batcher, SeekReproducesAnUninterruptedRun) {
  Data data = numbered(varied(23));
  std::vector<int32_t> loss_start;
  for (size_t i = 0; i < data.size(); ++i)
    loss_start.push_back(static_cast<int32_t>((i * 7) % data[i].size()));
  for (BatchSpec spec :
       {BatchSpec{.batch_size = 5, .seed = 3}, BatchSpec{.token_budget = 64, .seed = 4}}) {
    for (const std::vector<int32_t>& starts : {std::vector<int32_t>{}, loss_start}) {
      Batcher straight(data, spec, starts);
      std::vector<HostBatch> all;
      std::vector<Batcher::Cursor> cursors;
      for (int i = 0; i < 40; ++i)
        cursors.push_back(straight.cursor()), all.push_back(straight.next());
      for (int stop : {0, 1, 4, 5, 13, 39}) {  // inside epochs and at their boundaries
        Batcher resumed(data, spec, starts);
        resumed.seek(cursors[stop]);
        for (int i = stop; i < 40; ++i) {
          HostBatch b = resumed.next();
          ASSERT_EQ(b.tokens, all[i].tokens) << "resumed at batch " << stop << ", batch " << i;
          ASSERT_EQ(b.targets, all[i].targets);
          ASSERT_EQ(b.real_tokens, all[i].real_tokens);
        }
      }
    }
  }
}

TEST(Batcher, SeekToTheEndOfAnEpochIsTheStartOfTheNext) {
  Data data = numbered(varied(6));
  Batcher a(data, {.batch_size = 4}), b(data, {.batch_size = 4});
  a.seek({2, 6});
  b.seek({3, 0});
  EXPECT_EQ(a.cursor().epoch, 3);
  EXPECT_EQ(a.next().tokens, b.next().tokens);
}

TEST(Batcher, BadInputNamesWhatIsWrong) {
  Data data = numbered({3});
  auto error = [&](const Data& d, BatchSpec s) {
    return message_of<InvalidArgument>([&] { Batcher(d, s); });
  };
  EXPECT_EQ(error(data, {.batch_size = 0}),
            "batch_size is 0; it must be at least 1 (or set token_budget)");
  EXPECT_EQ(error(data, {.token_budget = -5}),
            "token_budget is -5; it must be 0 (use batch_size) or positive");
  EXPECT_EQ(error({}, {}), "no sequences to batch: the dataset is empty");
  EXPECT_EQ(error({{1}, {}}, {}), "sequence 1 is empty: drop empty sequences before batching");
  auto starts_error = [&](std::vector<int32_t> starts) {
    return message_of<InvalidArgument>([&] { Batcher(numbered({3, 2}), {}, starts); });
  };
  EXPECT_EQ(starts_error({1}),
            "loss_start has 1 entries for 2 sequences: give one per sequence, or none (every "
            "target counts)");
  EXPECT_EQ(starts_error({0, 2}),
            "sequence 1 has 2 tokens and its loss starts at 2: a loss start is 0 or more and below "
            "the sequence's length (so that some target counts)");
  EXPECT_EQ(starts_error({-1, 0}),
            "sequence 0 has 3 tokens and its loss starts at -1: a loss start is 0 or more and "
            "below the sequence's length (so that some target counts)");
  Batcher batcher(data, {});
  EXPECT_EQ(message_of<InvalidArgument>([&] { batcher.seek({0, 2}); }),
            "cannot seek to epoch 0, position 2: epochs count from 0 and positions from 0 to 1, "
            "the dataset's size (was the cursor saved with a different dataset?)");
  EXPECT_EQ(message_of<InvalidArgument>([&] { batcher.seek({-1, 0}); }),
            "cannot seek to epoch -1, position 0: epochs count from 0 and positions from 0 to 1, "
            "the dataset's size (was the cursor saved with a different dataset?)");
}

}  // namespace
}  // namespace disc::data
