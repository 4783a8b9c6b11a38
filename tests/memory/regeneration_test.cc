// The executor follows a plan's regenerations as the plan orders them: a temporary that two
// recomputes read is rerun once, a value that a recompute makes on the way is kept rather than
// recomputed, and the outputs are the same, bit for bit, as without a cap. The graphs and caps
// are those of the golden tests tests/golden/remat_shared_rerun.disc and remat_keep.disc, where
// the byte arithmetic is written out.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "devices/device.h"
#include "engine/executor.h"
#include "ir/binding.h"
#include "ir/text_format.h"

namespace disc::engine {
namespace {

struct Case {
  std::string file;
  // The golden test's cap: for the bytes the step itself holds.
  int64_t plan_cap;
  ir::Bindings shape;
  int64_t recomputes;  // nodes the plan reruns
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.file;
}

std::map<std::string, Tensor> random_args(const ir::Graph& g, const ir::Bindings& b,
                                          memory::Allocator& alloc) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::map<std::string, Tensor> args;
  for (const ir::Value* a : g.arguments()) {
    Tensor t = Tensor::empty(a->dtype(), ir::concrete_shape(g, *a, b), alloc);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
    args[a->name()] = t;
  }
  return args;
}

class Regeneration : public ::testing::TestWithParam<Case> {};

TEST_P(Regeneration, RunsEachRecomputeOnceAndKeepsTheNumbers) {
  const Case& c = GetParam();
  auto g = ir::parse_graph_file(std::string(DISC_TEST_DATA_DIR) + "/golden/" + c.file);
  auto dev = devices::make_cpu_device(2);
  memory::DeviceAllocator alloc(*dev);
  auto args = random_args(*g, c.shape, alloc);
  std::map<std::string, Tensor> free_args = args, capped_args = args;
  auto free_run = Executor(*g, alloc).run(free_args);
  // The arguments and the first run's outputs: the golden plans leave them out.
  const int64_t held = alloc.stats().live_bytes;
  StepStats stats;
  Executor capped(*g, alloc, {.cap = held + c.plan_cap});
  auto out = capped.run(capped_args, &stats);
  EXPECT_GT(stats.evictions, 0);
  EXPECT_EQ(stats.recomputes, c.recomputes);
  EXPECT_LE(stats.live_peak_bytes, held + c.plan_cap);
  for (const auto& [name, want] : free_run) {
    ASSERT_EQ(out.at(name).bytes(), want.bytes());
    EXPECT_EQ(std::memcmp(out.at(name).raw(), want.raw(), want.bytes()), 0) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, Regeneration,
                         ::testing::Values(
                             // %a rerun once for %p and %q, then %p and %q: 3 recomputes; %a
                             // again before step 12: 4.
                             Case{"remat_shared_rerun.disc", 16896, {{"N", 1024}, {"M", 4096}}, 4},
                             // attention_grad once, keeping %dk: 1.
                             Case{"remat_keep.disc", 131072, {{"N", 1024}, {"M", 24576}}, 1}),
                         [](const auto& info) {
                           return info.param.file.substr(0, info.param.file.find('.'));
                         });

}  // namespace
}  // namespace disc::engine
