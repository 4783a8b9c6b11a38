// `mpirun -np N disc-train run` against one process: the same losses within f32 rounding at every
// step, a resume at another world size that continues the run, rank 0 alone writing, and bad
// input refused on every rank.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

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

// mpirun as root (CI), more ranks than cores; under LeakSanitizer, Open MPI's own allocations
// kept to exit are not disc's leaks (tests/lsan_mpi.supp).
std::string on_ranks(int ranks) {
  return std::string(MPIEXEC) +
         " --allow-run-as-root --oversubscribe -x LSAN_OPTIONS=suppressions=" + DISC_TEST_DATA_DIR +
         "/lsan_mpi.supp:fast_unwind_on_malloc=0 -np " + std::to_string(ranks) + " ";
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

// Three ranks train with `three_args`, checkpointing at steps 6 and 12; two ranks (without those
// args) resume from step 6 (the newest once step 12's is gone) and finish the run. Both follow
// one process's losses, which one.jsonl in `s` holds.
void three_ranks_then_two_resumed(const Scratch& s, const std::string& three_args) {
  auto three = train(
      s, 3,
      three_args + "checkpoint.dir=" + s.path("ck") + " logging.metrics=" + s.path("three.jsonl"));
  ASSERT_EQ(three.code, 0) << three.out;
  ASSERT_TRUE(std::filesystem::exists(s.path("ck/step-00000006")));
  std::filesystem::remove_all(s.path("ck/step-00000012"));
  auto resumed = train(
      s, 2,
      "--resume checkpoint.dir=" + s.path("ck") + " logging.metrics=" + s.path("resumed.jsonl"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  expect_close(losses(s.path("three.jsonl")), losses(s.path("one.jsonl")), 1);
  expect_close(losses(s.path("resumed.jsonl")), losses(s.path("one.jsonl")), 7);
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

  three_ranks_then_two_resumed(s, "");
}

// ZeRO stage 1: three ranks that each keep a third of the optimizer state follow one process and
// checkpoint the whole state, from which two ranks without sharding resume.
TEST(DataParallelRun, ShardedOptimizerStateResumesUnshardedAtAnotherWorldSize) {
  Scratch s;
  s.write("run.yaml", kRanksRun);
  auto one = train(s, 1, "logging.metrics=" + s.path("one.jsonl"));
  ASSERT_EQ(one.code, 0) << one.out;
  three_ranks_then_two_resumed(s, "distributed.shard_optimizer=true ");
}

// A token budget makes batches of varying rows (some fewer than the ranks): the ranks still
// follow one process, with the optimizer state sharded too.
TEST(DataParallelRun, TokenBudgetBatchesFollowOneProcess) {
  Scratch s;
  s.write("run.yaml", kRanksRun);
  const std::string budget = "data.token_budget=40 ";
  auto one = train(s, 1, budget + "logging.metrics=" + s.path("one.jsonl"));
  ASSERT_EQ(one.code, 0) << one.out;
  auto three = train(s, 3, budget + "logging.metrics=" + s.path("three.jsonl"));
  ASSERT_EQ(three.code, 0) << three.out;
  expect_close(losses(s.path("three.jsonl")), losses(s.path("one.jsonl")), 1);
  auto sharded = train(
      s, 3, budget + "distributed.shard_optimizer=true logging.metrics=" + s.path("sharded.jsonl"));
  ASSERT_EQ(sharded.code, 0) << sharded.out;
  expect_close(losses(s.path("sharded.jsonl")), losses(s.path("one.jsonl")), 1);
}

// Gradient accumulation: two micro-batches of 6 step as one batch of their 12 rows, in one process,
// on two ranks, on three with the optimizer state sharded, and packed on two.
TEST(DataParallelRun, AccumulatedMicroBatchesFollowOneBatchOfTheirRows) {
  Scratch s;
  s.write("run.yaml", kRanksRun);
  auto one = train(s, 1, "data.batch_size=12 logging.metrics=" + s.path("one.jsonl"));
  ASSERT_EQ(one.code, 0) << one.out;
  const std::string micro = "data.batch_size=6 train.accumulate=2 ";
  auto acc = train(s, 1, micro + "logging.metrics=" + s.path("acc.jsonl"));
  ASSERT_EQ(acc.code, 0) << acc.out;
  expect_close(losses(s.path("acc.jsonl")), losses(s.path("one.jsonl")), 1);
  auto two = train(s, 2, micro + "logging.metrics=" + s.path("two.jsonl"));
  ASSERT_EQ(two.code, 0) << two.out;
  expect_close(losses(s.path("two.jsonl")), losses(s.path("one.jsonl")), 1);
  auto sharded = train(
      s, 3, micro + "distributed.shard_optimizer=true logging.metrics=" + s.path("sharded.jsonl"));
  ASSERT_EQ(sharded.code, 0) << sharded.out;
  expect_close(losses(s.path("sharded.jsonl")), losses(s.path("one.jsonl")), 1);
  auto packed = train(s, 2, micro + "data.packing=true logging.metrics=" + s.path("packed.jsonl"));
  ASSERT_EQ(packed.code, 0) << packed.out;
  expect_close(losses(s.path("packed.jsonl")), losses(s.path("one.jsonl")), 1);
}

// Packed: each rank packs its share of the step's examples (a token budget leaves some ranks
// without one), and the ranks follow one padded process over the same examples.
TEST(DataParallelRun, PackedRanksFollowOnePaddedProcess) {
  Scratch s;
  s.write("run.yaml", kRanksRun);
  auto one = train(s, 1, "logging.metrics=" + s.path("one.jsonl"));
  ASSERT_EQ(one.code, 0) << one.out;
  auto three = train(s, 3, "data.packing=true logging.metrics=" + s.path("three.jsonl"));
  ASSERT_EQ(three.code, 0) << three.out;
  expect_close(losses(s.path("three.jsonl")), losses(s.path("one.jsonl")), 1);
  const std::string budget = "data.packing=true data.token_budget=40 ";
  auto solo = train(s, 1, budget + "logging.metrics=" + s.path("solo.jsonl"));
  ASSERT_EQ(solo.code, 0) << solo.out;
  auto ranks = train(s, 3, budget + "logging.metrics=" + s.path("ranks.jsonl"));
  ASSERT_EQ(ranks.code, 0) << ranks.out;
  expect_close(losses(s.path("ranks.jsonl")), losses(s.path("solo.jsonl")), 1);
}

// The spans of a trace's collectives track (the communicator's thread), by name.
std::vector<std::string> collective_spans(const std::string& trace_path) {
  std::vector<std::string> names;
  const nlohmann::json trace = nlohmann::json::parse(std::ifstream(trace_path));
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["tid"] == 4) names.push_back(e["name"]);
  return names;
}

// Rank 0 traces its steps, and with distributed.trace_every_rank the other ranks too, beside
// it: each trace shows its rank's buckets on the communicator's thread. The summary says how much
// of the all-reduce the backward hid.
TEST(DataParallelRun, EveryRankTracesItsCollectivesWhenAsked) {
  Scratch s;
  s.write("run.yaml", kRanksRun);
  const std::string trace = "logging.trace=" + s.path("t/trace.json") +
                            " logging.trace_steps=[3] distributed.bucket_bytes=1 ";
  auto rank0 = train(s, 2, trace);
  ASSERT_EQ(rank0.code, 0) << rank0.out;
  EXPECT_NE(rank0.out.find("% of it hidden behind compute"), std::string::npos) << rank0.out;
  EXPECT_FALSE(std::filesystem::exists(s.path("t/trace.rank1.json")));
  auto every = train(s, 2, trace + "distributed.trace_every_rank=true");
  ASSERT_EQ(every.code, 0) << every.out;
  for (const char* name : {"t/trace.json", "t/trace.rank1.json"}) {
    const std::vector<std::string> spans = collective_spans(s.path(name));
    // The loss's and one a parameter (a bucket each) of this llama's 12.
    EXPECT_EQ(spans.size(), 13u) << name;
    for (const std::string& span : spans) EXPECT_EQ(span.rfind("all_reduce", 0), 0u) << span;
  }
}

// The held-out loss under mpirun: the ranks share the eval batches and join the sums, so the figure
// is one process's within the ranks' rounding.
TEST(DataParallelRun, RanksShareTheHeldOutLossAndGetOneProcesssFigure) {
  Scratch s;
  s.write("run.yaml", kRanksRun);
  std::string records = "[";
  for (int i = 0; i < 23; ++i)
    records +=
        std::string(i ? "," : "") + "{\"text\": \"" + std::string(3 + i % 11, 'a' + i % 7) + "\"}";
  s.write("held.json", records + "]");
  s.write("train.json", records + "]");
  const std::string args = "data.source=json data.fields=[text] data.path=" + s.path("train.json") +
                           " eval.path=" + s.path("held.json") + " eval.every=4 ";
  std::map<int, std::map<int64_t, double>> evals;
  for (int ranks : {1, 2}) {
    const std::string metrics = s.path("m" + std::to_string(ranks) + ".jsonl");
    auto r = train(s, ranks, args + "logging.metrics=" + metrics);
    ASSERT_EQ(r.code, 0) << r.out;
    std::ifstream in(metrics);
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line);
      if (j.contains("eval_loss")) evals[ranks][j["step"].get<int64_t>()] = j["eval_loss"];
    }
  }
  ASSERT_EQ(evals[1].size(), 3u);  // steps 4, 8, 12
  ASSERT_EQ(evals[2].size(), 3u);
  for (const auto& [step, loss] : evals[1])
    EXPECT_NEAR(evals[2][step], loss, 1e-5 * loss) << "step " << step;
}

