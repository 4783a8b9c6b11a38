// `mpirun -np N disc-train run` against one process: the same losses within f32 rounding at every
// step, a resume at another world size that continues the run, rank 0 alone writing, and bad
// input refused on every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include "cli_test_util.h"

namespace disc::apps {
namespace {

using testing::losses;
using testing::run_command;
using testing::Scratch;

const char* kRanksRun = R"(model:
  hidden: 16
  layers: 1
  heads: 2
  kv_heads: 1
  ffn: 32
data:
  batch_size: 6
  synthetic:
    vocab: 16
    examples: 60
    min_len: 4
    max_len: 20
schedule:
  warmup_steps: 2
train:
  steps: 12
  seed: 5
device:
  threads: 1
logging:
  progress: none
checkpoint:
  every: 6
)";

std::string on_ranks(int ranks) {
  return std::string(MPIEXEC) + " --allow-run-as-root --oversubscribe -np " +
         std::to_string(ranks) + " ";
}

// `disc-train run` on `ranks` ranks (1: no mpirun) with the test's config and `args`.
testing::Result train(const Scratch& s, int ranks, const std::string& args) {
  return run_command((ranks > 1 ? on_ranks(ranks) : "") + DISC_TRAIN + " run --config " +
                     s.path("run.yaml") + " " + args);
}

// Steps `from` to 12 within relative 1e-5: the ranks sum losses and gradients in another order
// than one process.
void expect_close(const std::map<int64_t, std::string>& got,
                  const std::map<int64_t, std::string>& want, int64_t from) {
  for (int64_t step = from; step <= 12; ++step) {
    ASSERT_TRUE(got.contains(step) && want.contains(step)) << "step " << step;
    const double a = std::stod(got.at(step)), b = std::stod(want.at(step));
    EXPECT_NEAR(a, b, 1e-5 * std::fabs(b)) << "step " << step;
  }
}

TEST(DataParallelRun, RanksFollowOneProcessAndResumeAtAnotherWorldSize) {
  Scratch s;
  s.write("run.yaml", kRanksRun);
  auto one = train(s, 1, "logging.metrics=" + s.path("one.jsonl"));
  ASSERT_EQ(one.code, 0) << one.out;
  auto two = train(s, 2, "logging.metrics=" + s.path("two.jsonl"));
  ASSERT_EQ(two.code, 0) << two.out;
  EXPECT_NE(two.out.find("data parallel: 2 ranks"), std::string::npos) << two.out;
  ASSERT_EQ(losses(s.path("two.jsonl")).size(), 12u);
  expect_close(losses(s.path("two.jsonl")), losses(s.path("one.jsonl")), 1);

  // Three ranks train, checkpointing at steps 6 and 12; two ranks resume from step 6 (the newest
  // once step 12's is gone) and finish the run.
  auto three = train(s, 3,
                     "checkpoint.dir=" + s.path("ck") + " logging.metrics=" + s.path("three.jsonl"));
  ASSERT_EQ(three.code, 0) << three.out;
  ASSERT_TRUE(std::filesystem::exists(s.path("ck/step-00000006")));
  std::filesystem::remove_all(s.path("ck/step-00000012"));
  auto resumed = train(s, 2,
                       "--resume checkpoint.dir=" + s.path("ck") +
                           " logging.metrics=" + s.path("resumed.jsonl"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  expect_close(losses(s.path("three.jsonl")), losses(s.path("one.jsonl")), 1);
  expect_close(losses(s.path("resumed.jsonl")), losses(s.path("one.jsonl")), 7);
}

// A token budget makes batches of varying rows (some fewer than the ranks): the ranks still
// follow one process.
TEST(DataParallelRun, TokenBudgetBatchesFollowOneProcess) {
  Scratch s;
  s.write("run.yaml", kRanksRun);
  const std::string budget = "data.token_budget=40 ";
  auto one = train(s, 1, budget + "logging.metrics=" + s.path("one.jsonl"));
  ASSERT_EQ(one.code, 0) << one.out;
  auto three = train(s, 3, budget + "logging.metrics=" + s.path("three.jsonl"));
  ASSERT_EQ(three.code, 0) << three.out;
  expect_close(losses(s.path("three.jsonl")), losses(s.path("one.jsonl")), 1);
}

TEST(DataParallelRun, ABatchTheRanksCannotShareEquallyIsRefusedBeforeAnythingIsWritten) {
  Scratch s;
  s.write("run.yaml", kRanksRun);
  auto r = train(s, 4, "data.batch_size=6 checkpoint.dir=" + s.path("ck") +
                           " logging.metrics=" + s.path("m.jsonl"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("data.batch_size 6 is not a multiple of the 4 ranks"), std::string::npos)
      << r.out;
  EXPECT_EQ(s.entries(), 1u);  // run.yaml alone
}

}  // namespace
}  // namespace disc::apps
