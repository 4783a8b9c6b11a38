// disc-train loses nothing and trains nothing wrong: a damaged checkpoint is skipped for the newest
// one that verifies and pruning never deletes that one; a diverged run stops without saving; two
// runs cannot share a checkpoint folder; an output that is an input or another output, or that
// cannot be written, is refused before training; a failed write stops the run at once; a signal
// finishes the step and saves; a resume that would not continue the same run is refused.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "checkpoints.h"
#include "cli_test_util.h"

namespace disc::apps {
namespace {

namespace fs = std::filesystem;
using testing::kTinyCheckpointed;
using testing::losses;
using testing::run_with_config;
using testing::Scratch;

// Flips one bit in the last tensor's data: the file still parses, only its checksum can tell.
void flip_a_bit(const std::string& path) {
  const auto size = fs::file_size(path);
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(size) - 3);
  char c = static_cast<char>(f.get());
  f.seekp(static_cast<std::streamoff>(size) - 3);
  f.put(static_cast<char>(c ^ 0x10));
}

bool every_line_is_json(const std::string& path) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!nlohmann::json::accept(line)) return false;
  }
  return true;
}

TEST(RunSafety, ResumeSkipsACheckpointWithAFlippedBitAndKeepsTheOneItResumedFrom) {
  Scratch s;
  s.write("run.yaml", kTinyCheckpointed);
  const std::string ck = " checkpoint.dir=" + s.path("ck");
  auto whole = testing::run_command(
      run_with_config(s, "train.steps=3 logging.metrics=" + s.path("w.jsonl")));
  ASSERT_EQ(whole.code, 0) << whole.out;
  auto first = testing::run_command(run_with_config(s, "train.steps=6" + ck));
  ASSERT_EQ(first.code, 0) << first.out;
  flip_a_bit(s.path("ck/step-00000004/state.safetensors"));
  flip_a_bit(s.path("ck/step-00000006/state.safetensors"));
  // keep=2 with the two damaged checkpoints newest: pruning by count alone would delete step 2
  // (resumed from) and step 3 (just written), leaving only checkpoints that cannot be read.
  auto resumed = testing::run_command(run_with_config(
      s, "--resume train.steps=3 checkpoint.keep=2 logging.metrics=" + s.path("r.jsonl") + ck));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("skipping checkpoint " + s.path("ck/step-00000006") + ": " +
                             s.path("ck/step-00000006/state.safetensors") + ": tensor `"),
            std::string::npos)
      << resumed.out;
  EXPECT_NE(resumed.out.find("fails its checksum"), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("resumed from " + s.path("ck/step-00000002")), std::string::npos)
      << resumed.out;
  EXPECT_TRUE(fs::exists(s.path("ck/step-00000003"))) << "pruning deleted the good checkpoint";
  EXPECT_EQ(losses(s.path("r.jsonl")).at(3), losses(s.path("w.jsonl")).at(3));
}

TEST(RunSafety, ResumeSkipsACheckpointWhoseStepDisagreesWithItsFolder) {
  Scratch s;
  s.write("run.yaml", kTinyCheckpointed);
  const std::string ck = " checkpoint.dir=" + s.path("ck");
  ASSERT_EQ(testing::run_command(run_with_config(s, "train.steps=4" + ck)).code, 0);
  fs::remove_all(s.path("ck/step-00000004"));
  fs::copy(s.path("ck/step-00000002"), s.path("ck/step-00000004"));
  auto r = testing::run_command(run_with_config(s, "--resume train.steps=4" + ck));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("trainer.json says step 2, its folder's name another"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("resumed from " + s.path("ck/step-00000002") + " at step 2"),
            std::string::npos)
      << r.out;
}

