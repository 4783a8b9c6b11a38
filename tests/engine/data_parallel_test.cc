// Data-parallel training over MPI: ctest starts this binary under `mpirun -np 2` and `-np 3`
// (tests/engine/CMakeLists.txt); every rank runs every test, collectively. Each rank steps on its
// share of each global batch (rows by position) and must make the updates that one process makes
// on the whole batch, which each rank also trains here, alone, to compare.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "data_parallel_steps.h"
#include "devices/mpi/mpi_communicator.h"

namespace disc::engine {
namespace {

class DataParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    world_ = devices::mpi_world();
    if (!world_) GTEST_SKIP() << "not started by mpirun (ctest runs this binary under mpirun)";
  }
  // Every rank gets here before any goes on.
  void barrier() {
    int64_t here = 1;
    world_->all_reduce_sum(&here, 1, DType::kI64);
  }
  std::shared_ptr<devices::Communicator> world_;
};

// The tolerance: the ranks sum their gradients and losses in another order than one process
// does, so they agree within f32 rounding, relative 1e-5 for the losses and norms; parameters
// after kSteps AdamW updates of lr 3e-3 within 1e-5 absolute.
void expect_follows(const Trained& ranks, const Trained& one) {
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

TEST_F(DataParallel, RanksMakeTheUpdatesOneProcessMakesOnTheWholeBatch) {
  expect_follows(train(llama(world_), world_->rank(), world_->size()), train(llama(nullptr), 0, 1));
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
  // Clipping in two passes: the ranks sum the norm's terms in both, alike.
  const Trained two_passes =
      train(llama(world_, {}, int64_t{25} << 20, false, {.clip_norm = 1.0, .clip_passes = 2}), rank,
            ranks);
  for (const Trained* r : {&again, &buckets, &capped, &two_passes}) {
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

// ZeRO stage 1: each rank keeps the AdamW moments of 1/N of each parameter and updates that
// part from its part of the summed gradients; the ranks follow one process, and repeat bit for
// bit whatever the buckets and the cap.
TEST_F(DataParallel, ShardedOptimizerStateFollowsOneProcessFromAnNthOfTheState) {
  const int rank = world_->rank(), ranks = world_->size();
  const int64_t buckets = int64_t{25} << 20;
  {
    Trainer t = llama(world_, {}, buckets, true);
    for (const std::string& p : t.parameter_names()) {
      const int64_t numel = t.parameter(p).numel(), part = (numel + ranks - 1) / ranks;
      EXPECT_EQ(t.parameter(p + ".m").shape(), std::vector<int64_t>{part}) << p;
      EXPECT_EQ(t.parameter(p + ".v").shape(), std::vector<int64_t>{part}) << p;
    }
  }
  const Trained sharded = train(llama(world_, {}, buckets, true), rank, ranks);
  expect_follows(sharded, train(llama(nullptr), 0, 1));
  const Trained again = train(llama(world_, {}, buckets, true), rank, ranks);
  const Trained small_buckets = train(llama(world_, {}, 1, true), rank, ranks);
  // A cap that evicts at 2 and 3 ranks (each holds 1/N of the moments and of the rows).
  const int64_t cap = (ranks == 2 ? 320 : 280) << 10;
  const Trained capped = train(llama(world_, {.cap = cap}, buckets, true), rank, ranks);
  EXPECT_GT(capped.evictions, 0) << "the cap evicts nothing: lower it";
  const Trained two_passes =
      train(llama(world_, {}, buckets, true, {.clip_norm = 1.0, .clip_passes = 2}), rank, ranks);
  for (const Trained* r : {&again, &small_buckets, &capped, &two_passes}) {
    EXPECT_EQ(r->losses, sharded.losses);
    EXPECT_EQ(r->grad_norms, sharded.grad_norms);
    EXPECT_EQ(r->params, sharded.params);
  }
}

// SGD's momentum shards as AdamW's moments do.
TEST_F(DataParallel, ShardedMomentumFollowsOneProcess) {
  const ir::OptimizerConfig sgd{
      .kind = ir::OptimizerConfig::Kind::kSgd, .momentum = 0.9, .clip_norm = 1.0};
  Trainer sharded = llama(world_, {}, int64_t{25} << 20, true, sgd);
  const std::string p = sharded.parameter_names().front();
  const int64_t ranks = world_->size(), numel = sharded.parameter(p).numel();
  EXPECT_EQ(sharded.parameter(p + ".momentum").numel(), (numel + ranks - 1) / ranks);
  expect_follows(train(sharded, world_->rank(), world_->size()),
                 train(llama(nullptr, {}, int64_t{25} << 20, false, sgd), 0, 1));
}

// A sharded run's checkpoint holds the whole state: the parameters, and each moment whose parts
// the ranks hold. Resumed sharded at this world size, it continues as the run that went on.
TEST_F(DataParallel, ShardedOptimizerCheckpointsHoldTheWholeState) {
  const int rank = world_->rank(), ranks = world_->size();
  const int64_t buckets = int64_t{25} << 20;
  // The same folder on every rank: mpirun is their parent.
  const std::string dir = "/tmp/disc_zero1_" + std::to_string(::getppid());
  Trainer sharded = llama(world_, {}, buckets, true);
  train(sharded, rank, ranks);
  sharded.save(dir);  // every rank: rank 0 writes
  barrier();          // written before anyone reads
  Trainer whole = llama(nullptr);
  whole.load(dir);
  for (const std::string& p : whole.parameter_names()) {
    EXPECT_EQ(whole.parameter(p).to_vector<float>(), sharded.parameter(p).to_vector<float>()) << p;
    for (const std::string& moment : {p + ".m", p + ".v"}) {
      const std::vector<float> all = whole.parameter(moment).to_vector<float>(),
                               part = sharded.parameter(moment).to_vector<float>();
      for (size_t i = 0; i < part.size(); ++i) {
        const size_t at = rank * part.size() + i;
        ASSERT_EQ(at < all.size() ? all[at] : 0.0f, part[i]) << moment << " element " << at;
      }
    }
  }
  Trainer resumed = llama(world_, {}, buckets, true);
  resumed.load(dir);
  const Trained after_resume = train(resumed, rank, ranks, kSteps);
  const Trained went_on = train(sharded, rank, ranks, kSteps);
  EXPECT_EQ(after_resume.losses, went_on.losses);
  EXPECT_EQ(after_resume.params, went_on.params);
  barrier();  // everyone has read it
  if (rank == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace disc::engine
