// The GPU kernels' launches and their compiler's cache, which need no GPU; with one (cuda:0 or
// hip:0), every pattern runs on it against the interpreter.
#include "jit/gpu/gpu_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "devices/cuda/cuda_device.h"
#include "devices/hip/hip_device.h"
#include "ir/text_format.h"
#include "jit/fusion/fused_op.h"
#include "jit/fusion/fusion.h"
#include "tests/jit/host_gpu_runtime.h"
#include "tests/jit/kernel_check.h"
#include "tests/jit/pattern_kernels.h"
#include "tests/jit/scratch_dir.h"

namespace disc::jit {
namespace {

TEST(GpuLaunches, TotalsRowsAndSumsInOrderWithTheirGrids) {
  // The mean cross-entropy: totals (the count of counted labels), rows in groups of
  // kSumBlockRows, one sum.
  const CudaKernelSource mean =
      emit_cuda_kernel(KernelIR::parse(kCrossEntropyMean), kAnyExtent, "k");
  std::vector<GpuLaunch> l = gpu_launches(mean, 1000, 32000, 264);
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0].function, "k_totals");
  EXPECT_EQ(l[0].shape.grid, 1u);
  EXPECT_EQ(l[1].function, "k");
  const int64_t groups = (1000 + kSumBlockRows - 1) / kSumBlockRows;
  EXPECT_EQ(l[1].shape.grid, static_cast<unsigned>(groups));
  EXPECT_EQ(l[2].function, "k_sums");
  EXPECT_EQ(l[2].shape.grid, 1u);  // one summed float
  EXPECT_EQ(gpu_sums_floats(mean, 1000, 32000), groups);
  // Softmax: a block per row, at most max_blocks; nothing to total or sum; no rows, no launch.
  const CudaKernelSource softmax = emit_cuda_kernel(KernelIR::parse(kSoftmax), kAnyExtent, "s");
  l = gpu_launches(softmax, 100000, 7, 264);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].shape.grid, 264u);
  EXPECT_EQ(l[0].shape.block, 256u);
  EXPECT_TRUE(gpu_launches(softmax, 0, 7, 264).empty());
  EXPECT_EQ(gpu_launches(mean, 0, 7, 264).size(), 2u);  // totals, and sums that write 0
  // A column sum over 1000 columns: a thread per column in the sums kernel, in blocks of a warp.
  const CudaKernelSource grad = emit_cuda_kernel(KernelIR::parse(kRmsNormGrad), kAnyExtent, "g");
  l = gpu_launches(grad, 5, 1000, 264);
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[1].shape.grid, 32u);  // ceil(1000 / 32)
  EXPECT_EQ(l[1].shape.block, 32u);
}

// Compiled once: a second compiler over the same folder loads the binary; another architecture
// or another kernel misses.
TEST(GpuKernelCompiler, CachesBinariesOnDiskPerArchitecture) {
  std::string why;
  if (!RuntimeCompiler::available(GpuVendor::kNvidia, &why)) GTEST_SKIP() << why;
  ScratchDir dir;
  const KernelIR softmax = KernelIR::parse(kSoftmax);
  GpuKernelCompiler first(GpuVendor::kNvidia, "sm_90", dir.path());
  const GpuKernelCompiler::Compiled a = first.compile(softmax, 100, false);
  EXPECT_FALSE(a.from_cache);
  EXPECT_EQ(a.binary.compare(0, 4,
                             "\x7f"
                             "ELF"),
            0);
  EXPECT_TRUE(first.compile(softmax, 120, false).from_cache);   // same bucket (65..128), in memory
  EXPECT_FALSE(first.compile(softmax, 200, false).from_cache);  // another bucket
  GpuKernelCompiler second(GpuVendor::kNvidia, "sm_90", dir.path());
  const GpuKernelCompiler::Compiled b = second.compile(softmax, 100, false);
  EXPECT_TRUE(b.from_cache);
  EXPECT_EQ(b.binary, a.binary);
  GpuKernelCompiler other(GpuVendor::kNvidia, "sm_80", dir.path());
  EXPECT_FALSE(other.compile(softmax, 100, false).from_cache);
  EXPECT_FALSE(second.compile(KernelIR::parse(kRmsNorm), 100, false).from_cache);
  EXPECT_EQ(dir.files().size(), 4u);
}

