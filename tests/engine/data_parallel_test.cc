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

// ZeRO stage 1: each rank keeps the AdamW moments of 1/N of each parameter and updates that
// part; the ranks' parts joined make the same parameters as the unsharded ranks', bit for bit
// (the same summed gradients, and AdamW is elementwise), with and without a cap.
TEST_F(DataParallel, ShardedOptimizerStateMakesTheSameUpdatesFromAnNthOfTheState) {
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
  const Trained whole = train(llama(world_), rank, ranks);
  const Trained sharded = train(llama(world_, {}, buckets, true), rank, ranks);
  // A cap that evicts at 2 and 3 ranks (each holds 1/N of the moments and of the rows).
  const int64_t cap = (ranks == 2 ? 320 : 280) << 10;
  const Trained capped = train(llama(world_, {.cap = cap}, buckets, true), rank, ranks);
  EXPECT_GT(capped.evictions, 0) << "the cap evicts nothing: lower it";
  for (const Trained* r : {&sharded, &capped}) {
    EXPECT_EQ(r->losses, whole.losses);
    EXPECT_EQ(r->grad_norms, whole.grad_norms);
    EXPECT_EQ(r->params, whole.params);
  }
}

// A sharded run's checkpoint holds the whole state, the one the unsharded ranks save; resumed
// sharded at this world size, it continues as the unsharded run does.
TEST_F(DataParallel, ShardedOptimizerCheckpointsHoldTheWholeState) {
  const int rank = world_->rank(), ranks = world_->size();
  const int64_t buckets = int64_t{25} << 20;
  // The same folder on every rank: mpirun is their parent.
  const std::string dir = "/tmp/disc_zero1_" + std::to_string(::getppid());
  Trainer sharded = llama(world_, {}, buckets, true), whole = llama(world_);
  train(sharded, rank, ranks);
  train(whole, rank, ranks);
  sharded.save(dir + "/sharded");  // every rank: rank 0 writes
  if (rank == 0) whole.save(dir + "/whole");
  barrier();  // both written before anyone reads
  Trainer from_sharded = llama(nullptr), from_whole = llama(nullptr);
  from_sharded.load(dir + "/sharded");
  from_whole.load(dir + "/whole");
  for (const std::string& p : from_whole.parameter_names()) {
    for (const std::string& name : {p, p + ".m", p + ".v"}) {
      EXPECT_EQ(from_sharded.parameter(name).to_vector<float>(),
                from_whole.parameter(name).to_vector<float>())
          << name;
    }
  }
  Trainer resumed = llama(world_, {}, buckets, true);
  resumed.load(dir + "/sharded");
  const Trained after_resume = train(resumed, rank, ranks, kSteps);
  const Trained continued = train(whole, rank, ranks, kSteps);
  EXPECT_EQ(after_resume.losses, continued.losses);
  EXPECT_EQ(after_resume.params, continued.params);
  barrier();  // everyone has read them
  if (rank == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace disc::engine
