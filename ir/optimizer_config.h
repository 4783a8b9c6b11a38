// The optimizer a training step updates its parameters with (ir/training_step.h builds it into
// the graph). Apart from the pass, so that TrainerOptions (the public API) needs no graph.
#pragma once

namespace disc::ir {

struct OptimizerConfig {
  enum class Kind { kSgd, kAdamW };
  Kind kind = Kind::kAdamW;
  double weight_decay = 0.01;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // AdamW
  double momentum = 0.9;                          // SGD
  bool nesterov = false;                          // SGD
  double clip_norm = 0;                           // 0: no clipping
  // Clipping holds every gradient until the global norm is known. In two passes it does not: the
  // step takes scalar inputs `grad_norm.given` and `apply`, and the clip (and loss scaling's guard)
  // read the given norm, so that each update runs as soon as its gradient is complete. The caller
  // runs the step twice on one batch: with apply 0 (nothing lands; the `grad_norm` output is the
  // norm), then with apply 1 and that norm given; being the same computation, the second pass's
  // gradients are the first's, bit for bit. Twice the forward and backward, for the memory of no
  // clipping. 0: the Trainer picks, 2 where a memory cap needs it, else 1 (build_training_step
  // reads 0 as 1).
  int clip_passes = 0;
  // How the optimizer state (AdamW's moments, SGD's momentum) is held: f32; bf16; or int8, 8-bit
  // codes with an f32 scale per block of 256 (ir/ops/state_codec.h). bf16 and int8 round
  // stochastically, by a hash of (parameter, step, element): still the same numbers run to run.
  enum class State { kF32, kBF16, kInt8 };
  State state = State::kF32;
  // Loss scaling (f16 training): the step takes a scalar input `loss_scale`, the backward starts
  // from it instead of 1, and the gradients are divided by it before the norm. Where the norm is
  // not finite (an inf or NaN in some gradient), no parameter or state changes: the step is
  // skipped, and the caller sees it in `grad_norm`.
  bool loss_scaling = false;
  // Gradient accumulation: the step takes a scalar input `apply` and holds `P.grad_sum` per
  // parameter (the gradients so far of the loss summed over counted targets) with
  // `accumulated.loss` and `accumulated.count`. A step with apply 0 only adds into them; one with
  // apply 1 adds its own, divides by the count (the mean over every micro-batch's real tokens),
  // updates, and empties them. Its `loss` output is the mean over the micro-batches so far.
  bool accumulate = false;
};

}  // namespace disc::ir
