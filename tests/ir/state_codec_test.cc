// The compact optimizer state (ir/ops/state_codec.h) and the updates that hold it
// (adamw_update_compact, sgd_update_compact): every code within one step (9%) of its value, the
// rounding unbiased, zero and non-finite values kept as such; each update f64 AdamW's or SGD's on
// the state its codes stand for, and AdamW near f64 AdamW's over many steps, at awkward sizes (1,
// a prime, one block, a block and one, several); in place as into fresh buffers.
#include "ir/ops/state_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "base/half.h"
#include "kernel_test_util.h"

namespace disc::ir::testing {
namespace {

using state_codec::Sign;

// Values spread over 2^-28..1 in magnitude (with random signs when signed).
std::vector<float> spread(int64_t n, uint64_t seed, Sign sign) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> exponent(-28, 0), coin(0, 1);
  std::vector<float> x(n);
  for (float& v : x) {
    v = static_cast<float>(std::exp2(exponent(rng)));
    if (sign == Sign::kSigned && coin(rng) < 0.5) v = -v;
  }
  return x;
}

std::vector<float> round_trip(const std::vector<float>& x, Sign sign, int64_t step,
                              float* scale = nullptr) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> codes(n);
  const float s = state_codec::encode_block(x.data(), n, sign, codes.data(), 7, step, 0);
  if (scale) *scale = s;
  std::vector<float> back(n);
  state_codec::decode_block(codes.data(), n, s, sign, back.data());
  return back;
}

TEST(StateCodec, EveryCodeIsWithinOneStepOfItsValue) {
  const double one_step = std::exp2(1.0 / 8) - 1;  // 9.05%
  for (Sign sign : {Sign::kSigned, Sign::kUnsigned}) {
    for (int64_t n : {1, 7, 256}) {
      const std::vector<float> x = spread(n, 11 + n, sign);
      float scale = 0;
      const std::vector<float> back = round_trip(x, sign, 1, &scale);
      const double smallest = scale * std::exp2(sign == Sign::kSigned ? -126.0 / 8 : -254.0 / 8);
      for (int64_t i = 0; i < n; ++i) {
        if (std::fabs(x[i]) < smallest) {  // signed: 0 or the smallest code, by chance
          EXPECT_LE(std::fabs(back[i]), smallest * 1.0001) << i;
          continue;
        }
        EXPECT_LE(std::fabs(back[i] - x[i]), one_step * std::fabs(x[i]) * 1.0001)
            << "element " << i << " of " << n << ": " << x[i] << " read back as " << back[i];
        EXPECT_EQ(std::signbit(back[i]), std::signbit(x[i])) << i;
      }
    }
  }
}

// Averaged over many steps' dither, each element reads back as its value: changes smaller than a
// step survive on average, which round-to-nearest would drop.
TEST(StateCodec, RoundingIsUnbiased) {
  for (Sign sign : {Sign::kSigned, Sign::kUnsigned}) {
    const std::vector<float> x = spread(64, 5, sign);
    std::vector<double> mean(x.size(), 0.0);
    const int draws = 4000;
    for (int step = 1; step <= draws; ++step) {
      const std::vector<float> back = round_trip(x, sign, step);
      for (size_t i = 0; i < x.size(); ++i) mean[i] += back[i] / draws;
    }
    float scale = 0;
    round_trip(x, sign, 1, &scale);
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::fabs(x[i]) < scale * std::exp2(-120.0 / 8)) continue;  // the smallest codes
      EXPECT_NEAR(mean[i], x[i], 0.005 * std::fabs(x[i])) << "element " << i;
    }
  }
}

TEST(StateCodec, ZeroStaysZeroASecondMomentNeverBecomesZeroAndNaNSpreadsToItsBlock) {
  EXPECT_EQ(round_trip({0, 0, 0}, Sign::kSigned, 1), (std::vector<float>{0, 0, 0}));
  const std::vector<float> tiny = round_trip({1.0f, 1e-20f, 0}, Sign::kUnsigned, 1);
  EXPECT_GT(tiny[1], 0) << "a nonzero v read back as 0: m / (sqrt(v) + eps) would explode";
  EXPECT_EQ(tiny[2], 0);
  for (float bad : {NAN, INFINITY}) {
    float scale = 0;
    const std::vector<float> back = round_trip({1.0f, bad, -2.0f}, Sign::kSigned, 1, &scale);
    EXPECT_TRUE(std::isnan(scale));
    for (float b : back) EXPECT_TRUE(std::isnan(b));
  }
}

