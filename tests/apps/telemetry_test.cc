// What a run records about itself: a start record (version, commit, device, config hash), a time on
// every record, each step's exact shape and its JIT bucket; a trace whose tracks are named, whose
// fused kernels are named after their ops, with step and compile spans.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "base/version.h"
#include "cli_test_util.h"

namespace disc::apps {
namespace {

using testing::Scratch;

std::vector<nlohmann::json> records(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(Telemetry, MetricsStartWithTheRunAndTimeEveryStep) {
  Scratch s;
  auto r = testing::run_command(std::string(DISC_TRAIN) +
                                " run train.steps=3 model.hidden=32 data.synthetic.max_len=40 "
                                "jit.buckets=[16] logging.progress=none logging.metrics=" +
                                s.path("m.jsonl"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto m = records(s.path("m.jsonl"));
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0]["event"], "start");
  EXPECT_EQ(m[0]["version"], version());
  EXPECT_EQ(m[0]["commit"], commit());
  EXPECT_EQ(m[0]["device"], "cpu");
  EXPECT_EQ(m[0]["config_hash"].get<std::string>().size(), 16u);
  double last = m[0]["time"].get<double>();
  EXPECT_GT(last, 1.7e9);  // seconds since 1970, not since the run began
  for (size_t i = 1; i < m.size(); ++i) {
    EXPECT_GE(m[i]["time"].get<double>(), last);
    last = m[i]["time"].get<double>();
    const std::string shape = m[i]["shape"], bucket = m[i]["bucket"];
    std::smatch b, sh;
    ASSERT_TRUE(std::regex_match(shape, sh, std::regex("B=8,S=([0-9]+)"))) << shape;
    const int64_t seq = std::stoll(sh[1]);
    EXPECT_EQ(seq, m[i]["seq"].get<int64_t>());
    // jit.buckets [16]: S <= 16 is 1..16 (or static below 3), anything longer 17..max.
    EXPECT_EQ(bucket, "B=1..16," + std::string(seq > 16 ? "S=17..max" : "S=1..16")) << bucket;
  }
}

TEST(Telemetry, TraceTracksAndSpansSayWhatRan) {
  Scratch s;
  auto r = testing::run_command(std::string(DISC_TRAIN) +
                                " run train.steps=2 model.hidden=32 data.synthetic.max_len=40 "
                                "jit.cache_dir='' logging.trace_steps=[1] logging.progress=none "
                                "logging.trace=" +
                                s.path("t.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream in(s.path("t.json"));
  auto events = nlohmann::json::parse(in)["traceEvents"];
  std::map<int, std::string> tracks;
  int fused = 0, bare = 0;
  bool step = false, compile = false;
  for (const auto& e : events) {
    const std::string name = e["name"];
    if (e["ph"] == "M") tracks[e["tid"].get<int>()] = e["args"]["name"];
    if (e.value("tid", 0) == 1) fused += name.rfind("fused: ", 0) == 0, bare += name == "fused";
    step |= name == "step 1";
    compile |= name.rfind("compile ", 0) == 0 && name.ends_with(" kernels");
  }
  EXPECT_EQ(tracks.size(), 3u);
  EXPECT_EQ(tracks[1], "nodes");
  EXPECT_GT(fused, 0);
  EXPECT_EQ(bare, 0) << "a fused span without its ops";
  EXPECT_TRUE(step);
  EXPECT_TRUE(compile) << "the first step compiles its kernels";
}

}  // namespace
}  // namespace disc::apps
