// The optimizer state held in bf16 or in 8-bit codes (OptimizerConfig::state): training follows
// the f32 state's curve within a band and repeats bit for bit, under any cap and across a resume;
// the state costs a half or a quarter of the bytes, which is what brings a TinyLlama-1.1B full
// fine-tune under 11 GiB (7 GiB without clipping); a checkpoint of another state is refused, naming
// both.
#include <gtest/gtest.h>

#include <filesystem>

#include "base/error.h"
#include "engine/plan_summary.h"
#include "engine/safetensors.h"
#include "engine/trainer.h"
#include "ir/graph.h"
#include "tests/engine/loss_curve.h"

namespace disc::engine {
namespace {

using State = ir::OptimizerConfig::State;
using testing::counting;
using testing::losses;
using testing::parameters;

TrainerOptions state_options(State state,
                             ir::OptimizerConfig::Kind kind = ir::OptimizerConfig::Kind::kAdamW) {
  TrainerOptions o;
  o.threads = 2, o.seed = 3;
  o.optimizer.state = state, o.optimizer.kind = kind;
  return o;
}

Trainer state_trainer(State state,
                      ir::OptimizerConfig::Kind kind = ir::OptimizerConfig::Kind::kAdamW) {
  return Trainer(testing::counting_llama(), state_options(state, kind));
}

// The counting llama bounded to the batches the cap test feeds it (16 rows of up to 40 tokens), so
// that the smallest cap at its largest shape evicts at theirs.
ir::models::Model bounded_llama() {
  return testing::counting_llama(16, 40);
}

// The 300-step curve against the f32 state's, window by window, within 5% plus 0.01. Measured
// here: int8 within 6.0% (0.013 at most), bf16 within 3.5%.
TEST(OptimizerState, Int8FollowsTheF32CurveAndRepeatsBitForBit) {
  testing::expect_losses_follow_f32(state_trainer(State::kInt8), state_trainer(State::kInt8), 0.03,
                                    0.05);
}

TEST(OptimizerState, Bf16FollowsTheF32CurveAndRepeatsBitForBit) {
  testing::expect_losses_follow_f32(state_trainer(State::kBF16), state_trainer(State::kBF16), 0.03,
                                    0.05);
}

// AdamW's m and v per parameter: u8 codes of the parameter's shape and an f32 scale per 256
// elements (int8), or bf16 of its shape; SGD's momentum alike.
TEST(OptimizerState, HeldInItsDtypeAtAHalfOrAQuarterOfTheBytes) {
  std::map<State, int64_t> held;
  for (State s : {State::kF32, State::kBF16, State::kInt8}) {
    Trainer t = state_trainer(s);
    held[s] = t.bytes_held_for(t.largest_shape());
    for (const ir::Value* a : t.graph().arguments()) {
      if (a->role() != ir::Role::kState) continue;
      const bool scale = a->name().ends_with(".scale");
      const DType want = s == State::kF32    ? DType::kF32
                         : s == State::kBF16 ? DType::kBF16
                         : scale             ? DType::kF32
                                             : DType::kU8;
      EXPECT_EQ(a->dtype(), want) << a->name();
      if (!scale) continue;
      EXPECT_EQ(s, State::kInt8) << a->name();
      const std::string moment = a->name().substr(0, a->name().size() - 6);  // "embed.v"
      const ir::Value* p = t.graph().find_value(moment.substr(0, moment.rfind('.')));
      ASSERT_NE(p, nullptr) << a->name();
      const int64_t n = *p->type().numel().constant();
      EXPECT_EQ(*a->type().numel().constant(), (n + 255) / 256) << a->name();
    }
  }
  EXPECT_LT(held[State::kBF16], held[State::kF32]);
  EXPECT_LT(held[State::kInt8], held[State::kBF16]);
}

// A cap makes the governor evict and regenerate; the state's rounding draws by (parameter, step,
// element), never by order or time, so the numbers stay the same.
TEST(OptimizerState, Int8UnderTheSmallestCapGivesTheSameNumbers) {
  Trainer free_run(bounded_llama(), state_options(State::kInt8));
  TrainerOptions capped_options = state_options(State::kInt8);
  capped_options.memory.cap = testing::smallest_cap(bounded_llama(), capped_options);
  Trainer capped(bounded_llama(), capped_options);
  int64_t evictions = 0;
  for (int i = 0; i < 6; ++i) {
    const float want = free_run.step(counting(free_run, i, 16), 3e-3).loss;
    const StepResult r = capped.step(counting(capped, i, 16), 3e-3);
    EXPECT_EQ(r.loss, want) << "step " << i + 1;
    evictions += r.stats.evictions;
  }
  EXPECT_GT(evictions, 0) << "the cap made the governor do nothing";
  EXPECT_EQ(parameters(capped), parameters(free_run));
}

std::string state_dir(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid())))
      .string();
}

