// docs/embedding.md's "training from C++ at the graph level", as written there: the compile
// pipeline, an executor over the step it compiled, and arguments made by hand. Its first loss is
// the Trainer's for the same options, seed and batch, bit for bit: the Trainer is that plus its
// checks, schedules and checkpoints.
#include <gtest/gtest.h>

#include <vector>

#include "devices/device.h"
#include "engine/executor.h"
#include "engine/init.h"
#include "engine/pipeline.h"
#include "engine/trainer.h"
#include "ir/models/model.h"
#include "jit/cpu/kernel_cache.h"

namespace disc::engine {
namespace {

constexpr int64_t kB = 2, kS = 7;

std::vector<int32_t> counting(int offset) {
  std::vector<int32_t> v(kB * kS);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>((i + offset) % 256);
  return v;
}

TEST(GraphLevel, TheDocsExampleTrainsAsTheTrainerDoes) {
  const ir::models::LlamaConfig config{.vocab = 256, .hidden = 64, .layers = 2};
  TrainerOptions opt;
  opt.optimizer.clip_norm = 1.0;
  opt.threads = 2;
  CompiledStep step = Pipeline(opt).run(ir::models::build_llama(config));
  auto dev = devices::make_cpu_device(/*threads=*/2);
  memory::DeviceAllocator alloc(*dev);
  jit::KernelCache kernels("");
  Executor ex(step.graph(), alloc, opt.memory, &kernels);
  auto args = init_params(step.model, opt.seed, alloc);
  args.merge(zero_state(step.graph(), alloc));
  args["tokens"] = Tensor::from<int32_t>({kB, kS}, counting(0), alloc);
  args["targets"] = Tensor::from<int32_t>({kB, kS}, counting(1), alloc);
  args["lr"] = Tensor::from<float>({}, {3e-3f}, alloc);
  args["step"] = Tensor::from<int64_t>({}, {1}, alloc);
  const float first = ex.run(args).at("loss").data<float>()[0];
  args["step"] = Tensor::from<int64_t>({}, {2}, alloc);
  const float second = ex.run(args).at("loss").data<float>()[0];
  EXPECT_LT(second, first) << "the update in place did not lower the loss on the same batch";

  Trainer trainer(ir::models::build_llama(config), opt);
  const Batch batch = {
      {"tokens", Tensor::from<int32_t>({kB, kS}, counting(0), trainer.allocator())},
      {"targets", Tensor::from<int32_t>({kB, kS}, counting(1), trainer.allocator())}};
  EXPECT_EQ(trainer.step(batch, 3e-3).loss, first);
}

}  // namespace
}  // namespace disc::engine