TEST(StateCodec, Bf16RoundsToANeighbourWithoutBias) {
  const float x = 1.0f + 0x1p-10f;  // a quarter of the way from 1 to the next bf16, 1 + 2^-7
  double mean = 0;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) {
    const float r = bf16_to_f32(state_codec::to_bf16_stochastic(x, state_codec::dither(3, 1, i)));
    ASSERT_TRUE(r == 1.0f || r == 1.0f + 0x1p-7f) << r;
    mean += r / draws;
  }
  EXPECT_NEAR(mean, x, 0x1p-7 * 0.02);
  EXPECT_TRUE(std::isnan(bf16_to_f32(state_codec::to_bf16_stochastic(NAN, 0.5f))));
}

// A compact moment as a test tensor: bf16 of n, or u8 codes of n and f32 scales per block.
std::vector<Tensor> held(const std::string& state, int64_t n) {
  if (state == "bf16") return {Tensor({n}, DType::kBF16)};
  return {Tensor({n}, DType::kU8), Tensor({state_codec::blocks_of(n)}, DType::kF32)};
}

// The values a held moment stands for.
std::vector<double> decoded(const std::vector<Tensor>& h, Sign sign) {
  const int64_t n = h[0].numel();
  std::vector<float> x(n);
  if (h[0].dtype == DType::kBF16) {
    for (int64_t i = 0; i < n; ++i) x[i] = bf16_to_f32(h[0].ref().as<uint16_t>()[i]);
  } else {
    for (int64_t b = 0; b < state_codec::blocks_of(n); ++b) {
      const int64_t first = b * state_codec::kBlock;
      state_codec::decode_block(h[0].ref().as<uint8_t>() + first,
                                std::min(state_codec::kBlock, n - first), h[1].ref().as<float>()[b],
                                sign, x.data() + first);
    }
  }
  return {x.begin(), x.end()};
}

// A held moment standing for `values` (rounded as the codec rounds).
std::vector<Tensor> holding(const std::string& state, const std::vector<float>& values, Sign sign) {
  const auto n = static_cast<int64_t>(values.size());
  std::vector<Tensor> h = held(state, n);
  for (int64_t b = 0; b < state_codec::blocks_of(n); ++b) {
    const int64_t first = b * state_codec::kBlock, len = std::min(state_codec::kBlock, n - first);
    if (state == "bf16") {
      for (int64_t i = first; i < first + len; ++i)
        h[0].ref().as<uint16_t>()[i] = f32_to_bf16(values[i]);
    } else {
      h[1].ref().as<float>()[b] = state_codec::encode_block(
          values.data() + first, len, sign, h[0].ref().as<uint8_t>() + first, 1, 1, first);
    }
  }
  return h;
}

std::vector<const Tensor*> operands(const Tensor& p, const Tensor& g,
                                    const std::vector<std::vector<Tensor>*>& state,
                                    const Tensor& lr, const Tensor& step) {
  std::vector<const Tensor*> in = {&p, &g};
  for (const auto* moment : state)
    for (const Tensor& t : *moment) in.push_back(&t);
  in.push_back(&lr), in.push_back(&step);
  return in;
}

// The results after param' as moments of `per` tensors each.
std::vector<std::vector<Tensor>> moments_of(const std::vector<Tensor>& out, size_t per) {
  std::vector<std::vector<Tensor>> m;
  for (size_t k = 1; k < out.size(); k += per)
    m.emplace_back(out.begin() + k, out.begin() + k + per);
  return m;
}

// new is within one code step (int8: 9%; bf16: 2^-7) of want, or below the smallest code.
void expect_within_a_step(const std::vector<double>& got, const std::vector<double>& want,
                          const std::string& state) {
  const double step = state == "bf16" ? 0x1p-7 : std::exp2(1.0 / 8) - 1;
  double largest = 0;
  for (double w : want) largest = std::max(largest, std::fabs(w));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_LE(std::fabs(got[i] - want[i]), step * std::fabs(want[i]) * 1.001 + largest * 2e-5)
        << "element " << i << ": " << got[i] << " for " << want[i];
}

