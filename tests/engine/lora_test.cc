// LoRA (ir/models/lora.h) through the trainer: fresh adapters leave the base model's loss as it
// was, only the adapters get gradients and optimizer state (the bf16 base stays bit for bit),
// the adapters' gradients match finite differences, a cap changes no number, training from trained
// weights follows the full fine-tune's curve, and a TinyLlama-1.1B with r = 16 adapters on every
// projection plans under 3 GiB.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "base/half.h"
#include "engine/plan_summary.h"
#include "engine/trainer.h"
#include "ir/graph.h"
#include "tests/engine/loss_curve.h"

namespace disc::engine {
namespace {

using testing::counting;

ir::models::LlamaConfig counting_config(int64_t rank, DType base = DType::kBF16) {
  ir::models::LlamaConfig c{.vocab = 32,
                            .hidden = 64,
                            .layers = 2,
                            .heads = 4,
                            .kv_heads = 2,
                            .ffn = 172,
                            .max_batch = 64,
                            .max_seq = 1024};
  c.lora = {.rank = rank, .alpha = 16, .base = base};
  return c;
}

TrainerOptions lora_options(double clip = 1.0) {
  TrainerOptions o;
  o.threads = 2, o.seed = 3;
  o.optimizer.clip_norm = clip;
  return o;
}

bool is_adapter(const std::string& name) {
  return name.ends_with(".lora_A") || name.ends_with(".lora_B");
}

std::vector<uint16_t> bits(const Tensor& t) {
  std::vector<uint16_t> out(static_cast<size_t>(t.numel()));
  t.download(out.data());
  return out;
}

// Copies `from`'s base weights into `to` (in to's dtype: a bf16 LoRA base or an f32 model).
void copy_base(const Trainer& from, Trainer& to) {
  for (const std::string& name : to.parameter_names()) {
    if (is_adapter(name)) continue;
    const Tensor& p = from.parameter(name);
    to.set_parameter(name, as_dtype(as_dtype(p, DType::kF32, to.allocator()),
                                    to.parameter(name).dtype(), to.allocator()));
  }
}

TEST(Lora, FreshAdaptersLeaveTheBaseModelsLoss) {
  Trainer lora(ir::models::build_llama(counting_config(4)), lora_options());
  Trainer plain(ir::models::build_llama(counting_config(0)), lora_options());
  copy_base(lora, plain);  // the bf16 base, widened: the same numbers in f32
  const Batch b = counting(lora, 7);
  EXPECT_FLOAT_EQ(lora.evaluate(b), plain.evaluate(counting(plain, 7)));
}

TEST(Lora, OnlyTheAdaptersTrainAndTheBf16BaseStaysBitForBit) {
  Trainer t(ir::models::build_llama(counting_config(4)), lora_options());
  EXPECT_EQ(t.parameter("l0.wq").dtype(), DType::kBF16);
  EXPECT_EQ(t.parameter("embed").dtype(), DType::kBF16);
  EXPECT_EQ(t.parameter("l0.wq.lora_A").dtype(), DType::kF32);
  const std::vector<uint16_t> wq = bits(t.parameter("l0.wq")), head = bits(t.parameter("lm_head"));
  const std::vector<float> b0 = t.parameter("l1.w_down.lora_B").to_vector<float>();
  float first = 0, last = 0;
  for (int i = 0; i < 20; ++i) {
    const float loss = t.step(counting(t, i), 1e-2).loss;
    (i == 0 ? first : last) = loss;
  }
  EXPECT_LT(last, first);
  EXPECT_EQ(bits(t.parameter("l0.wq")), wq);
  EXPECT_EQ(bits(t.parameter("lm_head")), head);
  EXPECT_NE(t.parameter("l1.w_down.lora_B").to_vector<float>(), b0);
  // Optimizer state for the adapters alone.
  for (const ir::Value* a : t.graph().arguments()) {
    if (a->role() != ir::Role::kState) continue;
    const std::string owner = a->name().substr(0, a->name().rfind('.'));
    EXPECT_TRUE(is_adapter(owner)) << a->name();
  }
  EXPECT_NE(t.graph().find_value("l0.wq.lora_A.m"), nullptr);
  EXPECT_EQ(t.graph().find_value("l0.wq.m"), nullptr);
}

TEST(Lora, AdaptersStartAsPeftDrawsThem) {
  Trainer t(ir::models::build_llama(counting_config(8)), lora_options());
  for (const std::string name : {"l0.wq", "l1.w_down"}) {
    const Tensor& a = t.parameter(name + std::string(".lora_A"));
    const double bound = 1.0 / std::sqrt(static_cast<double>(a.shape()[1]));  // 1/sqrt(in)
    double sum_sq = 0;
    for (float v : a.to_vector<float>()) {
      EXPECT_LE(std::abs(v), bound);
      sum_sq += v * v;
    }
    // uniform(-bound, bound) has std bound/sqrt(3).
    EXPECT_NEAR(std::sqrt(sum_sq / static_cast<double>(a.numel())), bound / std::sqrt(3.0),
                0.1 * bound);
    for (float v : t.parameter(name + std::string(".lora_B")).to_vector<float>()) EXPECT_EQ(v, 0);
  }
}

// The adapters' gradient g from one plain SGD step (lr * g is what moved), against central
// differences of the loss along g.
TEST(Lora, AdapterGradientsMatchFiniteDifferences) {
  TrainerOptions o = lora_options(0.0);
  o.optimizer.kind = ir::OptimizerConfig::Kind::kSgd, o.optimizer.momentum = 0;
  o.optimizer.weight_decay = 0;
  Trainer t(ir::models::build_llama(counting_config(4, DType::kF32)), o);
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0, 0.05f);
  std::map<std::string, std::vector<float>> start;
  for (const std::string& name : t.parameter_names()) {
    if (!is_adapter(name)) continue;
    std::vector<float> v = t.parameter(name).to_vector<float>();
    if (name.ends_with("_B"))
      for (float& x : v) x = normal(rng);  // B = 0 would leave A without a gradient
    t.set_parameter(name, Tensor::from<float>(t.parameter(name).shape(), v, t.allocator()));
    start[name] = v;
  }
  const Batch b = counting(t, 3);
  const double lr = 1e-3;
  t.step(b, lr);
  std::map<std::string, std::vector<float>> grad;
  double norm_sq = 0;
  for (auto& [name, v] : start) {
    std::vector<float> now = t.parameter(name).to_vector<float>();
    for (size_t i = 0; i < v.size(); ++i) {
      grad[name].push_back(static_cast<float>((v[i] - now[i]) / lr));
      norm_sq += static_cast<double>(grad[name].back()) * grad[name].back();
    }
  }
  const double norm = std::sqrt(norm_sq), eps = 1e-2;
  ASSERT_GT(norm, 0);
  auto loss_at = [&](double along) {
    for (auto& [name, v] : start) {
      std::vector<float> moved = v;
      for (size_t i = 0; i < v.size(); ++i)
        moved[i] += static_cast<float>(along * grad[name][i] / norm);
      t.set_parameter(name, Tensor::from<float>(t.parameter(name).shape(), moved, t.allocator()));
    }
    return static_cast<double>(t.evaluate(b));
  };
  const double slope = (loss_at(eps) - loss_at(-eps)) / (2 * eps);
  EXPECT_NEAR(slope, norm, 0.02 * norm);
}

TEST(Lora, ACapChangesNoLoss) {
  ir::models::LlamaConfig bounded = counting_config(4);
  bounded.max_batch = 6, bounded.max_seq = 40;  // counting()'s batches
  auto run = [&](int64_t cap) {
    TrainerOptions o = lora_options();
    o.memory.cap = cap;
    Trainer t(ir::models::build_llama(bounded), o);
    std::vector<float> out;
    for (int i = 0; i < 8; ++i) out.push_back(t.step(counting(t, i), 3e-3).loss);
    return out;
  };
  const int64_t cap = testing::smallest_cap(ir::models::build_llama(bounded), lora_options());
  EXPECT_EQ(run(0), run(cap));
}

TEST(Lora, ARankAboveTheSmallerSideIsRefused) {
  ir::models::LlamaConfig c = counting_config(4);
  c.lora.rank = 65, c.lora.targets = {"down_proj"};  // down_proj is [172 -> 64]
  EXPECT_THROW(ir::models::build_llama(c), InvalidArgument);
  c.lora.targets = {"q_proj", "x_proj"};
  EXPECT_THROW(ir::models::build_llama(c), InvalidArgument);
}

// 150 steps of full fine-tuning make "trained weights"; from them, 150 more steps of LoRA
// (r = 8, bf16 base) and of the full f32 fine-tune stay within a band of each other.
TEST(Lora, FromTrainedWeightsFollowsTheFullFineTune) {
  constexpr int kHalf = testing::kSteps / 2;
  Trainer full(testing::counting_llama(), lora_options());
  for (int i = 0; i < kHalf; ++i) full.step(counting(full, i), testing::lr(i));
  Trainer lora(ir::models::build_llama(counting_config(8)), lora_options());
  copy_base(full, lora);
  std::vector<float> got, want;
  for (int i = kHalf; i < testing::kSteps; ++i) {
    got.push_back(lora.step(counting(lora, i), testing::lr(i)).loss);
    want.push_back(full.step(counting(full, i), testing::lr(i)).loss);
  }
  const std::vector<double> got_curve = testing::curve(got), want_curve = testing::curve(want);
  for (size_t w = 0; w < want_curve.size(); ++w) {
    std::printf("  steps %3zu-%3zu: LoRA %.4f, full %.4f\n", kHalf + w * testing::kWindow + 1,
                kHalf + (w + 1) * testing::kWindow, got_curve[w], want_curve[w]);
    EXPECT_NEAR(got_curve[w], want_curve[w], 0.10 * want_curve[w] + 0.02) << "window " << w;
  }
}

// r = 16 adapters on every projection of a TinyLlama-1.1B at B = 2, S = 512 in bf16 plan under
// 3 GiB (full f32: 16.4), on the CPU and on a device with host memory to offload to (a GPU;
// sim-gpu here).
TEST(Lora, BringsATinyLlamaFineTuneUnder3GiB) {
  ir::models::LlamaConfig tiny = testing::tinyllama_shapes();
  tiny.lora = {.rank = 16, .alpha = 32};
  auto bound = [&](const std::string& device) {
    TrainerOptions o = lora_options();
    o.device = device, o.precision = DType::kBF16;
    o.make_state = false, o.memory.cap = int64_t{1} << 40, o.memory.offload = device != "cpu";
    Trainer t(ir::models::build_llama(tiny), o);
    const int64_t bytes = summarize_plan(t, t.largest_shape()).every_shape_lower_bound;
    const double gib = static_cast<double>(bytes) / (1 << 30);
    std::printf("  %s: %.2f GiB\n", device.c_str(), gib);
    return gib;
  };
  EXPECT_LE(bound("sim-gpu"), 3.0);
  EXPECT_LE(bound("cpu"), 3.0);
}

}  // namespace
}  // namespace disc::engine
