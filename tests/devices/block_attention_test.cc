// Block attention (forward and backward) against the reference kernels of the attention ops,
// which loop one query row at a time in double: causal and not, f32 and f64, sizes around the
// block of query rows (1, primes, 63, 64, 65, several blocks), a head size of 1, keys longer and
// shorter than the queries, no keys, and enough keys that the heads split into several chunks.
// Outputs and gradients start as NaN, so a value left unwritten shows; a second run must give
// the same bits. bf16, on the CPU's bf16 dot products and widened to f32, within bf16 rounding of
// the reference on the same (rounded) inputs.
#include "devices/cpu/block_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/half.h"
#include "devices/cpu/cpu_device.h"
#include "ir/attribute.h"
#include "ir/ops/kernels.h"
#include "tests/devices/host_tensors.h"

namespace disc::devices {
namespace {

using testing::expect_close;
using testing::random_values;
using testing::ref;

struct AttentionCase {
  int64_t heads, sq, sk, d, dv;
  bool causal;
};

std::string attention_case_name(const ::testing::TestParamInfo<AttentionCase>& info) {
  const AttentionCase& c = info.param;
  return std::to_string(c.heads) + "h_" + std::to_string(c.sq) + "x" + std::to_string(c.sk) + "_d" +
         std::to_string(c.d) + "_dv" + std::to_string(c.dv) + (c.causal ? "_causal" : "_full");
}

// The operands and results of one case, and the reference kernels' answers.
template <typename T>
struct Problem {
  AttentionCase c;
  std::vector<T> q, k, v, dy;
  std::vector<T> out, dq, dk, dv;  // the reference's
  ir::Attributes attrs;

  // bf16: the operands are values bf16 holds exactly.
  explicit Problem(const AttentionCase& c_, bool bf16 = false) : c(c_) {
    const uint32_t seed = static_cast<uint32_t>(c.heads * 7919 + c.sq * 131 + c.sk * 17 + c.d);
    q = random_values<T>(c.heads * c.sq * c.d, seed);
    k = random_values<T>(c.heads * c.sk * c.d, seed + 1);
    v = random_values<T>(c.heads * c.sk * c.dv, seed + 2);
    dy = random_values<T>(c.heads * c.sq * c.dv, seed + 3);
    for (auto* x : {&q, &k, &v, &dy}) {
      for (T& e : *x) e = bf16 ? static_cast<T>(bf16_to_f32(f32_to_bf16(float(e)))) : e;
    }
    attrs.set("causal", c.causal);
    attrs.set("scale", 0.4);
    out.resize(c.heads * c.sq * c.dv), dq.resize(q.size()), dk.resize(k.size()),
        dv.resize(v.size());
    ir::KernelArgs fwd{.op = "attention", .attrs = &attrs};
    fwd.in = {ref(q, {c.heads, c.sq, c.d}), ref(k, {c.heads, c.sk, c.d}),
              ref(v, {c.heads, c.sk, c.dv})};
    fwd.out = {ref(out, {c.heads, c.sq, c.dv})};
    ir::attention_kernel(fwd);
    ir::KernelArgs bwd{.op = "attention_grad", .attrs = &attrs};
    bwd.in = {fwd.in[0], fwd.in[1], fwd.in[2], ref(dy, {c.heads, c.sq, c.dv})};
    bwd.out = {ref(dq, {c.heads, c.sq, c.d}), ref(dk, {c.heads, c.sk, c.d}),
               ref(dv, {c.heads, c.sk, c.dv})};
    ir::attention_grad_kernel(bwd);
  }

