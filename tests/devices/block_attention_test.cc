// Block attention (forward and backward) against the reference kernels of the attention ops,
// which loop one query row at a time in double: causal and not, f32 and f64, sizes around the
// block of query rows (1, primes, 63, 64, 65, several blocks), a head size of 1, keys longer and
// shorter than the queries, no keys, and enough keys that the heads split into several chunks.
// Outputs and gradients start as NaN, so a value left unwritten shows; a second run must give
// the same bits.
#include "devices/cpu/block_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/ops/kernels.h"
#include "tests/devices/host_tensors.h"

namespace disc::devices {
namespace {

using testing::expect_close;
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

template <typename T>
std::vector<T> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-2, 2);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(rng));
  return v;
}

// The operands and results of one case, and the reference kernels' answers.
template <typename T>
struct Problem {
  AttentionCase c;
  std::vector<T> q, k, v, dy;
  std::vector<T> out, dq, dk, dv;  // the reference's
  ir::Attributes attrs;

  explicit Problem(const AttentionCase& c_) : c(c_) {
    const uint32_t seed = static_cast<uint32_t>(c.heads * 7919 + c.sq * 131 + c.sk * 17 + c.d);
    q = random_values<T>(c.heads * c.sq * c.d, seed);
    k = random_values<T>(c.heads * c.sk * c.d, seed + 1);
    v = random_values<T>(c.heads * c.sk * c.dv, seed + 2);
    dy = random_values<T>(c.heads * c.sq * c.dv, seed + 3);
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

class BlockAttention : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(BlockAttention, F32MatchesReference) {
  check_case<float>(GetParam(), 2e-5);
}
TEST_P(BlockAttention, F64MatchesReference) {
  check_case<double>(GetParam(), 1e-12);
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
