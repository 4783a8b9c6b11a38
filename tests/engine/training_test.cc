// Training end to end on the CPU: a 2-layer Llama learns a synthetic task from batches whose
// sequence lengths change every step, and the same seed gives the same losses bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>

#include "devices/device.h"
#include "engine/executor.h"
#include "engine/init.h"
#include "engine/pipeline.h"
#include "engine/trainer.h"
#include "ir/models/model.h"
#include "ir/text_format.h"
#include "ir/training_step.h"

namespace disc::engine {
namespace {

// Counting sequences: each starts at a random token and steps by a per-sequence stride in
// {1, 2, 3} (mod vocab). The first two tokens reveal the stride, so attention can learn the
// rest exactly. Right-padded to the longest sequence; padding targets are -100.
std::map<std::string, Tensor> counting_batch(std::mt19937_64& rng, int64_t batch, int64_t min_len,
                                             int64_t max_len, int64_t vocab,
                                             memory::Allocator& alloc) {
  std::vector<int64_t> lens(batch);
  for (auto& l : lens) l = min_len + static_cast<int64_t>(rng() % (max_len - min_len + 1));
  int64_t s = *std::max_element(lens.begin(), lens.end());
  std::vector<int32_t> tokens(batch * s, 0), targets(batch * s, -100);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t start = static_cast<int64_t>(rng() % vocab),
            stride = 1 + static_cast<int64_t>(rng() % 3);
    for (int64_t t = 0; t < lens[b]; ++t)
      tokens[b * s + t] = static_cast<int32_t>((start + t * stride) % vocab);
    for (int64_t t = 0; t + 1 < lens[b]; ++t) targets[b * s + t] = tokens[b * s + t + 1];
  }
  return {{"tokens", Tensor::from<int32_t>({batch, s}, tokens, alloc)},
          {"targets", Tensor::from<int32_t>({batch, s}, targets, alloc)}};
}

// How Training::train runs.
struct TrainRun {
  bool fuse = false;                    // memory-bound ops as fused kernels (jit/fusion/fusion.h)
  jit::KernelCache* kernels = nullptr;  // with fuse: compiled from here, else interpreted
  StepStats* stats = nullptr;           // when given: the JIT counters of every step, summed
  bool tril = false;                    // the tril pass: attention skips its zero triangle
  bool attention = false;               // the attention pass: one op, by blocks of query rows
  int64_t max_len = 40;                 // sequence lengths are drawn from 8..max_len
  StepObserver observer;                // given to the executor
  bool background = false;              // compile in the background, interpreting meanwhile
  bool cross_entropy = false;           // the linear_cross_entropy pass: the head as one op
  bool backward_recompute = false;      // the backward makes SwiGLU's silu again (not held)
  // Each update's value is an output too, so that every update copies it into its argument
  // instead of having its node write it there (memory/liveness.h).
  bool update_copies = false;
  size_t* written_into = nullptr;     // receives how many updates were written in place
  std::string* step_graph = nullptr;  // receives the graph the executor ran, printed
};

class Training : public ::testing::Test {
 protected:
  std::unique_ptr<devices::Device> dev = devices::make_cpu_device(2);
  memory::DeviceAllocator alloc{*dev};

  // The llama these tests train, for sequences up to `max_len`.
  static ir::models::LlamaConfig llama(int64_t max_len) {
    return {.vocab = 32,
            .hidden = 64,
            .layers = 2,
            .heads = 4,
            .kv_heads = 2,
            .ffn = 172,
            .max_seq = std::max<int64_t>(64, max_len)};
  }

