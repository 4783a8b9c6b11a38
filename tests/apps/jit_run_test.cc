// disc-train with the JIT (jit.fusion, on by default): the metrics count the kernels each step
// compiled, a second run with the same jit.cache_dir loads every kernel from the disk cache and
// compiles none, and both runs give the same losses bit for bit.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace disc::apps {
namespace {

using testing::Scratch;

const char* kRun = R"(model:
  hidden: 32
  layers: 1
  heads: 2
  kv_heads: 1
  ffn: 64
data:
  batch_size: 4
  synthetic:
    vocab: 16
    examples: 64
    min_len: 8
    max_len: 40
train:
  steps: 12
  seed: 3
logging:
  progress: none
)";

struct Counts {
  int64_t compiles = 0, cache_loads = 0, fused_kernels = 0;
};

Counts counts(const std::string& metrics) {
  Counts c;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (!j.contains("step")) continue;  // a run's start record
    c.compiles += j["compiles"].get<int64_t>();
    c.cache_loads += j["kernel_cache_loads"].get<int64_t>();
    c.fused_kernels += j["fused_kernels"].get<int64_t>();
  }
  return c;
}

std::string run(const Scratch& s, const std::string& tag, const std::string& args = "") {
  return std::string(DISC_TRAIN) + " run --config " + s.path("run.yaml") +
         " logging.metrics=" + s.path(tag + ".jsonl") + " checkpoint.dir=" + s.path(tag) +
         " jit.cache_dir=" + s.path("kernels") + " " + args;
}

TEST(JitRun, ASecondRunLoadsEveryKernelFromTheDiskCacheAndGivesTheSameLosses) {
  Scratch s;
  s.write("run.yaml", kRun);
  auto first = testing::run_command(run(s, "first"));
  ASSERT_EQ(first.code, 0) << first.out;
  auto second = testing::run_command(run(s, "second"));
  ASSERT_EQ(second.code, 0) << second.out;
  const Counts a = counts(s.path("first.jsonl")), b = counts(s.path("second.jsonl"));
  EXPECT_GT(a.compiles, 0);
  EXPECT_EQ(a.cache_loads, 0);
  EXPECT_GT(a.fused_kernels, 2 * a.compiles)
      << "kernels are compiled per step, not reused across steps";
  EXPECT_EQ(b.compiles, 0);
  EXPECT_EQ(b.cache_loads, a.compiles);
  EXPECT_EQ(b.fused_kernels, a.fused_kernels);
  EXPECT_EQ(testing::losses(s.path("second.jsonl")), testing::losses(s.path("first.jsonl")));
  EXPECT_NE(first.out.find("compiles " + std::to_string(a.compiles)), std::string::npos)
      << first.out;
}

TEST(JitRun, FusionOffCompilesNothing) {
  Scratch s;
  s.write("run.yaml", kRun);
  auto r = testing::run_command(run(s, "off", "jit.fusion=false"));
  ASSERT_EQ(r.code, 0) << r.out;
  const Counts c = counts(s.path("off.jsonl"));
  EXPECT_EQ(c.compiles, 0);
  EXPECT_EQ(c.fused_kernels, 0);
}

}  // namespace
}  // namespace disc::apps