// SGD at learning rate 100 with an L2 weight decay of 10 multiplies every weight by about -999 a
// step, so the weights overflow within a few steps whatever the gradients are.
TEST(RunSafety, ADivergedRunStopsWithoutSavingItsState) {
  Scratch s;
  auto r = testing::run_command(
      std::string(DISC_TRAIN) +
      " run train.steps=30 logging.progress=none model.init_std=10 optimizer.name=sgd "
      "optimizer.weight_decay=10 schedule.lr=100 schedule.warmup_steps=0 optimizer.clip_norm=0 "
      "checkpoint.every=1 "
      "checkpoint.keep=100 checkpoint.dir=" +
      s.path("ck") + " logging.metrics=" + s.path("m.jsonl"));
  EXPECT_EQ(r.code, 4) << r.out;  // not 1, which mpirun gives for a job stopped by a signal
  auto m = losses(s.path("m.jsonl"));
  ASSERT_FALSE(m.empty());
  const int64_t bad = m.rbegin()->first;
  EXPECT_LT(bad, 30) << "the run went on after a step that was not finite";
  EXPECT_NE(r.out.find("training diverged at step " + std::to_string(bad)), std::string::npos)
      << r.out;
  const auto saved = complete_checkpoints(s.path("ck"));
  ASSERT_FALSE(saved.empty());
  EXPECT_EQ(saved.back(), checkpoint_path(s.path("ck"), bad - 1));
}

pid_t spawn(const std::string& command) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), nullptr);
    ::_exit(127);
  }
  return pid;
}

// Waits until `path` has at least `n` lines (a background run got that far).
void wait_for_lines(const std::string& path, size_t n) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  auto count = [&] {
    std::ifstream in(path);
    return static_cast<size_t>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
  };
  while (count() < n && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_GE(count(), n) << path;
}

TEST(RunSafety, ASecondRunOnTheSameCheckpointDirIsRefusedAndASignalSavesTheFirst) {
  Scratch s;
  s.write("run.yaml", kTinyCheckpointed);
  const std::string out = " logging.trace=" + s.path("out/t.json") +
                          " logging.trace_steps=[2] logging.metrics=" + s.path("out/m.jsonl") +
                          " checkpoint.dir=" + s.path("ck");
  pid_t first = spawn(run_with_config(s, "train.steps=100000 checkpoint.every=1000" + out));
  wait_for_lines(s.path("out/m.jsonl"), 3);
  EXPECT_TRUE(fs::exists(s.path("out/t.json"))) << "the trace waits for the end of the run";
  auto second =
      testing::run_command(run_with_config(s, "train.steps=4 checkpoint.dir=" + s.path("ck")));
  EXPECT_EQ(second.code, 2) << second.out;
  EXPECT_NE(second.out.find("checkpoint.dir " + s.path("ck") + " is in use by another run (pid " +
                            std::to_string(first) + ")"),
            std::string::npos)
      << second.out;

  ::kill(first, SIGTERM);
  int status = 0;
  ::waitpid(first, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "SIGTERM killed the run before it could save";
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  const int64_t last = losses(s.path("out/m.jsonl")).rbegin()->first;
  EXPECT_EQ(complete_checkpoints(s.path("ck")),
            std::vector<std::string>{checkpoint_path(s.path("ck"), last)});
  EXPECT_TRUE(fs::exists(s.path("out/memory.svg")));
  std::ifstream trace(s.path("out/t.json"));
  EXPECT_TRUE(nlohmann::json::accept(trace));

  // The lock went with the process: the next run in the folder continues where it stopped.
  auto resumed = testing::run_command(run_with_config(
      s, "--resume train.steps=" + std::to_string(last + 1) + " checkpoint.dir=" + s.path("ck")));
  EXPECT_EQ(resumed.code, 0) << resumed.out;
}

TEST(RunSafety, AnOutputThatIsAnInputOrAnotherOutputIsRefused) {
  Scratch s;
  const std::string cfg = s.write("run.yaml", kTinyCheckpointed);
  const std::string data = s.write("data.jsonl", "{\"text\": \"hello\"}\n");
  const std::string metrics = s.path("m.jsonl");
  const std::string cases[][2] = {
      {"logging.metrics=" + cfg, "logging.metrics is " + cfg + ", which is also the config file"},
      {"data.source=jsonl data.fields=[text] data.path=" + data + " logging.trace=" + data,
       "logging.trace is " + data + ", which is also data.path"},
      {"logging.metrics=" + metrics + " logging.trace=" + s.path("./m.jsonl"),
       "logging.trace is " + s.path("./m.jsonl") + ", which is also logging.metrics"},
      {"logging.metrics=" + s.path("memory.svg"), "the memory report beside logging.metrics is " +
                                                      s.path("memory.svg") +
                                                      ", which is also logging.metrics"}};
  for (const auto& [args, message] : cases) {
    size_t before = s.entries();
    auto r = testing::run_command(run_with_config(s, "train.steps=2 " + args));
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << r.out;
    EXPECT_EQ(s.entries(), before) << args;
  }
  std::ifstream in(cfg);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), kTinyCheckpointed);
}

