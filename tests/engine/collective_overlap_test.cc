// A collective that outlives its node (engine/executor.h): the step goes on while a bucket is
// summed on the communicator's thread, and waits for the sums only where a node reads them. In
// one process, a communicator that plays two ranks holding the same rows (its sum doubles the
// values) does so after a delay on a thread of its own; the same doubling done at once is the
// reference. A node that read a bucket before its sum had landed would change the numbers.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "base/error.h"
#include "data_parallel_steps.h"

namespace disc::engine {
namespace {

using std::chrono::steady_clock;

class TwinRanks final : public devices::Communicator {
 public:
  explicit TwinRanks(std::chrono::milliseconds delay) : delay_(delay) {}

  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string describe() const override { return "two ranks with the same rows"; }
  devices::Collective start_all_reduce_sum(void* data, int64_t count, DType dtype) override {
    EXPECT_EQ(dtype, DType::kF32);
    auto sum = [data, count, delay = delay_] {
      devices::CollectiveSpan span{.begin = steady_clock::now()};
      std::this_thread::sleep_for(delay);
      float* x = static_cast<float*>(data);
      for (int64_t i = 0; i < count; ++i) x[i] += x[i];
      span.end = steady_clock::now();
      return span;
    };
    if (delay_.count() > 0) return std::async(std::launch::async, sum).share();
    std::promise<devices::CollectiveSpan> done;
    done.set_value(sum());
    return done.get_future().share();
  }
  // The tests here shard no optimizer state.
  devices::Collective start_reduce_scatter_sum(const void*, int64_t, DType, void*) override {
    throw InvalidArgument("TwinRanks sums whole tensors only");
  }
  devices::Collective start_all_gather(const void*, int64_t, DType, void*, int64_t) override {
    throw InvalidArgument("TwinRanks sums whole tensors only");
  }
  void broadcast(void*, int64_t, int) override {}
  [[noreturn]] void abort(int code) override { std::_Exit(code); }
  void set_timeout(double) override {}

 private:
  std::chrono::milliseconds delay_;
};

TEST(CollectiveOverlap, StepsReadTheSumsOfCollectivesThatOutliveTheirNodes) {
  using std::chrono::milliseconds;
  // A bucket per gradient, so that buckets run beside the backward.
  const Trained at_once = train(llama(std::make_shared<TwinRanks>(milliseconds(0)), {}, 1), 0, 1);
  auto late_ranks = std::make_shared<TwinRanks>(milliseconds(5));
  Trainer late_trainer = llama(late_ranks, {}, 1);
  int reported = 0;
  late_trainer.set_observer([&](const StepEvent& e) {
    if (e.kind != StepEvent::Kind::kCollective) return;
    ++reported;
    EXPECT_EQ(e.node->op().name, "all_reduce");
    EXPECT_GE(e.end_us - e.begin_us, 5e3);
  });
  const Trained late = train(std::move(late_trainer), 0, 1);
  EXPECT_EQ(late.losses, at_once.losses);
  EXPECT_EQ(late.grad_norms, at_once.grad_norms);
  EXPECT_EQ(late.params, at_once.params);
  // Every collective node of every step reported once: the loss's and one per parameter.
  const int params = static_cast<int>(at_once.params.size());
  EXPECT_EQ(reported, kSteps * (1 + params));
  EXPECT_GE(late.collective_ms, kSteps * 5.0);
  EXPECT_GT(late.collective_wait_ms, 0);
}

// The twin ranks train as one process on the same rows, within f32 rounding: the global loss
// divides the doubled sum by the doubled count, and each rank's gradients, weighted by its half of
// the tokens, are doubled by the sum. (So the test above would see a bucket read before its sum.)
TEST(CollectiveOverlap, TwinRanksTrainAsOneProcessWithinRounding) {
  const Trained one = train(llama(nullptr), 0, 1);
  const Trained twin =
      train(llama(std::make_shared<TwinRanks>(std::chrono::milliseconds(1))), 0, 1);
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_NEAR(twin.losses[i], one.losses[i], 1e-5 * one.losses[i]) << "step " << i + 1;
    EXPECT_NEAR(twin.grad_norms[i], one.grad_norms[i], 1e-5 * one.grad_norms[i]);
  }
  for (const auto& [name, want] : one.params) {
    const std::vector<float>& got = twin.params.at(name);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << name;
  }
}

}  // namespace
}  // namespace disc::engine
