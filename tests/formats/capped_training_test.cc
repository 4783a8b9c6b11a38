// The llama exported from PyTorch (tests/reference/llama.onnx), imported and trained 100 steps with
// the batch shape changing every step, under the smallest memory cap the governor can keep at the
// largest shape: the losses, gradient norms and final weights are bit for bit those of the run
// without a cap, and no step holds more than the cap.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/trainer.h"
#include "formats/onnx/import.h"
#include "formats/onnx/weights.h"
#include "memory/governor.h"

namespace disc::onnx {
namespace {

constexpr int kSteps = 100;
constexpr int64_t kMaxBatch = 6, kMaxSeq = 24, kVocab = 32;

struct Training {
  std::vector<float> losses, norms;
  std::map<std::string, std::vector<float>> params;
  int64_t live_peak = 0, evictions = 0;
};

engine::Trainer trainer(const memory::GovernorOptions& memory) {
  ImportOptions o;
  o.inputs = {{"tokens", {kMaxBatch, kMaxSeq}}};
  Imported m = import_file(std::string(DISC_TEST_DATA_DIR) + "/reference/llama.onnx", o);
  engine::Trainer t(language_model(m), {.threads = 2, .seed = 3, .memory = memory});
  load_weights(m, t);
  return t;
}

Training train(const memory::GovernorOptions& memory) {
  engine::Trainer t = trainer(memory);
  std::mt19937_64 rng(11);
  Training r;
  for (int step = 0; step < kSteps; ++step) {
    const int64_t b = 1 + static_cast<int64_t>(rng() % kMaxBatch),
                  s = step == 0 ? kMaxSeq : 1 + static_cast<int64_t>(rng() % kMaxSeq);
    std::vector<int32_t> tokens(b * s), targets(b * s);
    for (auto& v : tokens) v = static_cast<int32_t>(rng() % kVocab);
    for (auto& v : targets) v = static_cast<int32_t>(rng() % kVocab);
    engine::Batch batch = {
        {"tokens", engine::Tensor::from<int32_t>({b, s}, tokens, t.allocator())},
        {"targets", engine::Tensor::from<int32_t>({b, s}, targets, t.allocator())}};
    const engine::StepResult res = t.step(batch, 3e-3);
    r.losses.push_back(res.loss), r.norms.push_back(res.grad_norm);
    r.live_peak = std::max(r.live_peak, res.stats.live_peak_bytes);
    r.evictions += res.stats.evictions;
  }
  for (const std::string& p : t.parameter_names()) r.params[p] = t.parameter(p).to_vector<float>();
  return r;
}

TEST(OnnxCappedTraining, LossesUnderTheSmallestCapAreThoseWithoutACap) {
  int64_t cap = 0;
  {
    engine::Trainer t = trainer({.cap = int64_t{1} << 30});
    const ir::Bindings largest = t.largest_shape();
    cap = t.governor().smallest_feasible_cap(largest, t.bytes_held_for(largest));
  }
  const Training free_run = train({}), capped = train({.cap = cap});
  ASSERT_LT(cap, free_run.live_peak) << "the cap saves nothing";
  EXPECT_GT(capped.evictions, 0);
  EXPECT_LE(capped.live_peak, cap);
  EXPECT_EQ(std::memcmp(free_run.losses.data(), capped.losses.data(), kSteps * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(free_run.norms.data(), capped.norms.data(), kSteps * sizeof(float)), 0);
  for (const auto& [name, p] : free_run.params) EXPECT_EQ(p, capped.params.at(name)) << name;
  EXPECT_LT(free_run.losses.back(), free_run.losses.front());  // it trains
  std::printf(
      "100 steps: peak %lld bytes without a cap, %lld under the cap of %lld; %lld evictions\n",
      static_cast<long long>(free_run.live_peak), static_cast<long long>(capped.live_peak),
      static_cast<long long>(cap), static_cast<long long>(capped.evictions));
}

}  // namespace
}  // namespace disc::onnx
