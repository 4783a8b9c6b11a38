// gemm_tril_a against a double-precision loop over tril(A), for both transposes of each
// operand, batches, padded rows, sizes around the block (1, 63, 64, 65, primes, several
// blocks) and both paths: A zero above its diagonal (block GEMMs) and any other A (a copy with
// its upper triangle cleared). NaN above the diagonal blocks shows the block path never reads
// there; NaN after C's rows shows nothing is written outside C.
#include "devices/cpu/tril_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace disc::devices {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// What lies above A's diagonal.
enum class Upper { kZero, kNaNOutsideDiagonalBlocks, kRandom };

struct TrilCase {
  int64_t s, n;
  bool ta, tb;
  Upper upper;
};

struct TrilProblem {
  int64_t batch = 3, s, n, lda, ldb, ldc;
  std::vector<float> a, b, c;
};

bool in_diagonal_block(int64_t r, int64_t c) {
  return r / kTrilBlock == c / kTrilBlock;
}

TrilProblem make_problem(const TrilCase& t) {
  TrilProblem p{.s = t.s, .n = t.n, .lda = t.s + 3, .ldb = (t.tb ? t.s : t.n) + 2, .ldc = t.n + 1};
  std::mt19937 rng(static_cast<uint32_t>(t.s * 31 + t.n));
  std::uniform_real_distribution<float> dist(-1, 1);
  const int64_t rows_b = t.tb ? t.n : t.s, cols_b = t.tb ? t.s : t.n;
  p.a.assign(p.batch * t.s * p.lda, kNaN);
  p.b.assign(p.batch * rows_b * p.ldb, kNaN);
  p.c.assign(p.batch * t.s * p.ldc, kNaN);
  for (int64_t e = 0; e < p.batch; ++e) {
    for (int64_t r = 0; r < t.s; ++r) {
      for (int64_t c = 0; c < t.s; ++c) {
        float v = dist(rng);
        if (c > r && t.upper == Upper::kZero) v = 0;
        if (c > r && t.upper == Upper::kNaNOutsideDiagonalBlocks)
          v = in_diagonal_block(r, c) ? 0 : kNaN;
        p.a[(e * t.s + r) * p.lda + c] = v;
      }
    }
    for (int64_t r = 0; r < rows_b; ++r) {
      for (int64_t c = 0; c < cols_b; ++c) p.b[(e * rows_b + r) * p.ldb + c] = dist(rng);
    }
  }
  return p;
}

// C[e] = op(tril(A[e])) op(B[e]) in double, and the bound on its rounding: the sum of |terms|.
void expected(const TrilCase& t, const TrilProblem& p, int64_t e, int64_t i, int64_t j, double& sum,
              double& magnitude) {
  const int64_t rows_b = t.tb ? t.n : t.s;
  sum = magnitude = 0;
  for (int64_t q = 0; q < t.s; ++q) {
    const int64_t r = t.ta ? q : i, c = t.ta ? i : q;  // A's stored entry
    if (c > r) continue;
    const double a = p.a[(e * t.s + r) * p.lda + c];
    const double b = t.tb ? p.b[(e * rows_b + j) * p.ldb + q] : p.b[(e * rows_b + q) * p.ldb + j];
    sum += a * b;
    magnitude += std::abs(a * b);
  }
}

class TrilGemm : public ::testing::TestWithParam<TrilCase> {};

TEST_P(TrilGemm, MatchesLowerTriangleProduct) {
  const TrilCase& t = GetParam();
  TrilProblem p = make_problem(t);
  auto dev = make_cpu_device(2);
  const int64_t rows_b = t.tb ? t.n : t.s;
  gemm_tril_a(*dev, {.batch = p.batch,
                     .m = t.s,
                     .n = t.n,
                     .k = t.s,
                     .transpose_a = t.ta,
                     .transpose_b = t.tb,
                     .a = p.a.data(),
                     .b = p.b.data(),
                     .c = p.c.data(),
                     .batch_stride_a = t.s * p.lda,
                     .batch_stride_b = rows_b * p.ldb,
                     .batch_stride_c = t.s * p.ldc,
                     .lda = p.lda,
                     .ldb = p.ldb,
                     .ldc = p.ldc});
  for (int64_t e = 0; e < p.batch; ++e) {
    for (int64_t i = 0; i < t.s; ++i) {
      for (int64_t j = 0; j < p.ldc; ++j) {
        const float got = p.c[(e * t.s + i) * p.ldc + j];
        if (j >= t.n) {
          ASSERT_TRUE(std::isnan(got)) << "wrote past C's row " << i << " of entry " << e;
          continue;
        }
        double sum, magnitude;
        expected(t, p, e, i, j, sum, magnitude);
        ASSERT_NEAR(got, sum, 1e-5 * magnitude + 1e-30)
            << "entry " << e << " C[" << i << "," << j << "]";
      }
    }
  }
}

std::vector<TrilCase> cases() {
  std::vector<TrilCase> all;
  for (int64_t s : {1, 2, 63, 64, 65, 97, 130, 200}) {
    for (int tr = 0; tr < 4; ++tr) {
      for (Upper u : {Upper::kZero, Upper::kNaNOutsideDiagonalBlocks, Upper::kRandom}) {
        all.push_back({s, s % 2 ? 17 : 64, bool(tr & 1), bool(tr >> 1), u});
      }
    }
  }
  return all;
}

std::string tril_case_name(const ::testing::TestParamInfo<TrilCase>& info) {
  const TrilCase& t = info.param;
  const char* upper[] = {"zero", "nanoutside", "random"};
  return "s" + std::to_string(t.s) + "_n" + std::to_string(t.n) + "_" + (t.ta ? "T" : "N") +
         (t.tb ? "T" : "N") + "_" + upper[static_cast<int>(t.upper)];
}

INSTANTIATE_TEST_SUITE_P(Sizes, TrilGemm, ::testing::ValuesIn(cases()), tril_case_name);

TEST(TrilGemmArgs, RejectsNonSquareA) {
  auto dev = make_cpu_device(1);
  std::vector<float> x(64);
  try {
    gemm_tril_a(*dev, {.m = 4, .n = 2, .k = 3, .a = x.data(), .b = x.data(), .c = x.data()});
    FAIL() << "a non-square A was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("A must be square, got m=4 k=3"), std::string::npos)
        << e.what();
  }
}

TEST(TrilGemmArgs, F64) {
  // f64 goes through the loop GEMM: the same blocks, checked on one lower-triangular case.
  auto dev = make_cpu_device(1);
  const int64_t s = 70, n = 5;
  std::vector<double> a(s * s, 0), b(s * n), c(s * n, -1);
  for (int64_t r = 0; r < s; ++r) {
    for (int64_t q = 0; q <= r; ++q) a[r * s + q] = 1.0 / (1 + r + q);
  }
  for (int64_t i = 0; i < s * n; ++i) b[i] = (i % 7) - 3;
  gemm_tril_a(
      *dev,
      {.dtype = DType::kF64, .m = s, .n = n, .k = s, .a = a.data(), .b = b.data(), .c = c.data()});
  for (int64_t i = 0; i < s; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t q = 0; q <= i; ++q) want += a[i * s + q] * b[q * n + j];
      ASSERT_NEAR(c[i * n + j], want, 1e-12) << i << "," << j;
    }
  }
}

}  // namespace
}  // namespace disc::devices