TEST(DataParallelRun, ABatchTheRanksCannotShareEquallyIsRefusedBeforeAnythingIsWritten) {
  Scratch s;
  s.write("run.yaml", kRanksRun);
  auto r = train(
      s, 4,
      "data.batch_size=6 checkpoint.dir=" + s.path("ck") + " logging.metrics=" + s.path("m.jsonl"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("data.batch_size 6 is not a multiple of the 4 ranks"), std::string::npos)
      << r.out;
  EXPECT_EQ(s.entries(), 1u);  // run.yaml alone
  // validate says so too (it said `config OK` once per rank), and says OK once to what run takes.
  const std::string validate =
      on_ranks(3) + DISC_TRAIN + " validate --config " + s.path("run.yaml");
  auto v = run_command(validate + " data.batch_size=4");
  EXPECT_EQ(v.code, 2) << v.out;
  EXPECT_NE(v.out.find("data.batch_size 4 is not a multiple of the 3 ranks"), std::string::npos)
      << v.out;
  EXPECT_EQ(v.out.find("config OK"), std::string::npos) << v.out;
  v = run_command(validate + " data.batch_size=6");
  EXPECT_EQ(v.code, 0) << v.out;
  EXPECT_EQ(v.out.find("config OK"), v.out.rfind("config OK")) << v.out;
  EXPECT_NE(v.out.find("(each of 3 ranks)"), std::string::npos) << v.out;
  // An int8 optimizer state cannot be sharded (its scales are per block of each rank's part).
  v = run_command(validate +
                  " data.batch_size=6 distributed.shard_optimizer=true optimizer.state_dtype=int8");
  EXPECT_EQ(v.code, 2) << v.out;
  EXPECT_NE(v.out.find("distributed.shard_optimizer cannot shard an int8 optimizer state"),
            std::string::npos)
      << v.out;
}

// The processes whose parent is `parent` (mpirun's ranks), from /proc.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string pid, comm, state;
    pid_t ppid = 0;
    if (stat >> pid >> comm >> state >> ppid && ppid == parent) out.push_back(std::stoi(pid));
  }
  return out;
}

