// memory.svg draws the lower bound a cap could reach: for an uncapped run too, where the governor
// has no eviction candidates and its own plan's bound is the peak.
#include "engine/memory_report.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/bytes.h"
#include "engine/trainer.h"
#include "ir/models/model.h"

namespace disc::engine {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(MemoryReport, AnUncappedRunDrawsTheBoundACapCouldReachNotItsPeak) {
  ir::models::LlamaConfig c;
  c.vocab = 64, c.max_batch = 8, c.max_seq = 64;
  TrainerOptions uncapped;
  uncapped.threads = 1;
  Trainer t(ir::models::build_llama(c), uncapped);
  const ir::Bindings b = {{"B", 4}, {"S", 48}};
  const int64_t held = t.bytes_held_for(b);
  TrainerOptions capped_options = uncapped;
  capped_options.memory.cap = int64_t{1} << 40;
  Trainer capped(ir::models::build_llama(c), capped_options);
  const memory::MemoryPlan& plan = capped.governor().plan(b, held);
  ASSERT_LT(plan.lower_bound, plan.unplanned_peak) << "nothing to evict: the test shows nothing";

  const std::string path = (std::filesystem::temp_directory_path() /
                            ("disc-memory-report-" + std::to_string(::getpid()) + ".svg"))
                               .string();
  write_memory_report(path, t.step_graph(), t.governor(), b, held);
  const std::string svg = read(path);
  std::filesystem::remove(path);
  EXPECT_NE(svg.find("lower bound " + human_bytes(plan.lower_bound) + "<"), std::string::npos)
      << svg;
}

}  // namespace
}  // namespace disc::engine