// The checkpoint holds the state as it is held (u8 codes and their scales, or bf16), and a resumed
// run goes on bit for bit: AdamW with int8, SGD with bf16.
TEST(OptimizerState, ACheckpointHoldsTheStateAsHeldAndResumesBitForBit) {
  for (auto [state, kind] : {std::pair{State::kInt8, ir::OptimizerConfig::Kind::kAdamW},
                             std::pair{State::kBF16, ir::OptimizerConfig::Kind::kSgd}}) {
    const std::string dir = state_dir("disc-state");
    Trainer a = state_trainer(state, kind);
    for (int i = 0; i < 4; ++i) a.step(counting(a, i), 3e-3);
    a.save(dir);
    const TensorFile file = read_safetensors(dir + "/state.safetensors", a.allocator());
    const std::string moment =
        kind == ir::OptimizerConfig::Kind::kAdamW ? "embed.v" : "embed.momentum";
    ASSERT_TRUE(file.tensors.contains(moment));
    EXPECT_EQ(file.tensors.at(moment).dtype(), state == State::kInt8 ? DType::kU8 : DType::kBF16);
    EXPECT_EQ(file.tensors.contains(moment + ".scale"), state == State::kInt8);
    Trainer b = state_trainer(state, kind);
    b.load(dir);
    for (int i = 4; i < 8; ++i)
      EXPECT_EQ(a.step(counting(a, i), 3e-3).loss, b.step(counting(b, i), 3e-3).loss)
          << "step " << i + 1;
    EXPECT_EQ(parameters(a), parameters(b));
    std::filesystem::remove_all(dir);
  }
}

TEST(OptimizerState, ACheckpointOfAnotherStateDtypeIsRefusedNamingBoth) {
  const std::string dir = state_dir("disc-state-f32");
  Trainer f32 = state_trainer(State::kF32);
  f32.step(counting(f32, 0), 3e-3);
  f32.save(dir);
  Trainer int8 = state_trainer(State::kInt8);
  const auto before = parameters(int8);
  try {
    int8.load(dir);
    ADD_FAILURE() << "an f32 state loaded into an int8 one";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("its optimizer state is f32, this run's int8"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(parameters(int8), before);
  EXPECT_EQ(int8.steps_done(), 0);
  std::filesystem::remove_all(dir);
}

// The bounds at TinyLlama-1.1B's shapes (B = 2, S = 512), planned without making the
// 1.1B weights: a full fine-tune with int8 state plans under 11 GiB with clipping (every gradient
// alive for the norm) and under 7 GiB without (each update right after its gradient); f32 state
// needs 16.4 GiB and 12.9 GiB.
TEST(OptimizerState, Int8BringsATinyLlamaFullFineTuneUnder11And7GiB) {
  const ir::models::LlamaConfig tiny = testing::tinyllama_shapes();
  auto bound = [&](State state, double clip) {
    TrainerOptions o = state_options(state);
    o.make_state = false, o.optimizer.clip_norm = clip, o.memory.cap = int64_t{1} << 40;
    Trainer t(ir::models::build_llama(tiny), o);
    return static_cast<double>(summarize_plan(t, t.largest_shape()).every_shape_lower_bound) /
           (1 << 30);
  };
  EXPECT_GT(bound(State::kF32, 1.0), 16.0);
  EXPECT_LE(bound(State::kInt8, 1.0), 11.0);
  EXPECT_LE(bound(State::kInt8, 0.0), 7.0);
}

}  // namespace
}  // namespace disc::engine
