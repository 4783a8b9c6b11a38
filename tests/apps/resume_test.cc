// A run killed with SIGKILL mid-training and resumed with --resume gives the same loss at every
// step, bit for bit, as a run that was never interrupted.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_test_util.h"

namespace disc::apps {
namespace {

using testing::losses;
using testing::Scratch;

const char* kTinyRun = R"(model:
  hidden: 32
  layers: 1
  heads: 2
  kv_heads: 1
  ffn: 64
data:
  source: synthetic
  batch_size: 4
  synthetic:
    vocab: 16
    examples: 64
    min_len: 8
    max_len: 24
schedule:
  warmup_steps: 5
train:
  steps: 120
  seed: 3
logging:
  progress: none
checkpoint:
  every: 7
  keep: 2
)";

// Step records in a metrics file, whole or torn (each run also writes a start record).
size_t lines(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.find("\"step\":") != std::string::npos;
  return n;
}

std::vector<std::string> args_for(const std::string& cfg, const Scratch& s,
                                  const std::string& tag) {
  return {DISC_TRAIN,
          "run",
          "--config",
          cfg,
          "logging.metrics=" + s.path(tag + "/m.jsonl"),
          "checkpoint.dir=" + s.path(tag + "/ck")};
}

pid_t spawn(std::vector<std::string> args) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Resume, KilledRunResumesToTheSameLosses) {
  Scratch s;
  std::string cfg = s.write("run.yaml", kTinyRun);
  ASSERT_EQ(wait_for(spawn(args_for(cfg, s, "a"))), 0);

  pid_t pid = spawn(args_for(cfg, s, "b"));
  std::string metrics_b = s.path("b/m.jsonl");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (lines(metrics_b) < 30 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  size_t at_kill = lines(metrics_b);
  ASSERT_GE(at_kill, 30u);
  ASSERT_LT(at_kill, 120u) << "the run finished before it could be killed";

  auto resumed = args_for(cfg, s, "b");
  resumed.push_back("--resume");
  ASSERT_EQ(wait_for(spawn(resumed)), 0);
  auto a = losses(s.path("a/m.jsonl")), b = losses(metrics_b);
  ASSERT_EQ(a.size(), 120u);
  EXPECT_EQ(a, b);
  EXPECT_EQ(lines(metrics_b), 120u) << "steps after the checkpoint were not replaced";
}

}  // namespace
}  // namespace disc::apps
