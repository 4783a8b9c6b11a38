// The held-out loss (eval.*): the eval examples batched as the training data is, in file order,
// one pass, through Trainer::evaluate (the forward pass alone, under the run's memory cap); and
// `disc-train eval`, which measures it alone for a checkpoint or the weights a run starts from.
#pragma once

#include <cstdint>
#include <string>

#include "config.h"
#include "engine/trainer.h"
#include "ranks.h"
#include "setup.h"

namespace disc::apps {

struct HeldOutLoss {
  double loss = 0;  // the mean over the counted targets of every held-out example
  int64_t tokens = 0, examples = 0;
  double ms = 0;
};

// With ranks, each rank evaluates every ranks-th batch and the sums are joined, so every rank gets
// the whole figure.
HeldOutLoss evaluate_held_out(engine::Trainer& trainer, const RunSetup& s, const Ranks& ranks);

// `disc-train eval`: the held-out loss of the checkpoint `checkpoint` names, else of the newest
// complete one in checkpoint.dir, else of the weights a run starts from (model.hf's, say a merged
// export's). Prints one line; returns the exit code (0).
int evaluate_command(const Config& c, const std::string& checkpoint);

}  // namespace disc::apps
