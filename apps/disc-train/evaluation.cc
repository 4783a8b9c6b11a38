#include "evaluation.h"

#include <spdlog/fmt/fmt.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>

#include "apps/data/batcher.h"
#include "base/error.h"
#include "weights.h"

namespace disc::apps {

HeldOutLoss evaluate_held_out(engine::Trainer& trainer, const RunSetup& s, const Ranks& ranks) {
  const auto start = std::chrono::steady_clock::now();
  data::BatchSpec spec = s.batching;
  spec.shuffle = false;
  data::Batcher batcher(s.eval_examples, spec, s.eval_loss_start);
  double sums[2] = {0, 0};  // each batch's mean loss times its counted targets; the targets
  for (int64_t i = 0;
       batcher.cursor().epoch == 0 && batcher.cursor().position < batcher.sequences(); ++i) {
    const data::HostBatch hb = batcher.next();
    if (i % ranks.size != ranks.rank || hb.real_tokens == 0) continue;
    const float loss = trainer.evaluate(to_tensors(hb, trainer, trainer.graph(), 0, 0));
    sums[0] += static_cast<double>(loss) * static_cast<double>(hb.real_tokens);
    sums[1] += static_cast<double>(hb.real_tokens);
  }
  if (ranks.size > 1) ranks.world->all_reduce_sum(sums, 2, DType::kF64);
  return {.loss = sums[1] > 0 ? sums[0] / sums[1] : std::numeric_limits<double>::quiet_NaN(),
          .tokens = static_cast<int64_t>(sums[1]),
          .examples = batcher.sequences(),
          .ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count()};
}

int evaluate_command(const Config& c, const std::string& checkpoint) {
  RunSetup s = make_setup(c);
  if (s.eval_examples.empty())
    throw InvalidArgument(
        "eval.path is empty: set it to the held-out examples to evaluate, in data.source's "
        "format");
  const std::string from = checkpoint_to_use(c, checkpoint, "evaluate");
  auto cpu = engine::make_device("cpu", 0);
  memory::DeviceAllocator host(*cpu);  // before the tensors it holds, so it outlives them
  std::map<std::string, engine::Tensor> params;
  if (!from.empty()) params = checkpoint_parameters(s.model, from, host);
  s.trainer.optimizer_state = false;  // the parameters alone: a 1.1B f32 model holds 4 GiB, not 12
  engine::Trainer trainer(std::move(s.model), s.trainer);
  if (from.empty()) {
    load_initial_weights(s, trainer);
  } else {
    for (const std::string& name : trainer.parameter_names())
      trainer.set_parameter(name, params.at(name));
  }
  const HeldOutLoss h = evaluate_held_out(trainer, s, Ranks{});
  std::cout << fmt::format("eval_loss {:.6f}", h.loss) << " over " << h.examples << " examples ("
            << h.tokens << " tokens) of " << c.get_string("eval.path") << ", weights from "
            << (from.empty() ? std::string("the run's start") : from) << "\n";
  return 0;
}

}  // namespace disc::apps
