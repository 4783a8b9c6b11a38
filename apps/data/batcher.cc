// Epoch order, batch assembly and resumable cursors (see batcher.h).
#include "apps/data/batcher.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "apps/data/random.h"
#include "base/error.h"

namespace disc::data {
namespace {

void validate(const std::vector<std::vector<int32_t>>& data, const BatchSpec& s,
              const std::vector<int32_t>& loss_start) {
  if (s.token_budget < 0) {
    throw InvalidArgument("token_budget is " + std::to_string(s.token_budget) +
                          "; it must be 0 (use batch_size) or positive");
  }
  if (s.token_budget == 0 && s.batch_size < 1) {
    throw InvalidArgument("batch_size is " + std::to_string(s.batch_size) +
                          "; it must be at least 1 (or set token_budget)");
  }
  if (data.empty()) throw InvalidArgument("no sequences to batch: the dataset is empty");
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i].empty()) {
      throw InvalidArgument("sequence " + std::to_string(i) +
                            " is empty: drop empty sequences before batching");
    }
  }
  for (size_t i = 0; s.packing && s.token_budget > 0 && i < data.size(); ++i) {
    if (static_cast<int64_t>(data[i].size()) > s.token_budget) {
      throw InvalidArgument("sequence " + std::to_string(i) + " has " +
                            std::to_string(data[i].size()) + " tokens, more than token_budget " +
                            std::to_string(s.token_budget) +
                            ": packed batches never split a sequence; raise the budget to at "
                            "least the longest sequence, or truncate (data.max_len)");
    }
  }
  if (!loss_start.empty() && loss_start.size() != data.size()) {
    throw InvalidArgument("loss_start has " + std::to_string(loss_start.size()) + " entries for " +
                          std::to_string(data.size()) +
                          " sequences: give one per sequence, or none (every target counts)");
  }
  for (size_t i = 0; i < loss_start.size(); ++i) {
    if (loss_start[i] < 0 || loss_start[i] >= static_cast<int64_t>(data[i].size())) {
      throw InvalidArgument("sequence " + std::to_string(i) + " has " +
                            std::to_string(data[i].size()) + " tokens and its loss starts at " +
                            std::to_string(loss_start[i]) + ": a loss start is 0 or more and " +
                            "below the sequence's length (so that some target counts)");
    }
  }
}

// Fisher-Yates over our own uniform draws: the same permutation on every standard library
// (std::shuffle's is implementation-defined).
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle) return order;
  std::mt19937_64 rng = detail::make_engine(seed, static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    auto j = static_cast<int64_t>(detail::uniform_below(rng, static_cast<uint64_t>(i + 1)));
    std::swap(order[i], order[j]);
  }
  return order;
}

// Sizes b's tokens and targets for b.lengths (b.batch and b.seq set): padded rows of b.seq, or
// packed with the offsets and positions. Every token is pad_id, every target ignore_index.
void lay_out(HostBatch& b, bool packed, int32_t pad_id, int32_t ignore_index) {
  int64_t size = b.batch * b.seq;
  if (packed) {
    b.offsets = {0};
    for (int64_t len : b.lengths) {
      b.offsets.push_back(static_cast<int32_t>(b.offsets.back() + len));
      for (int64_t t = 0; t < len; ++t) b.positions.push_back(static_cast<int32_t>(t));
    }
    size = b.offsets.back();
  }
  b.tokens.assign(static_cast<size_t>(size), pad_id);
  b.targets.assign(static_cast<size_t>(size), ignore_index);
}

}  // namespace

Batcher::Batcher(const std::vector<std::vector<int32_t>>& data, BatchSpec spec,
                 std::vector<int32_t> loss_start)
    : data_(data), loss_start_(std::move(loss_start)), spec_(spec) {
  validate(data_, spec_, loss_start_);
  start_epoch(0);
}

void Batcher::start_epoch(int64_t epoch) {
  cursor_ = {epoch, 0};
  order_ = epoch_order(sequences(), spec_.shuffle, spec_.seed, epoch);
}

void Batcher::seek(Cursor c) {
  if (c.epoch < 0 || c.position < 0 || c.position > sequences()) {
    throw InvalidArgument("cannot seek to epoch " + std::to_string(c.epoch) + ", position " +
                          std::to_string(c.position) +
                          ": epochs count from 0 and positions from 0 to " +
                          std::to_string(sequences()) +
                          ", the dataset's size (was the cursor saved with a different dataset?)");
  }
  start_epoch(c.epoch);
  cursor_.position = c.position;
  if (cursor_.position == sequences()) start_epoch(c.epoch + 1);  // the spelling next() leaves
}