  AttentionArgs args() const {
    return {.dtype = std::is_same_v<T, double> ? DType::kF64 : DType::kF32,
            .heads = c.heads,
            .sq = c.sq,
            .sk = c.sk,
            .d = c.d,
            .dv = c.dv,
            .causal = c.causal,
            .scale = 0.4,
            .q = q.data(),
            .k = k.data(),
            .v = v.data()};
  }
};

template <typename T>
void check_case(const AttentionCase& c, double tol) {
  auto dev = make_cpu_device(2);
  const Problem<T> p(c);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> out(p.out.size(), nan), dq(p.dq.size(), nan), dk(p.dk.size(), nan),
      dv(p.dv.size(), nan);
  attention_forward(*dev, p.args(), out.data());
  expect_close(out, p.out, tol, "out");
  attention_backward(*dev, p.args(), p.dy.data(), dq.data(), dk.data(), dv.data());
  expect_close(dq, p.dq, tol, "dq");
  expect_close(dk, p.dk, tol, "dk");
  expect_close(dv, p.dv, tol, "dv");

  std::vector<T> again(out.size()), dq2(dq.size()), dk2(dk.size()), dv2(dv.size());
  attention_forward(*dev, p.args(), again.data());
  attention_backward(*dev, p.args(), p.dy.data(), dq2.data(), dk2.data(), dv2.data());
  EXPECT_EQ(again, out);
  EXPECT_EQ(dq2, dq);
  EXPECT_EQ(dk2, dk);
  EXPECT_EQ(dv2, dv);
}

// bf16 attention on `dev` against the f32 reference on the same values, and the same bits run to
// run. Widened, each result is rounded once: within a unit of bf16. On bf16 dot products P and
// dS are rounded to bf16 for the GEMMs that read them (as FlashAttention does), and dQ and dK sum
// rounded terms far larger than their sum here (scores up to 30 and terms up to 4 for results near
// 0.1): within four units.
void check_bf16(Device& dev, const AttentionCase& c, double grad_tol) {
  const Problem<float> p(c, /*bf16=*/true);
  const auto q = testing::to_bf16(p.q), k = testing::to_bf16(p.k), v = testing::to_bf16(p.v),
             dy = testing::to_bf16(p.dy);
  AttentionArgs a = p.args();
  a.dtype = DType::kBF16, a.q = q.data(), a.k = k.data(), a.v = v.data();
  auto run = [&] {
    std::vector<uint16_t> out(p.out.size(), 0x7fc0), dq(p.dq.size(), 0x7fc0),
        dk(p.dk.size(), 0x7fc0), dv(p.dv.size(), 0x7fc0);  // NaN
    attention_forward(dev, a, out.data());
    attention_backward(dev, a, dy.data(), dq.data(), dk.data(), dv.data());
    return std::vector<std::vector<uint16_t>>{out, dq, dk, dv};
  };
  const auto got = run();
  const double tol = 0x1p-7;
  expect_close(testing::from_bf16(got[0]), p.out, tol, "out");
  expect_close(testing::from_bf16(got[1]), p.dq, grad_tol, "dq");
  expect_close(testing::from_bf16(got[2]), p.dk, grad_tol, "dk");
  expect_close(testing::from_bf16(got[3]), p.dv, tol, "dv");
  EXPECT_EQ(run(), got);
}

class BlockAttention : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(BlockAttention, F32MatchesReference) {
  check_case<float>(GetParam(), 2e-5);
}
TEST_P(BlockAttention, F64MatchesReference) {
  check_case<double>(GetParam(), 1e-12);
}
TEST_P(BlockAttention, Bf16OnBf16DotProductsMatchesReference) {
  cpu::CpuDevice dev(2);
  if (!dev.has_16bit_dot(DType::kBF16)) GTEST_SKIP() << "this CPU has no bf16 dot products";
  check_bf16(dev, GetParam(), 0x1p-5);
}
TEST_P(BlockAttention, Bf16WidenedMatchesReference) {
  cpu::CpuDevice dev(2, /*bf16_dot=*/false);
  check_bf16(dev, GetParam(), 0x1p-7);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, BlockAttention,
    ::testing::Values(AttentionCase{1, 1, 1, 1, 1, true}, AttentionCase{2, 7, 7, 5, 3, true},
                      AttentionCase{3, 63, 63, 8, 8, true}, AttentionCase{2, 64, 64, 16, 16, true},
                      AttentionCase{2, 65, 65, 16, 9, true},
                      AttentionCase{2, 131, 131, 64, 64, true},
                      AttentionCase{1, 300, 300, 32, 32, true},
                      AttentionCase{2, 13, 29, 8, 5, false}, AttentionCase{3, 70, 1, 4, 4, false},
                      AttentionCase{2, 1, 130, 8, 8, false}, AttentionCase{2, 67, 67, 1, 1, false},
                      AttentionCase{2, 0, 5, 4, 4, false}, AttentionCase{2, 3, 0, 4, 4, false},
                      AttentionCase{0, 5, 5, 4, 4, true},
                      // 2 heads per chunk: 3 chunks
                      AttentionCase{5, 3, 4099, 4, 4, false}),
    attention_case_name);

// Packed sequences: `lengths` one after another in one stream of T rows per head (blocks of rows
// that span several sequences, and sequences that span several blocks). Checked three ways: against
// the reference kernels given the same offsets, against each sequence run alone (block attention
// over just its rows, causal), and run to run bit for bit.
void check_packed(const std::vector<int64_t>& lengths, int64_t heads, int64_t d,
                  bool causal = true) {
  auto dev = make_cpu_device(2);
  std::vector<int64_t> offsets = {0};
  for (int64_t len : lengths) offsets.push_back(offsets.back() + len);
  const int64_t t = offsets.back();
  std::vector<float> q = random_values<float>(heads * t * d, 11),
                     k = random_values<float>(heads * t * d, 12),
                     v = random_values<float>(heads * t * d, 13),
                     dy = random_values<float>(heads * t * d, 14);
  std::vector<int32_t> offsets32(offsets.begin(), offsets.end());
  ir::Attributes attrs;
  attrs.set("causal", causal);
  attrs.set("scale", 0.4);
  const size_t n = q.size();
  std::vector<float> ref_out(n), ref_dq(n), ref_dk(n), ref_dv(n);
  ir::KernelArgs fwd{.op = "attention", .attrs = &attrs};
  fwd.in = {ref(q, {heads, t, d}), ref(k, {heads, t, d}), ref(v, {heads, t, d}),
            ref(offsets32, {static_cast<int64_t>(offsets.size())})};
  fwd.out = {ref(ref_out, {heads, t, d})};
  ir::attention_kernel(fwd);
  ir::KernelArgs bwd{.op = "attention_grad", .attrs = &attrs};
  bwd.in = {fwd.in[0], fwd.in[1], fwd.in[2], ref(dy, {heads, t, d}), fwd.in[3]};
  bwd.out = {ref(ref_dq, {heads, t, d}), ref(ref_dk, {heads, t, d}), ref(ref_dv, {heads, t, d})};
  ir::attention_grad_kernel(bwd);

  AttentionArgs a{.heads = heads,
                  .sq = t,
                  .sk = t,
                  .d = d,
                  .dv = d,
                  .causal = causal,
                  .scale = 0.4,
                  .q = q.data(),
                  .k = k.data(),
                  .v = v.data(),
                  .offsets = offsets.data(),
                  .sequences = static_cast<int64_t>(lengths.size())};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> out(n, nan), dq(n, nan), dk(n, nan), dv(n, nan);
  attention_forward(*dev, a, out.data());
  attention_backward(*dev, a, dy.data(), dq.data(), dk.data(), dv.data());
  expect_close(out, ref_out, 2e-5, "out");
  expect_close(dq, ref_dq, 2e-5, "dq");
  expect_close(dk, ref_dk, 2e-5, "dk");
  expect_close(dv, ref_dv, 2e-5, "dv");

  // Each sequence alone: its rows of every head, as an unpacked causal attention.
  for (size_t s = 0; s < lengths.size(); ++s) {
    const int64_t len = lengths[s], at = offsets[s];
    auto rows_of = [&](const std::vector<float>& x) {
      std::vector<float> r;
      for (int64_t h = 0; h < heads; ++h)
        r.insert(r.end(), x.begin() + (h * t + at) * d, x.begin() + (h * t + at + len) * d);
      return r;
    };
    std::vector<float> sq = rows_of(q), sk = rows_of(k), sv = rows_of(v), sdy = rows_of(dy);
    AttentionArgs alone{.heads = heads,
                        .sq = len,
                        .sk = len,
                        .d = d,
                        .dv = d,
                        .causal = causal,
                        .scale = 0.4,
                        .q = sq.data(),
                        .k = sk.data(),
                        .v = sv.data()};
    std::vector<float> o(sq.size()), gq(sq.size()), gk(sq.size()), gv(sq.size());
    attention_forward(*dev, alone, o.data());
    attention_backward(*dev, alone, sdy.data(), gq.data(), gk.data(), gv.data());
    expect_close(rows_of(out), o, 1e-6, "sequence " + std::to_string(s) + " out");
    expect_close(rows_of(dq), gq, 1e-6, "sequence " + std::to_string(s) + " dq");
    expect_close(rows_of(dk), gk, 1e-6, "sequence " + std::to_string(s) + " dk");
    expect_close(rows_of(dv), gv, 1e-6, "sequence " + std::to_string(s) + " dv");
  }

  std::vector<float> again(n), dq2(n), dk2(n), dv2(n);
  attention_forward(*dev, a, again.data());
  attention_backward(*dev, a, dy.data(), dq2.data(), dk2.data(), dv2.data());
  EXPECT_EQ(again, out);
  EXPECT_EQ(dq2, dq);
  EXPECT_EQ(dk2, dk);
  EXPECT_EQ(dv2, dv);
}

TEST(BlockAttention, PackedSequencesOfOneToken) {
  check_packed({1, 1, 1, 1, 1}, 3, 4);
}
TEST(BlockAttention, PackedOneSequence) {
  check_packed({131}, 2, 16);
}
TEST(BlockAttention, PackedHundredPrimeLengths) {
  std::vector<int64_t> primes;
  for (int64_t p = 2; primes.size() < 100; ++p) {
    bool prime = true;
    for (int64_t f = 2; f * f <= p; ++f) prime = prime && p % f != 0;
    if (prime) primes.push_back(p % 97 + 1);  // lengths 1 to 97, past one block of rows
  }
  check_packed(primes, 2, 8);
}
TEST(BlockAttention, PackedSequenceAtMaxLen) {
  check_packed({3, 512, 1, 64, 65}, 2, 16);
}

TEST(BlockAttention, PackedWithoutTheCausalMask) {
  check_packed({1, 70, 2, 130, 5, 64}, 3, 8, false);
}

TEST(BlockAttention, RejectsBadOffsets) {
  auto dev = make_cpu_device(1);
  float x[16] = {};
  int64_t offsets[] = {0, 3, 2, 4};
  AttentionArgs a{.heads = 1,
                  .sq = 4,
                  .sk = 4,
                  .d = 1,
                  .dv = 1,
                  .q = x,
                  .k = x,
                  .v = x,
                  .offsets = offsets,
                  .sequences = 3};
  EXPECT_THROW(attention_forward(*dev, a, x), InvalidArgument);  // decreasing
  offsets[2] = 3, offsets[3] = 5;
  EXPECT_THROW(attention_forward(*dev, a, x), InvalidArgument);  // past sq
}

TEST(BlockAttention, ChunksHoldAtMostTheWorkspace) {
  AttentionArgs a{.heads = 100, .sq = 512, .sk = 512, .d = 64, .dv = 64};
  EXPECT_EQ(attention_chunk(a), kAttentionWorkspace / (2 * kAttentionRows * 512 * 4));
  a.sk = a.sq = 1 << 20;
  EXPECT_EQ(attention_chunk(a), 1);  // one head, even when it alone needs more
  a.sk = a.sq = 1, a.heads = 3;
  EXPECT_EQ(attention_chunk(a), 3);
}

TEST(BlockAttention, RejectsWhatItCannotRun) {
  auto dev = make_cpu_device(1);
  float x[8] = {};
  AttentionArgs a{
      .heads = 1, .sq = 2, .sk = 3, .d = 1, .dv = 1, .causal = true, .q = x, .k = x, .v = x};
  EXPECT_THROW(attention_forward(*dev, a, x), InvalidArgument);  // causal needs sq == sk
  a.causal = false, a.dtype = DType::kI32;
  EXPECT_THROW(attention_forward(*dev, a, x), InvalidArgument);
  a.dtype = DType::kF32, a.d = -1;
  EXPECT_THROW(attention_backward(*dev, a, x, x, x, x), InvalidArgument);
}

}  // namespace
}  // namespace disc::devices