// Every fused node runs on the GPU, 16-bit ones too: the SwiGLU of bf16 operands with an f32
// residual and an f16 result loads, stores and rounds 16-bit values (fusion_test.cc's graph).
TEST(GpuKernels, HandlesFusedNodesWithSixteenBitValues) {
  auto g = ir::parse_graph(kBf16SwiGluGraph);
  const std::unique_ptr<ir::Graph> fused = apply_fusion(*g, plan_fusion(*g));
  devices::GpuDevice dev(std::make_unique<HostGpuRuntime>(), 1);
  const GpuKernels kernels(dev, "");
  int nodes = 0;
  for (const ir::Node* n : fused->nodes()) {
    if (n->op().name != "fused") continue;
    ++nodes;
    const std::string code = kernel_of(n->attrs())->str();
    EXPECT_NE(code.find("round_bf16"), std::string::npos) << code;
    EXPECT_NE(code.find("round_f16"), std::string::npos) << code;
    EXPECT_TRUE(kernels.handles(*n)) << code;
  }
  EXPECT_EQ(nodes, 1);
}

// On a GPU: every pattern against the interpreter, through device memory, in f32, bf16 and f16.
TEST(GpuKernels, PatternsMatchTheInterpreterOnTheGpu) {
  std::unique_ptr<devices::GpuDevice> gpu;
  if (devices::cuda::cuda_device_count() > 0)
    gpu = devices::cuda::make_cuda_device(0);
  else if (devices::hip::hip_device_count() > 0)
    gpu = devices::hip::make_hip_device(0);
  if (!gpu) GTEST_SKIP() << "no GPU here";
  GpuKernels kernels(*gpu, "");
  auto run = [&](const KernelIR& k, const Case& c, void** host) {
    // Each buffer to the device and back, at its size in the harness.
    std::vector<void*> dev(k.buffers());
    std::vector<size_t> bytes(k.buffers());
    for (int b = 0; b < k.buffers(); ++b) {
      int64_t numel = 1;
      for (int64_t d : detail::shape_of(detail::access_of(k, b), c)) numel *= d;
      bytes[b] = static_cast<size_t>(std::max<int64_t>(numel, 1)) * dtype_size(k.types[b]);
      dev[b] = gpu->allocate(bytes[b]);
      gpu->copy(dev[b], host[b], bytes[b], devices::CopyKind::kHostToDevice);
    }
    kernels.run(k, c.rows, c.cols, c.is_static, dev.data());
    for (int b = k.inputs; b < k.buffers(); ++b)
      gpu->copy(host[b], dev[b], bytes[b], devices::CopyKind::kDeviceToHost);
    gpu->synchronize();
    for (int b = 0; b < k.buffers(); ++b) gpu->deallocate(dev[b], bytes[b]);
  };
  // In f32, and with 16-bit buffers within one unit in their last place (both sides round the
  // same value, computed in f32 on the GPU and in double by the interpreter).
  for (const auto& [low, tol] : {std::pair{DType::kF32, Tolerance{.rtol = 1e-5, .atol = 1e-5}},
                                 {DType::kBF16, Tolerance{.rtol = 0x1p-7, .atol = 1e-3}},
                                 {DType::kF16, Tolerance{.rtol = 0x1p-10, .atol = 1e-3}}})
    for (const char* text : {kBroadcasts, kSoftmax, kRmsNorm, kRmsNormGrad, kCrossEntropyMean,
                             kCrossEntropy, kCompares}) {
      if (low != DType::kF32 && text == kCompares) continue;  // exact compares: f32 only
      const KernelIR k = with_half_buffers(KernelIR::parse(text), low);
      for (int64_t cols : kCols)
        for (int64_t rows : kRows) check_kernel_with(run, k, {rows, cols, false}, tol);
      if (::testing::Test::HasFailure()) return;
    }
}

}  // namespace
}  // namespace disc::jit