// The rank of a process that mpirun started (OMPI_COMM_WORLD_RANK in its environment).
std::string rank_of(pid_t pid) {
  std::ifstream environ("/proc/" + std::to_string(pid) + "/environ");
  const std::string key = "OMPI_COMM_WORLD_RANK=";
  for (std::string var; std::getline(environ, var, '\0');)
    if (var.rfind(key, 0) == 0) return var.substr(key.size());
  ADD_FAILURE() << "process " << pid << " has no " << key;
  return "";
}

// A long run of `disc-train run` on 2 ranks with `args`, its output to out.txt in `s`: started
// (mpirun's pid, the shell exec'ed away) and some steps in, both ranks running.
pid_t start_long_run(const Scratch& s, const std::string& args) {
  const std::string command = "exec " + on_ranks(2) + DISC_TRAIN + " run --config " +
                              s.path("run.yaml") +
                              " train.steps=100000 logging.metrics=" + s.path("m.jsonl") + " " +
                              args + " > " + s.path("out.txt") + " 2>&1";
  const pid_t mpirun = ::fork();
  if (mpirun == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while ((!std::filesystem::exists(s.path("m.jsonl")) || children_of(mpirun).size() < 2) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  return mpirun;
}

// Waits for `pid`; its exit code (-1: a signal ended it).
int exit_code(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// How a long run on 2 ranks ended after one rank got `signal`.
struct Ended {
  std::string signalled, other;  // the ranks
  int code = 0;                  // mpirun's
  double seconds = 0;            // from the signal to mpirun's end
  std::string out;
};

Ended signal_a_rank(const Scratch& s, const std::string& args, int signal) {
  Ended e;
  const pid_t mpirun = start_long_run(s, args);
  const std::vector<pid_t> ranks = children_of(mpirun);
  EXPECT_EQ(ranks.size(), 2u);
  e.signalled = rank_of(ranks.back()), e.other = rank_of(ranks.front());
  EXPECT_EQ(::kill(ranks.back(), signal), 0);
  const auto at = std::chrono::steady_clock::now();
  e.code = exit_code(mpirun);
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - at).count();
  e.out = read_all(s.path("out.txt"));
  return e;
}

// A rank stopped mid-run (SIGSTOP: alive, silent, what a hang looks like to the others): the
// others' next collective gives up after distributed.timeout and every rank ends, exit code 3,
// with a line naming the waiting rank and the one it waited for.
TEST(DataParallelRun, AHungRankEndsEveryRankAfterTheTimeout) {
  Scratch s;
  s.write("run.yaml", kRanksRun);
  const Ended e = signal_a_rank(s, "distributed.timeout=2", SIGSTOP);
  EXPECT_EQ(e.code, 3) << e.out;
  EXPECT_LT(e.seconds, 30) << e.out;
  EXPECT_NE(e.out.find("disc: rank " + e.other + " of 2 waited"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("for the other ranks: rank " + e.signalled +
                       " did not answer within 2 s (stopped, hung inside MPI, or gone)"),
            std::string::npos)
      << e.out;
}

// A rank killed mid-run (SIGKILL: no handler runs) ends the others: mpirun sees it exit and ends
// the job within seconds, naming the rank, with a failing exit code.
TEST(DataParallelRun, AKilledRankEndsEveryRank) {
  Scratch s;
  s.write("run.yaml", kRanksRun);
  const Ended e = signal_a_rank(s, "", SIGKILL);
  EXPECT_NE(e.code, 0) << e.out;
  EXPECT_LT(e.seconds, 30) << e.out;
  EXPECT_NE(e.out.find("rank " + e.signalled), std::string::npos) << e.out;
}

// SIGTERM to mpirun reaches every rank: they stop after the same step, rank 0 checkpoints it and
// says so once.
TEST(DataParallelRun, ASignalStopsEveryRankAfterTheSameStep) {
  Scratch s;
  s.write("run.yaml", kRanksRun);
  const pid_t mpirun =
      start_long_run(s, "checkpoint.dir=" + s.path("ck") + " checkpoint.every=100000");
  ASSERT_EQ(::kill(mpirun, SIGTERM), 0);
  exit_code(mpirun);
  const std::string out = read_all(s.path("out.txt"));
  const size_t at = out.find("SIGTERM: stopped after step ");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_EQ(out.find("stopped after step", at + 28), std::string::npos) << "said twice:\n" << out;
  const int64_t step = std::stoll(out.substr(at + 28));
  char folder[32];
  std::snprintf(folder, sizeof folder, "ck/step-%08lld", static_cast<long long>(step));
  EXPECT_TRUE(std::filesystem::exists(s.path(folder))) << out;
}

}  // namespace
}  // namespace disc::apps
