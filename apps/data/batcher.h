// Batches of variable-length sequences for training: each batch is padded only to its own
// longest sequence, so shapes vary from step to step (what disc compiles for) and no step pays
// for padding it does not need. The order is reproducible from (seed, epoch), and a cursor makes
// a resumed run see exactly the batches an uninterrupted run would have seen.
//
//   Batcher batcher(examples, BatchSpec{.batch_size = 8, .seed = 1});
//   HostBatch b = batcher.next();            // b.tokens and b.targets are [b.batch, b.seq]
//   Batcher::Cursor c = batcher.cursor();    // store with a checkpoint ...
//   batcher.seek(c);                         // ... and continue from it after a restart
//
// Instruction data can leave each example's prompt out of the loss: Batcher(d.examples, spec,
// d.loss_start) with a Dataset from load_text_dataset (train_on "response").
//
// Packed batches (BatchSpec::packing) hold no padding at all: the batch's examples one after
// another in one stream of tokens, with each example's offset and each token's position in its
// example (flash-attention's varlen layout). With batch_size, a packed batch takes exactly the
// examples the padded batch would; with token_budget, whole examples while their tokens fit.
#pragma once

#include <cstdint>
#include <vector>

namespace disc::data {

struct BatchSpec {
  int64_t batch_size = 8;
  // When > 0, replaces batch_size: a batch takes sequences while batch * longest <= token_budget
  // (always at least one sequence, even one longer than the budget); packed, while the sum of
  // their lengths <= token_budget (a sequence longer than the budget is refused).
  int64_t token_budget = 0;
  bool packing = false;  // packed batches: see above
  int64_t max_rows = 0;  // with token_budget: at most this many sequences per batch (0: no limit)
  bool shuffle = true;   // false: file order
  uint64_t seed = 0;
  int32_t pad_id = 0;
  int32_t ignore_index = -100;  // targets that the loss skips
};

struct HostBatch {
  int64_t batch = 0, seq = 0;  // sequences, and the longest
  // Padded: [batch, seq], row-major, each sequence then pad_id. Packed: [T], the sequences one
  // after another (T = the sum of their lengths). targets[t] = tokens[t + 1] within a sequence,
  // for t < len - 1 where the target counts (t + 1 >= the sequence's loss start), ignore_index
  // elsewhere: before the loss start, at a sequence's last token and at every padding position.
  std::vector<int32_t> tokens, targets;
  // Packed: each token's position in its sequence [T] (from 0), and the sequences' offsets
  // [batch + 1] (sequence r is tokens [offsets[r], offsets[r + 1])). Padded: both empty.
  std::vector<int32_t> positions, offsets;
  int64_t real_tokens = 0;       // targets that count: the sum of (len - 1), less those masked
  std::vector<int64_t> lengths;  // each sequence's, in tokens (the rest of its row is padding)

  bool packed() const { return !offsets.empty(); }
  // The positions a step computes: T packed, batch * seq padded.
  int64_t computed() const { return static_cast<int64_t>(tokens.size()); }
  // Where sequence r's first token is.
  int64_t start(int64_t r) const { return packed() ? offsets[r] : r * seq; }
  // The shape of tokens and targets (and packed, positions): [T] packed, [batch, seq] padded.
  std::vector<int64_t> shape() const {
    return packed() ? std::vector<int64_t>{computed()} : std::vector<int64_t>{batch, seq};
  }
};

// A padded batch's sequences packed: the same tokens and targets, without the padding.
HostBatch pack(const HostBatch& padded, int32_t pad_id = 0, int32_t ignore_index = -100);

// Rank `rank`'s share of a global batch in a data-parallel run of `ranks`: its rows by position
// (rows [batch * rank / ranks, batch * (rank + 1) / ranks)), padded to their own longest (or
// packed, as the global batch is), so that the ranks together hold exactly the global batch. A
// rank whose share is empty (a global batch of fewer rows than ranks, as a token budget may
// make) gets one row of padding (packed: one sequence of one token) whose targets all are
// ignore_index: its step counts no token and adds nothing to the gradients, but it takes part
// in the step's collectives.
HostBatch rank_share(const HostBatch& global, int rank, int ranks, int32_t pad_id,
                     int32_t ignore_index);

class Batcher {
 public:
  // Keeps its own copy of `data`. loss_start: empty (every target counts), or one entry per
  // sequence, the first position whose token the loss learns (a prompt's length in tokens):
  // target t counts when t + 1 >= loss_start. Throws InvalidArgument for an empty dataset, an empty
  // sequence, a loss start outside its sequence or an invalid spec.
  Batcher(const std::vector<std::vector<int32_t>>& data, BatchSpec spec,
          std::vector<int32_t> loss_start = {});

  // The next batch. An epoch visits every sequence once; its last batch may be smaller, and the
  // batch after it starts the next epoch (never mixing two epochs).
  HostBatch next();

  // Where next() continues: the epoch, and how many of its sequences were already batched.
  struct Cursor {
    int64_t epoch = 0;
    int64_t position = 0;
  };
  Cursor cursor() const { return cursor_; }
  // After seek(c), next() returns exactly what it returned when cursor() was c.
  void seek(Cursor c);

  int64_t sequences() const { return static_cast<int64_t>(data_.size()); }

 private:
  void start_epoch(int64_t epoch);
  int64_t take_count() const;  // how many sequences the next batch takes
  HostBatch assemble(int64_t count) const;

  std::vector<std::vector<int32_t>> data_;
  std::vector<int32_t> loss_start_;  // empty, or one per sequence
  BatchSpec spec_;
  Cursor cursor_;
  std::vector<int64_t> order_;  // the current epoch's permutation of data_'s indices
};

}  // namespace disc::data