const std::vector<int64_t> kSizes = {1, 13, 256, 257, 1031};

// One step from a random state: param' is f64 AdamW's from the state the codes stand for (to f32
// rounding), and the new moments stand for f64 AdamW's within one code step.
TEST(CompactUpdates, AdamWStepIsAdamWOnTheHeldStateWithinOneCodeStep) {
  const double lr = 1e-2, wd = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  const int t = 7;
  for (const std::string state : {"bf16", "int8"}) {
    for (int64_t n : kSizes) {
      SCOPED_TRACE(state + ", " + std::to_string(n) + " elements");
      const Tensor p = random_tensor({n}, 1, DType::kF32), g = random_tensor({n}, 2, DType::kF32);
      std::vector<float> m0 = spread(n, 3, Sign::kSigned), v0 = spread(n, 4, Sign::kUnsigned);
      std::vector<Tensor> m = holding(state, m0, Sign::kSigned),
                          v = holding(state, v0, Sign::kUnsigned);
      const Tensor lr_t({}, {lr}, DType::kF32), step({}, {double{t}}, DType::kI64);
      const auto out = run("adamw_update_compact",
                           {{"state", state}, {"salt", int64_t{99}}, {"weight_decay", wd}},
                           operands(p, g, {&m, &v}, lr_t, step));
      const auto next = moments_of(out, m.size());
      const std::vector<double> md = decoded(m, Sign::kSigned), vd = decoded(v, Sign::kUnsigned);
      std::vector<double> want_m(n), want_v(n);
      for (int64_t i = 0; i < n; ++i) {
        want_m[i] = b1 * md[i] + (1 - b1) * g.get(i);
        want_v[i] = b2 * vd[i] + (1 - b2) * g.get(i) * g.get(i);
        const double want_p =
            p.get(i) * (1 - lr * wd) - lr / (1 - std::pow(b1, t)) * want_m[i] /
                                           (std::sqrt(want_v[i] / (1 - std::pow(b2, t))) + eps);
        EXPECT_NEAR(out[0].get(i), want_p, 1e-6 * (1 + std::fabs(want_p))) << "element " << i;
      }
      expect_within_a_step(decoded(next[0], Sign::kSigned), want_m, state);
      expect_within_a_step(decoded(next[1], Sign::kUnsigned), want_v, state);
    }
  }
}

TEST(CompactUpdates, SgdStepIsSgdOnTheHeldMomentumWithinOneCodeStep) {
  const double lr = 1e-2, wd = 0.1, momentum = 0.9;
  for (const std::string state : {"bf16", "int8"}) {
    for (int64_t n : kSizes) {
      SCOPED_TRACE(state + ", " + std::to_string(n) + " elements");
      const Tensor p = random_tensor({n}, 5, DType::kF32), g = random_tensor({n}, 6, DType::kF32);
      std::vector<Tensor> buf = holding(state, spread(n, 7, Sign::kSigned), Sign::kSigned);
      const Tensor lr_t({}, {lr}, DType::kF32), step({}, {3}, DType::kI64);
      const auto out =
          run("sgd_update_compact", {{"state", state}, {"weight_decay", wd}, {"nesterov", true}},
              operands(p, g, {&buf}, lr_t, step));
      const std::vector<double> bd = decoded(buf, Sign::kSigned);
      std::vector<double> want_b(n);
      for (int64_t i = 0; i < n; ++i) {
        const double d = g.get(i) + wd * p.get(i);
        want_b[i] = momentum * bd[i] + d;
        const double want_p = p.get(i) - lr * (d + momentum * want_b[i]);
        EXPECT_NEAR(out[0].get(i), want_p, 1e-6 * (1 + std::fabs(want_p))) << "element " << i;
      }
      expect_within_a_step(decoded(moments_of(out, buf.size())[0], Sign::kSigned), want_b, state);
    }
  }
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.numel() == b.numel() &&
         std::memcmp(a.storage.data(), b.storage.data(), a.numel() * dtype_size(a.dtype)) == 0;
}