  // Trains for `steps` from `seed`; returns the loss of every step.
  std::vector<float> train(int steps, uint64_t seed, const TrainRun& run = {}) {
    const ir::models::LlamaConfig c = llama(run.max_len);
    ir::models::Model m = ir::models::build_llama(c);
    // The Trainer's pipeline, with the stages the run asks for.
    TrainerOptions options;
    options.optimizer.weight_decay = 0.0, options.optimizer.clip_norm = 1.0;
    options.jit = run.fuse;
    options.fuse_attention = run.attention;
    options.fuse_cross_entropy = run.cross_entropy;
    options.backward_recompute = run.backward_recompute;
    Pipeline pipeline(options);
    if (!run.tril) pipeline.disable("tril");
    if (run.update_copies) {
      pipeline.after({"training_step"}, [](const std::string&, CompiledStep& s) {
        ir::Graph& g = *s.model.graph;
        for (const auto& [arg, v] : std::vector(g.updates()))
          g.add_output("kept." + arg->name(), v);
      });
    }
    CompiledStep compiled = pipeline.run(std::move(m));
    for (const StageRun& r : pipeline.runs()) {
      if (r.stage == "attention" || r.stage == "linear_cross_entropy" ||
          r.stage == "backward_recompute") {
        EXPECT_EQ(r.changed, !r.skipped) << r.stage << " found nothing to rewrite";
      }
    }
    if (run.step_graph) *run.step_graph = ir::print_graph(compiled.graph());
    Executor ex(compiled.graph(), alloc, {}, std::move(*compiled.schedule), run.kernels,
                run.background);
    ex.set_observer(run.observer);
    if (run.written_into) *run.written_into = ex.governor().liveness().written_into.size();
    std::map<std::string, Tensor> args = init_params(compiled.model, seed, alloc);
    args.merge(zero_state(*compiled.model.graph, alloc));
    std::mt19937_64 data(seed);
    std::vector<float> losses;
    for (int step = 1; step <= steps; ++step) {
      auto batch = counting_batch(data, 8, 8, run.max_len, c.vocab, alloc);
      args["tokens"] = batch["tokens"];
      args["targets"] = batch["targets"];
      float lr = 3e-3f * std::min(1.0f, step / 20.0f);  // linear warmup, then constant
      args["lr"] = Tensor::from<float>({}, {lr}, alloc);
      args["step"] = Tensor::from<int64_t>({}, {step}, alloc);
      StepStats step_stats;
      losses.push_back(ex.run(args, &step_stats).at("loss").data<float>()[0]);
      if (run.stats) {
        run.stats->fused_kernels += step_stats.fused_kernels;
        run.stats->kernel_compiles += step_stats.kernel_compiles;
        run.stats->kernel_cache_loads += step_stats.kernel_cache_loads;
        run.stats->interpreted_kernels += step_stats.interpreted_kernels;
      }
    }
    return losses;
  }
};

TEST_F(Training, LlamaLearnsCountingWithVariableLengths) {
  std::vector<float> losses = train(300, 7);
  auto mean = [](auto first, auto last) {
    return std::accumulate(first, last, 0.0) / std::distance(first, last);
  };
  double start = mean(losses.begin(), losses.begin() + 10),
         end = mean(losses.end() - 20, losses.end());
  std::printf("llama counting task: mean loss of steps 1-10 %.3f, of steps 281-300 %.3f\n", start,
              end);
  // ln(32) = 3.47 at the start; the tokens after the second are fully predictable.
  EXPECT_GT(start, 3.0);
  EXPECT_LT(end, 0.25 * start) << "loss fell only from " << start << " to " << end;
}

TEST_F(Training, SameSeedGivesTheSameLossesBitForBit) {
  std::vector<float> a = train(15, 11), b = train(15, 11), c = train(15, 12);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST_F(Training, FusedKernelsGiveTheSameLossesWithinRoundingAndTheSameBitsEveryRun) {
  std::vector<float> plain = train(15, 11), fused = train(15, 11, {.fuse = true});
  EXPECT_EQ(fused, train(15, 11, {.fuse = true}));
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_NEAR(fused[i], plain[i], 2e-5 * std::abs(plain[i]) * (i + 1)) << "step " << i + 1;
}

// The same with the kernels compiled by the LLVM emitter (f32, where the interpreter computes in
// double): a second training run finds every kernel in the cache and compiles nothing.
TEST_F(Training, CompiledKernelsGiveTheSameLossesWithinRoundingAndTheSameBitsEveryRun) {
  jit::KernelCache kernels("");
  StepStats first, second;
  std::vector<float> plain = train(15, 11);
  std::vector<float> compiled = train(15, 11, {.fuse = true, .kernels = &kernels, .stats = &first});
  EXPECT_EQ(compiled, train(15, 11, {.fuse = true, .kernels = &kernels, .stats = &second}));
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_NEAR(compiled[i], plain[i], 2e-5 * std::abs(plain[i]) * (i + 1)) << "step " << i + 1;
  EXPECT_GT(first.kernel_compiles, 0);
  // Lengths 8..40 fall in 4 power-of-two buckets: a kernel compiles at most once per bucket, not
  // once per length.
  EXPECT_LE(first.kernel_compiles, first.fused_kernels / 15 * 4);
  EXPECT_EQ(second.kernel_compiles, 0);
  EXPECT_EQ(second.fused_kernels, first.fused_kernels);
  std::printf("%lld fused kernels run, %lld compiled, over 15 steps\n",
              static_cast<long long>(first.fused_kernels),
              static_cast<long long>(first.kernel_compiles));
}

// The head as one linear_cross_entropy op (chunks of rows, its own softmax rounding), on the
// reference kernels and with compiled ones: losses within rounding, the same bits every run.
TEST_F(Training, LinearCrossEntropyOpGivesTheSameLossesWithinRoundingAndTheSameBitsEveryRun) {
  jit::KernelCache kernels("");
  std::vector<float> plain = train(15, 11);
  for (bool fuse : {false, true}) {
    const TrainRun run{.fuse = fuse, .kernels = fuse ? &kernels : nullptr, .cross_entropy = true};
    std::vector<float> head = train(15, 11, run);
    EXPECT_EQ(head, train(15, 11, run));
    for (size_t i = 0; i < plain.size(); ++i)
      EXPECT_NEAR(head[i], plain[i], 2e-5 * std::abs(plain[i]) * (i + 1))
          << "step " << i + 1 << (fuse ? ", fused" : "");
  }
}

// Compiled in the background, with the nodes whose kernel is not ready interpreted meanwhile: the
// losses stay within rounding of the reference kernels', whichever nodes ran which way.
TEST_F(Training, BackgroundCompilationGivesTheSameLossesWithinRounding) {
  jit::KernelCache kernels("");
  StepStats stats;
  std::vector<float> plain = train(15, 11);
  std::vector<float> background =
      train(15, 11, {.fuse = true, .kernels = &kernels, .stats = &stats, .background = true});
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_NEAR(background[i], plain[i], 2e-5 * std::abs(plain[i]) * (i + 1)) << "step " << i + 1;
  EXPECT_GT(stats.interpreted_kernels + stats.kernel_compiles, 0);
  std::printf("%lld fused nodes interpreted while their kernels compiled, %lld kernels compiled\n",
              static_cast<long long>(stats.interpreted_kernels),
              static_cast<long long>(stats.kernel_compiles));
}

// A step compiles its kernels before it runs its first node (where LLVM's code is still in the
// caches): once the first node has run, no compile follows, though new lengths bring new buckets.
TEST_F(Training, AStepCompilesEveryKernelBeforeItsFirstNode) {
  jit::KernelCache kernels("");
  std::vector<int64_t> at_first_node, at_end;
  bool first = true;
  auto observe = [&](const StepEvent&) {
    if (first) at_first_node.push_back(kernels.stats().compiles);
    first = false;
  };
  StepStats stats;
  for (int64_t max_len : {12, 40, 100}) {  // lengths 8..12, 8..40, 8..100: new buckets each time
    first = true;
    train(1, 11,
          {.fuse = true,
           .kernels = &kernels,
           .stats = &stats,
           .max_len = max_len,
           .observer = observe});
    at_end.push_back(kernels.stats().compiles);
  }
  EXPECT_EQ(at_first_node, at_end);
  EXPECT_GT(at_end[0], 0);
  EXPECT_GT(at_end[1], at_end[0]);
  EXPECT_GT(at_end[2], at_end[1]);
  EXPECT_EQ(stats.kernel_compiles, at_end.back());
}

// Attention's products over the causal probabilities skip the zero blocks above the diagonal
// (lengths up to 150 make three 64-row blocks), as disc-train runs them: with compiled kernels,
// whose softmax gives exact zeros there. Only the contraction's split changes, so losses agree
// within rounding, and every run gives the same bits.
TEST_F(Training, TriangularAttentionProductsGiveTheSameLossesWithinRoundingAndTheSameBitsEveryRun) {
  jit::KernelCache kernels("");
  const TrainRun whole{.fuse = true, .kernels = &kernels, .max_len = 150};
  TrainRun tril = whole;
  tril.tril = true;
  std::vector<float> plain = train(10, 5, whole), skipped = train(10, 5, tril);
  EXPECT_EQ(skipped, train(10, 5, tril));
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_NEAR(skipped[i], plain[i], 2e-5 * std::abs(plain[i]) * (i + 1)) << "step " << i + 1;
}

// Attention as one op (devices/cpu/block_attention.h) against attention as matmul, mask, softmax,
// matmul, with reference kernels and with compiled ones, over lengths that make three 64-row
// blocks: the softmax's rounding differs, so losses agree within rounding; every run gives the
// same bits.
TEST_F(Training, AttentionOpGivesTheSameLossesWithinRoundingAndTheSameBitsEveryRun) {
  jit::KernelCache kernels("");
  for (const TrainRun& primitives :
       {TrainRun{.max_len = 150}, TrainRun{.fuse = true, .kernels = &kernels, .max_len = 150}}) {
    TrainRun one_op = primitives;
    one_op.attention = true;
    std::vector<float> plain = train(10, 5, primitives), fused = train(10, 5, one_op);
    EXPECT_EQ(fused, train(10, 5, one_op));
    for (size_t i = 0; i < plain.size(); ++i)
      EXPECT_NEAR(fused[i], plain[i], 2e-5 * std::abs(plain[i]) * (i + 1))
          << "step " << i + 1 << (primitives.fuse ? " (JIT)" : "");
  }
}

// The backward's silu(gate) is the same op on the same gate as the forward's: the same bits, on
// the reference kernels and in fused kernels (where the forward's SwiGLU kernel no longer writes
// it out and the backward's computes it again).
TEST_F(Training, BackwardRecomputeGivesTheSameLossesBitForBit) {
  jit::KernelCache kernels("");
  for (const TrainRun& held : {TrainRun{}, TrainRun{.fuse = true, .kernels = &kernels}}) {
    TrainRun again = held;
    again.backward_recompute = true;
    EXPECT_EQ(train(10, 5, again), train(10, 5, held)) << (held.fuse ? "JIT" : "reference kernels");
  }
}

// AdamW's nodes write the parameter and its moments in place when nothing reads them later; the
// same kernels writing new tensors that the updates then copy give the same bits.
TEST_F(Training, UpdatesWrittenInPlaceGiveTheSameLossesBitForBit) {
  jit::KernelCache kernels("");
  for (TrainRun copies : {TrainRun{}, TrainRun{.fuse = true, .kernels = &kernels}}) {
    size_t in_place = 0, copied = 0;
    TrainRun in_place_run = copies;
    in_place_run.written_into = &in_place;
    copies.update_copies = true;
    copies.written_into = &copied;
    EXPECT_EQ(train(10, 5, in_place_run), train(10, 5, copies))
        << (copies.fuse ? "JIT" : "reference kernels");
    EXPECT_GT(in_place, 0u);
    EXPECT_EQ(copied, 0u);
  }
}

// Everything the Trainer turns on (engine/pipeline.h): the graph these runs execute is the
// Trainer's own, text for text; its losses are the same bits every run and within rounding of the
// plain graph's on the reference kernels.
TEST_F(Training, TheTrainersStepGivesTheSameLossesWithinRoundingAndTheSameBitsEveryRun) {
  jit::KernelCache kernels("");
  std::string graph;
  const TrainRun all{.fuse = true,
                     .kernels = &kernels,
                     .tril = true,
                     .attention = true,
                     .cross_entropy = true,
                     .backward_recompute = true,
                     .step_graph = &graph};
  std::vector<float> plain = train(15, 11), step = train(15, 11, all);
  EXPECT_EQ(step, train(15, 11, all));
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_NEAR(step[i], plain[i], 2e-5 * std::abs(plain[i]) * (i + 1)) << "step " << i + 1;
  TrainerOptions options;
  options.threads = 2, options.optimizer.weight_decay = 0.0, options.optimizer.clip_norm = 1.0;
  Trainer trainer(ir::models::build_llama(llama(TrainRun{}.max_len)), options);
  EXPECT_EQ(ir::print_graph(trainer.step_graph()), graph);
}

// Images whose label is the quadrant holding a bright square: learnable by a small CNN.
std::map<std::string, Tensor> quadrant_batch(std::mt19937_64& rng, int64_t batch,
                                             memory::Allocator& alloc) {
  std::vector<float> images(batch * 16 * 16, 0.0f);
  std::vector<int32_t> labels(batch);
  for (int64_t b = 0; b < batch; ++b) {
    labels[b] = static_cast<int32_t>(rng() % 4);
    int64_t y0 = (labels[b] / 2) * 8 + static_cast<int64_t>(rng() % 4),
            x0 = (labels[b] % 2) * 8 + static_cast<int64_t>(rng() % 4);
    for (int64_t y = y0; y < y0 + 4; ++y) {
      for (int64_t x = x0; x < x0 + 4; ++x) images[b * 256 + y * 16 + x] = 1.0f;
    }
  }
  return {{"images", Tensor::from<float>({batch, 1, 16, 16}, images, alloc)},
          {"labels", Tensor::from<int32_t>({batch}, labels, alloc)}};
}

TEST_F(Training, CnnLearnsWithSgdAndMomentum) {
  ir::models::CnnConfig c;
  c.image = 16, c.classes = 4, c.conv_channels = {4, 8};
  ir::models::Model m = ir::models::build_cnn(c);
  ir::OptimizerConfig opt;
  opt.kind = ir::OptimizerConfig::Kind::kSgd, opt.momentum = 0.9, opt.weight_decay = 1e-4;
  ir::build_training_step(*m.graph, m.loss, m.params, opt);
  Executor ex(*m.graph, alloc);
  std::map<std::string, Tensor> args = init_params(m, 3, alloc);
  args.merge(zero_state(*m.graph, alloc));
  args["lr"] = Tensor::from<float>({}, {0.05f}, alloc);
  std::mt19937_64 data(5);
  std::vector<double> losses;
  for (int step = 0; step < 60; ++step) {
    for (auto& [k, v] : quadrant_batch(data, 1 + step % 7, alloc)) args[k] = v;  // batch 1..7
    losses.push_back(ex.run(args).at("loss").data<float>()[0]);
  }
  double start = std::accumulate(losses.begin(), losses.begin() + 7, 0.0) / 7;
  double end = std::accumulate(losses.end() - 7, losses.end(), 0.0) / 7;
  EXPECT_LT(end, 0.5 * start) << "cnn loss fell only from " << start << " to " << end;
}

TEST_F(Training, Gpt2WithDropoutRunsAndDropoutFollowsTheSeed) {
  ir::models::Gpt2Config c;
  c.vocab = 32, c.hidden = 32, c.layers = 1, c.heads = 2, c.ffn = 64, c.max_seq = 64,
  c.dropout = 0.1;
  ir::models::Model m = ir::models::build_gpt2(c);
  ir::build_training_step(*m.graph, m.loss, m.params, {});
  Executor ex(*m.graph, alloc);
  std::mt19937_64 data(1);
  auto batch = counting_batch(data, 4, 5, 20, c.vocab, alloc);
  auto loss_with_seed = [&](int64_t seed) {
    std::map<std::string, Tensor> args = init_params(m, 1, alloc);  // fresh weights each run
    args.merge(zero_state(*m.graph, alloc));
    args.insert(batch.begin(), batch.end());
    args["lr"] = Tensor::from<float>({}, {1e-3f}, alloc);
    args["step"] = Tensor::from<int64_t>({}, {1}, alloc);
    args["seed"] = Tensor::from<int64_t>({}, {seed}, alloc);
    return ex.run(args).at("loss").data<float>()[0];
  };
  EXPECT_EQ(loss_with_seed(1), loss_with_seed(1));
  EXPECT_NE(loss_with_seed(1), loss_with_seed(2));
}

}  // namespace
}  // namespace disc::engine
