// The compile pipeline's progress report: quiet for a fast compile, a line per stage once a
// compile has run past its threshold (a 100k-node graph used to compile for minutes in silence).
#include "engine/pipeline.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "ir/models/model.h"

namespace disc::engine {
namespace {

std::vector<CompileProgress> compile_mlp(double after_ms, std::vector<StageRun>* runs = nullptr) {
  TrainerOptions options;
  options.jit = true;  // the fusion stage runs too
  Pipeline p(options);
  std::vector<CompileProgress> seen;
  p.progress([&](const CompileProgress& e) { seen.push_back(e); }, after_ms);
  p.run(ir::models::build_mlp({}));
  if (runs) *runs = p.runs();
  return seen;
}

// A threshold of 0 stands for a compile that is slow from its start: every stage that runs is
// reported as it starts and as it ends, in order, with its place and the graph's size.
TEST(PipelineProgress, EveryStageIsReportedOnceTheCompileIsPastTheThreshold) {
  std::vector<StageRun> runs;
  const std::vector<CompileProgress> seen = compile_mlp(0, &runs);
  std::vector<StageRun> ran;
  for (const StageRun& r : runs)
    if (!r.skipped) ran.push_back(r);
  ASSERT_EQ(seen.size(), 2 * ran.size());
  const int count = static_cast<int>(Pipeline::stage_descriptions().size());
  for (size_t i = 0; i < ran.size(); ++i) {
    const CompileProgress& start = seen[2 * i];
    const CompileProgress& done = seen[2 * i + 1];
    EXPECT_EQ(start.stage, ran[i].stage);
    EXPECT_FALSE(start.done);
    EXPECT_EQ(done.stage, ran[i].stage);
    EXPECT_TRUE(done.done);
    EXPECT_EQ(start.count, count);
    EXPECT_EQ(done.nodes, ran[i].nodes) << ran[i].stage;
    EXPECT_LE(start.elapsed_ms, done.elapsed_ms);
  }
  EXPECT_EQ(seen.front().stage, "loss");
  EXPECT_EQ(seen.front().index, 1);
  EXPECT_EQ(seen.back().stage, "remat");
  EXPECT_EQ(seen.back().index, count);
}

TEST(PipelineProgress, AFastCompileSaysNothing) {
  EXPECT_TRUE(compile_mlp(/*after_ms=*/3.6e6).empty());  // an hour
}

TEST(PipelineProgress, TheLineNamesTheStageItsPlaceTheNodesAndTheTime) {
  CompileProgress p{
      .stage = "fusion", .index = 11, .count = 13, .nodes = 100012, .elapsed_ms = 1440};
  EXPECT_EQ(progress_line(p), "compile: fusion (11/13) on 100012 nodes, 1.4 s in");
  p.done = true;
  EXPECT_EQ(progress_line(p), "compile: fusion (11/13) done, 100012 nodes, 1.4 s in");
}

}  // namespace
}  // namespace disc::engine

namespace disc::engine {
namespace {

// disc-opt --passes: the stages named, in their order; none that changes the unfused graph
// after fusion (the fused step would not see it), and no name that is no stage.
TEST(PipelineOnly, RunsTheNamedStagesAndRefusesGraphChangesAfterFusion) {
  Pipeline p(TrainerOptions{});
  p.only({"verify", "dce", "fusion", "schedule"});
  ir::models::Model m = ir::models::build_mlp({});
  m.graph->add_output("loss", m.loss);
  const CompiledStep step = p.run(std::move(m));
  std::vector<std::string> ran;
  for (const StageRun& r : p.runs()) ran.push_back(r.stage);
  EXPECT_EQ(ran, (std::vector<std::string>{"verify", "dce", "fusion", "schedule"}));
  EXPECT_TRUE(step.fused && step.schedule);
  EXPECT_THROW(p.only({"fusion", "cse"}), InvalidArgument);
  EXPECT_THROW(p.only({"csee"}), InvalidArgument);
  Pipeline q(TrainerOptions{});
  q.only({"training_step"});
  EXPECT_THROW(q.run({.graph = ir::models::build_mlp({}).graph}), InvalidArgument);  // no loss
}

}  // namespace
}  // namespace disc::engine
