// Reference kernels of the layout ops that copy in runs (transpose, reshape) against the
// element-by-element index arithmetic they replace: every permutation of rank 1..4, on sizes 1,
// primes and sizes that split into many threads' chunks, in dtypes of 4 and 8 bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "kernel_test_util.h"

namespace disc::ir::testing {
namespace {

// The element of `x` that transpose(x, perm) holds at flat output index `o`.
double transposed_at(const Tensor& x, const std::vector<int64_t>& perm, int64_t o) {
  std::vector<int64_t> out_shape;
  for (int64_t p : perm) out_shape.push_back(x.shape[p]);
  const auto in_strides = row_major_strides(x.shape), out_strides = row_major_strides(out_shape);
  int64_t src = 0;
  for (size_t i = 0; i < perm.size(); ++i)
    src += (o / out_strides[i] % out_shape[i]) * in_strides[perm[i]];
  return x.get(src);
}

TEST(LayoutKernels, TransposeEveryPermutationOnAwkwardShapes) {
  const std::vector<std::vector<int64_t>> shapes = {{7},          {1, 5},         {3, 1, 2},
                                                    {2, 3, 5, 7}, {1, 13, 1, 64}, {5, 97, 3, 11}};
  for (DType t : {DType::kF32, DType::kI64}) {
    for (const auto& shape : shapes) {
      const Tensor x = random_tensor(shape, 7, t, -50, 50);
      std::vector<int64_t> perm(shape.size());
      std::iota(perm.begin(), perm.end(), 0);
      do {
        const Tensor y = run("transpose", {{"perm", perm}}, {&x})[0];
        ASSERT_EQ(y.numel(), x.numel());
        for (int64_t o = 0; o < y.numel(); ++o)
          ASSERT_EQ(y.get(o), transposed_at(x, perm, o))
              << "perm " << ::testing::PrintToString(perm) << " at " << o;
      } while (std::next_permutation(perm.begin(), perm.end()));
    }
  }
}

TEST(LayoutKernels, ReshapeCopiesEveryByteAcrossChunks) {
  for (int64_t n : {1, 2, 65537, 3 * 65536 + 5}) {
    const Tensor x = random_tensor({n}, 3, DType::kF32);
    const Tensor y = run("reshape", {{"shape", std::vector<DimExpr>{1, n}}}, {&x})[0];
    ASSERT_EQ(y.shape, (std::vector<int64_t>{1, n}));
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y.get(i), x.get(i)) << "n " << n << " at " << i;
  }
}

}  // namespace
}  // namespace disc::ir::testing