// As root every permission check passes, so only trying tells: /proc takes no new files.
TEST(RunSafety, ValidateRefusesACheckpointDirThatCannotBeCreated) {
  auto r = testing::run_command(std::string(DISC_TRAIN) + " validate checkpoint.dir=/proc/disc-ck");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("checkpoint.dir is /proc/disc-ck, which cannot be written: nothing can be "
                       "created in /proc"),
            std::string::npos)
      << r.out;
}

// A full disk, as a file size limit: the first metrics line that does not fit stops the run with
// the path and the reason, and leaves no torn line. (No kernel cache: its files would hit the
// limit first.)
TEST(RunSafety, AFailedMetricsWriteStopsTheRunAtOnce) {
  Scratch s;
  s.write("run.yaml", kTinyCheckpointed);
  auto r = testing::run_command(
      "ulimit -f 4 && trap '' XFSZ && " +
      run_with_config(s, "train.steps=200 jit.cache_dir='' logging.metrics=" + s.path("m.jsonl")));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cannot write metrics file " + s.path("m.jsonl") + ": File too large"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("done:"), std::string::npos) << "the run went on: " << r.out;
  EXPECT_TRUE(every_line_is_json(s.path("m.jsonl")));
  EXPECT_LT(losses(s.path("m.jsonl")).size(), 200u);
}

TEST(RunSafety, AResumeThatChangesTheNumbersIsRefusedNamingTheKey) {
  Scratch s;
  s.write("run.yaml", kTinyCheckpointed);
  const std::string ck = " checkpoint.dir=" + s.path("ck");
  ASSERT_EQ(testing::run_command(run_with_config(s, "train.steps=2" + ck)).code, 0);
  const std::pair<std::string, std::string> changes[] = {
      {"train.seed=6", "train.seed was 5, is 6"},
      {"data.batch_size=3", "data.batch_size was 4, is 3"},
      {"schedule.lr=0.001", "schedule.lr was 0.003, is 0.001"},
      {"data.synthetic.examples=33", "the examples were 32 examples"}};
  for (const auto& [change, message] : changes) {
    auto r = testing::run_command(run_with_config(s, "--resume train.steps=4 " + change + ck));
    EXPECT_EQ(r.code, 2) << change << ": " << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--allow-changes"), std::string::npos) << r.out;
  }
  EXPECT_EQ(complete_checkpoints(s.path("ck")).size(), 1u) << "a refused resume wrote";
  auto harmless = testing::run_command(
      run_with_config(s, "--resume train.steps=3 memory.cap=1GiB optimizer.clip_passes=2" + ck));
  EXPECT_EQ(harmless.code, 0) << harmless.out;
  EXPECT_NE(harmless.out.find("with a change: train.steps was 2, is 3"), std::string::npos)
      << harmless.out;
  auto allowed = testing::run_command(
      run_with_config(s, "--resume --allow-changes train.steps=4 train.seed=6" + ck));
  EXPECT_EQ(allowed.code, 0) << allowed.out;
}

}  // namespace
}  // namespace disc::apps