// f64 AdamW, as PyTorch's formula states it.
struct Adam {
  double p, m = 0, v = 0;
  void step(double g, int t, double lr, double wd) {
    p *= 1 - lr * wd;
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    p -= lr * (m / (1 - std::pow(0.9, t))) / (std::sqrt(v / (1 - std::pow(0.999, t))) + 1e-8);
  }
};

// 40 steps from zero on gradients of magnitudes 1e-4..1, where each step may move a parameter by
// about lr: every parameter stays within 0.5 lr (bf16) or 3 lr (int8) of f64 AdamW's, as the
// rounding errors, unbiased, mostly cancel; and the kernel repeats its bits.
TEST(CompactUpdates, AdamWStaysNearF64AdamWOverManySteps) {
  const double lr = 1e-2, wd = 0.01;
  for (const std::string state : {"bf16", "int8"}) {
    for (int64_t n : kSizes) {
      SCOPED_TRACE(state + ", " + std::to_string(n) + " elements");
      Tensor p = random_tensor({n}, 1, DType::kF32);
      std::vector<Adam> want;
      for (int64_t i = 0; i < n; ++i) want.push_back({p.get(i)});
      std::vector<Tensor> m = held(state, n), v = held(state, n);
      const Attributes attrs{{"state", state}, {"salt", int64_t{99}}, {"weight_decay", wd}};
      const Tensor lr_t({}, {lr}, DType::kF32);
      std::mt19937_64 rng(n);
      std::uniform_real_distribution<double> e(-4, 0);
      for (int t = 1; t <= 40; ++t) {
        Tensor g = random_tensor({n}, 100 + t, DType::kF32);
        for (int64_t i = 0; i < n; ++i) g.set(i, g.get(i) * std::pow(10.0, e(rng)));
        const Tensor step({}, {static_cast<double>(t)}, DType::kI64);
        const auto out = run("adamw_update_compact", attrs, operands(p, g, {&m, &v}, lr_t, step));
        const auto again = run("adamw_update_compact", attrs, operands(p, g, {&m, &v}, lr_t, step));
        for (size_t k = 0; k < out.size(); ++k) ASSERT_TRUE(same_bytes(out[k], again[k])) << k;
        for (int64_t i = 0; i < n; ++i) want[i].step(g.get(i), t, lr, wd);
        p = out[0];
        const auto next = moments_of(out, m.size());
        m = next[0], v = next[1];
      }
      const double band = state == "bf16" ? 0.5 * lr : 3 * lr;
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(p.get(i), want[i].p, band) << i;
    }
  }
}

// The executor runs the update in place (each result over the operand it replaces): the same bits
// as into fresh buffers.
TEST(CompactUpdates, InPlaceEqualsFreshBuffers) {
  const int64_t n = 300;
  const OpDef& def = OpRegistry::instance().get("adamw_update_compact");
  Attributes attrs{{"state", std::string("int8")}};
  ASSERT_EQ(apply_attr_schema(attrs, def.attrs), "");
  Tensor p = random_tensor({n}, 3, DType::kF32), g = random_tensor({n}, 4, DType::kF32);
  const Tensor lr({}, {1e-2}, DType::kF32), step({}, {2}, DType::kI64);
  std::vector<Tensor> m = holding("int8", spread(n, 8, Sign::kSigned), Sign::kSigned),
                      v = holding("int8", spread(n, 9, Sign::kUnsigned), Sign::kUnsigned);
  const auto fresh = run(def.name, attrs, operands(p, g, {&m, &v}, lr, step));
  const std::vector<const Tensor*> in = operands(p, g, {&m, &v}, lr, step);
  Bindings bindings;
  KernelArgs args{.op = def.name, .attrs = &attrs, .bindings = &bindings};
  for (const Tensor* t : in) args.in.push_back(t->ref());
  for (size_t k = 0; k + 3 < in.size(); ++k) args.out.push_back(args.in[k == 0 ? 0 : k + 1]);
  def.reference(args);
  EXPECT_TRUE(same_bytes(p, fresh[0]));
  for (size_t k = 0; k < 4; ++k)
    EXPECT_TRUE(same_bytes(*in[2 + k], fresh[1 + k])) << "state tensor " << k;
}

}  // namespace
}  // namespace disc::ir::testing
