// TrainerOptions: what a run sets, from the device to the memory cap. The Trainer reads them, and
// the compile pipeline (engine/pipeline.h) reads the ones that shape the compiled step.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "ir/optimizer_config.h"
#include "memory/governor_options.h"

namespace disc::devices {
class Communicator;
}

namespace disc::engine {

struct TrainerOptions {
  std::string device = "cpu";
  int threads = 0;                // 0: every hardware thread
  uint64_t seed = 0;              // parameter initialisation
  ir::OptimizerConfig optimizer;  // AdamW with weight decay 0.01 by default
  // Parameters held fixed (a fine-tune's frozen embeddings): the step computes no gradient for
  // them and keeps no optimizer state, and the memory plan holds neither. Each must name a
  // parameter of the model (InvalidArgument otherwise).
  std::set<std::string> frozen;
  // The matmuls' dtype: f32, or bf16 / f16 with f32 sums, norms, softmax, losses and reductions
  // (ir/passes/autocast.cc); parameters and optimizer state stay f32.
  DType precision = DType::kF32;
  // f32 matmuls in TF32 on an NVIDIA GPU's tensor cores (products of 10-bit mantissas, sums in
  // f32): several times faster than f32, but no longer the CPU's numbers within f32 rounding.
  // Other devices refuse it (InvalidArgument).
  bool tf32 = false;
  // bf16 attention and heads on the CPU's bf16 dot products (avx512_bf16, AMX) where it has them:
  // P, dS and the head's logit gradients rounded to bf16 for their GEMMs. false: widened to f32
  // on every CPU, the numbers of CPUs without them. Only the CPU devices (cpu, sim, sim-gpu) read
  // it.
  bool bf16_dot = true;
  // Whether the step scales its loss: f16's range needs it (the Pipeline's optimizer and the
  // Trainer's scale both ask here).
  bool scales_loss() const { return precision == DType::kF16; }
  // With f16, dynamic loss scaling as PyTorch's GradScaler does it: the loss is multiplied by the
  // scale before the backward and the gradients divided by it; a step whose gradients hold an inf
  // or NaN changes nothing (skipped) and halves the scale; after `loss_scale_growth_interval`
  // clean steps in a row the scale doubles.
  double loss_scale = 65536.0;  // the first step's
  int64_t loss_scale_growth_interval = 2000;
  memory::GovernorOptions memory;  // the cap on device bytes (0: none), scheduling, remat, offload
  bool jit = true;  // fused JIT kernels for memory-bound ops (false: reference kernels only)
  bool fuse_attention =
      true;  // attention as one op run by blocks of query rows (ir/passes/attention.cc)
  // A linear layer and cross-entropy (the model's head) as one op run by chunks of rows, without
  // the [..., classes] logits (ir/passes/linear_cross_entropy.cc).
  bool fuse_cross_entropy = true;
  // Memory-bound forward values that the backward reads (SwiGLU's silu) made again there from
  // values it reads anyway, instead of held from the forward (ir/passes/backward_recompute.cc).
  bool backward_recompute = true;
  std::vector<int64_t> buckets;  // shape-bucket boundaries ([]: powers of two; used by the JIT)
  std::string kernel_cache_dir;  // on-disk kernel cache ("": none; used by the JIT)
  // Compile new buckets' kernels on a thread of their own and interpret those nodes meanwhile: no
  // step waits for a compile, but which nodes ran interpreted (other rounding) depends on timing,
  // so runs are no longer bit-identical (engine/executor.h).
  bool background_compile = false;
  // Refuse a memory cap that the largest shape cannot keep, before the first step. `disc-train
  // plan` turns it off to show where such a cap fails.
  bool check_cap = true;
  // Make the parameters and optimizer state. `disc-train plan` turns it off: at TinyLlama-1.1B's
  // sizes they are 12 GiB made only to be planned. Without them the Trainer compiles and plans
  // (bytes_held_for counts them from the graph), and step, save, load and parameters refuse.
  bool make_state = true;
  // Make the optimizer state too. `disc-train eval` turns it off: the parameters alone, for
  // evaluate() (its memory cap is checked against the forward pass's plan, not the step's); step,
  // save and load then refuse.
  bool optimizer_state = true;
  // Data parallelism: this process is one rank of `communicator` (devices::mpi_world() under
  // mpirun). Each rank steps on its share of the global batch, and the step trains on the global
  // batch's loss with the gradients summed over the ranks in buckets of about `bucket_bytes`
  // (ir/data_parallel.h), so every rank makes the update one process would make on the whole
  // batch, and holds the same state: one rank alone need save() it. Null, or a single rank: one
  // process.
  std::shared_ptr<devices::Communicator> communicator;
  int64_t bucket_bytes = int64_t{25} << 20;
  // ZeRO stage 1 (ir/data_parallel.h): each rank keeps and updates the optimizer state of its
  // part of each parameter, 1/N of it. save() then gathers the parts: every rank must call it at
  // the same step (rank 0 alone writes); load() takes this rank's part of a whole state.
  bool shard_optimizer = false;
};

}  // namespace disc::engine
