// An example trainer that embeds disc: a small Llama learns to continue counting sequences whose
// length changes every step. Build it against an installed disc (see CMakeLists.txt here).
//   train_counting [steps] [model.onnx]
// With an ONNX file (a llama exported from PyTorch with dynamic batch and sequence axes, of a
// vocabulary of at least 32), that model is trained from its own weights instead.
#include <disc/base/error.h>
#include <disc/base/version.h>
#include <disc/devices/cpu/openmp_spin.h>
#include <disc/engine/trainer.h>
#include <disc/formats/onnx/import.h>
#include <disc/formats/onnx/weights.h>
#include <disc/ir/models/model.h>

#include <cstdio>
#include <cstdlib>
#include <random>

using namespace disc;

// Sequences start anywhere and count by a per-sequence stride of 1..3 (mod vocab).
engine::Batch counting_batch(std::mt19937_64& rng, int64_t batch, int64_t vocab,
                             memory::Allocator& alloc) {
  int64_t seq = 8 + static_cast<int64_t>(rng() % 25);  // a new length every step
  std::vector<int32_t> tokens(batch * seq), targets(batch * seq, -100);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t start = static_cast<int64_t>(rng() % vocab),
            stride = 1 + static_cast<int64_t>(rng() % 3);
    for (int64_t t = 0; t < seq; ++t)
      tokens[b * seq + t] = static_cast<int32_t>((start + t * stride) % vocab);
    for (int64_t t = 0; t + 1 < seq; ++t) targets[b * seq + t] = tokens[b * seq + t + 1];
  }
  return {{"tokens", engine::Tensor::from<int32_t>({batch, seq}, tokens, alloc)},
          {"targets", engine::Tensor::from<int32_t>({batch, seq}, targets, alloc)}};
}

int main(int argc, char** argv) {
  devices::cpu::run_again_with_short_openmp_spin(argv);  // see openmp_spin.h: 5-15% on 2 cores
  int steps = argc > 1 ? std::atoi(argv[1]) : 100;
  std::printf("disc %s\n", version());
  try {
    ir::models::LlamaConfig model;
    model.vocab = 32, model.hidden = 64, model.layers = 2, model.max_seq = 64;
    engine::TrainerOptions options;
    options.threads = 2;
    options.optimizer.clip_norm = 1.0;
    onnx::Imported imported;
    if (argc > 2) {
      onnx::ImportOptions o;
      o.inputs = {{"tokens", {8, 64}}};  // the token ids' batch and sequence bounds
      imported = onnx::import_file(argv[2], o);
    }
    engine::Trainer trainer(
        argc > 2 ? onnx::language_model(imported) : ir::models::build_llama(model), options);
    if (argc > 2) onnx::load_weights(imported, trainer);
    std::mt19937_64 rng(1);
    for (int step = 1; step <= steps; ++step) {
      auto r = trainer.step(counting_batch(rng, 8, model.vocab, trainer.allocator()), 3e-3);
      if (step % 10 == 0 || step == 1) std::printf("step %d loss %.4f\n", step, r.loss);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "train_counting: %s\n", e.what());
    return 2;
  }
  return 0;
}
