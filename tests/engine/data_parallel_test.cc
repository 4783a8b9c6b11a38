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