int64_t Batcher::take_count() const {
  int64_t left = sequences() - cursor_.position;
  if (spec_.token_budget == 0) return std::min(spec_.batch_size, left);
  int64_t count = 1;
  auto longest = static_cast<int64_t>(data_[order_[cursor_.position]].size());
  int64_t total = longest;
  int64_t rows = spec_.max_rows > 0 ? std::min(left, spec_.max_rows) : left;
  while (count < rows) {
    auto len = static_cast<int64_t>(data_[order_[cursor_.position + count]].size());
    // Packed, a batch computes its tokens; padded, its rows at the longest one.
    const int64_t cost = spec_.packing ? total + len : (count + 1) * std::max(longest, len);
    if (cost > spec_.token_budget) break;
    longest = std::max(longest, len);
    total += len;
    ++count;
  }
  return count;
}

HostBatch Batcher::next() {
  int64_t count = take_count();
  HostBatch b = assemble(count);
  cursor_.position += count;
  // Step into the next epoch at once, so that a cursor has one spelling between two batches.
  if (cursor_.position == sequences()) start_epoch(cursor_.epoch + 1);
  return b;
}

HostBatch Batcher::assemble(int64_t count) const {
  HostBatch b;
  b.batch = count;
  for (int64_t r = 0; r < count; ++r) {
    b.lengths.push_back(static_cast<int64_t>(data_[order_[cursor_.position + r]].size()));
    b.seq = std::max(b.seq, b.lengths.back());
  }
  lay_out(b, spec_.packing, spec_.pad_id, spec_.ignore_index);
  for (int64_t r = 0; r < count; ++r) {
    int64_t i = order_[cursor_.position + r];
    const std::vector<int32_t>& s = data_[i];
    auto len = static_cast<int64_t>(s.size());
    // The first counted target: t + 1 >= loss start, so the prompt's last token predicts the
    // response's first.
    int64_t first = loss_start_.empty() ? 0 : std::max<int64_t>(loss_start_[i] - 1, 0);
    int32_t* tokens = b.tokens.data() + b.start(r);
    int32_t* targets = b.targets.data() + b.start(r);
    std::copy(s.begin(), s.end(), tokens);
    // targets[t] = tokens[t + 1] for first <= t < len - 1
    std::copy(s.begin() + first + 1, s.end(), targets + first);
    b.real_tokens += len - 1 - first;
  }
  return b;
}

namespace {

// Rows [batch * rank / ranks, batch * (rank + 1) / ranks) of `global`, laid out padded or packed.
HostBatch rows_of(const HostBatch& global, int rank, int ranks, int32_t pad_id,
                  int32_t ignore_index, bool packed) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw InvalidArgument("rank " + std::to_string(rank) + " of " + std::to_string(ranks) +
                          " ranks does not exist");
  const int64_t begin = global.batch * rank / ranks, end = global.batch * (rank + 1) / ranks;
  HostBatch b;
  b.batch = std::max<int64_t>(end - begin, 1);
  for (int64_t r = begin; r < end; ++r) b.seq = std::max(b.seq, global.lengths.at(r));
  b.seq = std::max<int64_t>(b.seq, 1);
  b.lengths.assign(global.lengths.begin() + begin, global.lengths.begin() + end);
  // An empty packed share is one sequence of one (ignored) token.
  if (packed && b.lengths.empty()) b.lengths = {1};
  lay_out(b, packed, pad_id, ignore_index);
  for (int64_t r = begin; r < end; ++r) {
    const int64_t from = global.start(r), to = b.start(r - begin);
    for (int64_t t = 0; t < global.lengths[r]; ++t) {
      b.tokens[to + t] = global.tokens[from + t];
      b.targets[to + t] = global.targets[from + t];
      b.real_tokens += global.targets[from + t] != ignore_index;
    }
  }
  return b;
}

}  // namespace

HostBatch pack(const HostBatch& padded, int32_t pad_id, int32_t ignore_index) {
  if (padded.packed()) return padded;
  return rows_of(padded, 0, 1, pad_id, ignore_index, true);
}

HostBatch rank_share(const HostBatch& global, int rank, int ranks, int32_t pad_id,
                     int32_t ignore_index) {
  return rows_of(global, rank, ranks, pad_id, ignore_index, global.packed());
}

}  // namespace disc::data
