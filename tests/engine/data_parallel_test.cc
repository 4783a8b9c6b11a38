// Data-parallel training over MPI: ctest starts this binary under `mpirun -np 2` and `-np 3`
// (tests/engine/CMakeLists.txt); every rank runs every test, collectively. Each rank steps on its
// share of each global batch (rows by position) and must make the updates that one process makes
// on the whole batch, which each rank also trains here, alone, to compare.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "devices/mpi/mpi_communicator.h"
#include "engine/trainer.h"
#include "ir/models/model.h"

namespace disc::engine {
namespace {

// A global batch: rows of different lengths, so that each rank pads to its own longest row and
// counts its own real tokens.
struct Rows {
  std::vector<std::vector<int32_t>> tokens;
};

Rows global_batch(int step) {
  Rows r;
  for (int row = 0; row < 6; ++row) {
    const int len = 5 + (row * 7 + step * 3) % 13;
    std::vector<int32_t> t(static_cast<size_t>(len));
    for (int i = 0; i < len; ++i) t[i] = (row * 31 + i * 7 + step * 11) % 64;
    r.tokens.push_back(t);
  }
  return r;
}

// Rows [begin, end) padded to their longest; targets are the next token, -100 past each row's end.
Batch assemble(const Rows& rows, size_t begin, size_t end, Trainer& t) {
  size_t seq = 0;
  for (size_t i = begin; i < end; ++i) seq = std::max(seq, rows.tokens[i].size());
  const int64_t b = static_cast<int64_t>(end - begin), s = static_cast<int64_t>(seq);
  std::vector<int32_t> tokens(b * s, 0), targets(b * s, -100);
  for (size_t i = begin; i < end; ++i) {
    const auto& row = rows.tokens[i];
    for (size_t j = 0; j < row.size(); ++j) {
      tokens[(i - begin) * seq + j] = row[j];
      if (j + 1 < row.size()) targets[(i - begin) * seq + j] = row[j + 1];
    }
  }
  return {{"tokens", Tensor::from<int32_t>({b, s}, tokens, t.allocator())},
          {"targets", Tensor::from<int32_t>({b, s}, targets, t.allocator())}};
}

Trainer llama(std::shared_ptr<devices::Communicator> comm, memory::GovernorOptions memory = {},
              int64_t bucket_bytes = int64_t{25} << 20) {
  return Trainer(ir::models::build_llama({.vocab = 64,
                                          .hidden = 32,
                                          .layers = 2,
                                          .heads = 2,
                                          .kv_heads = 1,
                                          .ffn = 64,
                                          .max_batch = 8,
                                          .max_seq = 32}),
                 {.device = "cpu",
                  .threads = 1,
                  .seed = 7,
                  .optimizer = {.clip_norm = 1.0},
                  .memory = memory,
                  // The cap fits the ranks' shares, not the largest batch the graph admits.
                  .check_cap = false,
                  .communicator = std::move(comm),
                  .bucket_bytes = bucket_bytes});
}

struct Trained {
  std::vector<float> losses, grad_norms;
  int64_t evictions = 0;
  std::map<std::string, std::vector<float>> params;
};

constexpr int kSteps = 4;

// kSteps steps of `t` on rows [first, last) of each global batch, by this rank's share.
Trained train(Trainer t, int rank, int ranks) {
  Trained r;
  for (int step = 0; step < kSteps; ++step) {
    const Rows rows = global_batch(step);
    const size_t n = rows.tokens.size();
    const StepResult s = t.step(assemble(rows, n * rank / ranks, n * (rank + 1) / ranks, t), 3e-3);
    r.losses.push_back(s.loss);
    r.grad_norms.push_back(s.grad_norm);
    r.evictions += s.stats.evictions;
  }
  for (const std::string& p : t.parameter_names()) r.params[p] = t.parameter(p).to_vector<float>();
  return r;
}

class DataParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    world_ = devices::mpi_world();
    if (!world_) GTEST_SKIP() << "not started by mpirun (ctest runs this binary under mpirun)";
  }
  std::shared_ptr<devices::Communicator> world_;
};

// The tolerance: the ranks sum their gradients and losses in another order than one process
// does, so they agree within f32 rounding, relative 1e-5 for the losses and norms; parameters
// after kSteps AdamW updates of lr 3e-3 within 1e-5 absolute.
TEST_F(DataParallel, RanksMakeTheUpdatesOneProcessMakesOnTheWholeBatch) {
  const Trained one = train(llama(nullptr), 0, 1);
  const Trained ranks = train(llama(world_), world_->rank(), world_->size());
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_NEAR(ranks.losses[i], one.losses[i], 1e-5 * one.losses[i]) << "step " << i + 1;
    EXPECT_NEAR(ranks.grad_norms[i], one.grad_norms[i], 1e-5 * one.grad_norms[i])
        << "step " << i + 1;
  }
  for (const auto& [name, want] : one.params) {
    const std::vector<float>& got = ranks.params.at(name);
    float worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
    EXPECT_LE(worst, 1e-5) << name;
  }
}

// Bit for bit: a second run at the same world size, and runs with small buckets (every gradient
// in a bucket of its own) and under a memory cap, give the same losses and parameters.
TEST_F(DataParallel, RunsRepeatBitForBitWhateverTheBucketsAndTheCap) {
  const int rank = world_->rank(), ranks = world_->size();
  const Trained first = train(llama(world_), rank, ranks);
  const Trained again = train(llama(world_), rank, ranks);
  const Trained buckets = train(llama(world_, {}, 1), rank, ranks);
  const Trained capped = train(llama(world_, {.cap = 400 << 10}), rank, ranks);
  EXPECT_GT(capped.evictions, 0) << "the cap evicts nothing: lower it";
  for (const Trained* r : {&again, &buckets, &capped}) {
    EXPECT_EQ(r->losses, first.losses);
    EXPECT_EQ(r->params, first.params);
  }
  // Every rank holds the same parameters.
  for (const auto& [name, values] : first.params) {
    std::vector<float> sum = values;
    world_->all_reduce_sum(sum.data(), static_cast<int64_t>(sum.size()), DType::kF32);
    for (size_t i = 0; i < sum.size(); ++i) ASSERT_EQ(sum[i], values[i] * ranks) << name;
  }
}

}  // namespace
}  // namespace disc::engine
