// The kernel cache: a second get() is a map lookup, a second process (a fresh cache on the same
// folder) loads objects instead of generating code, concurrent misses compile once; the code is
// vectorised for the host; and how long a kernel takes to compile.
#include "jit/cpu/kernel_cache.h"

#include <gtest/gtest.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "jit/cpu/llvm_emitter.h"
#include "jit/cpu/target.h"
#include "tests/jit/kernel_check.h"
#include "tests/jit/pattern_kernels.h"
#include "tests/jit/scratch_dir.h"

namespace disc::jit {
namespace {

TEST(KernelCache, SecondGetIsAMapLookup) {
  KernelCache cache("");
  const KernelIR k = KernelIR::parse(kSoftmax);
  const KernelCache::Lookup first = cache.get(k, 1000, false);
  EXPECT_TRUE(first.compiled);
  EXPECT_FALSE(first.from_cache);
  EXPECT_GT(first.seconds, 0);
  const KernelCache::Lookup again = cache.get(k, 1000, false);
  EXPECT_FALSE(again.compiled);
  EXPECT_EQ(again.fn, first.fn);
  EXPECT_EQ(cache.get(k, 1020, false).fn, first.fn);  // 1020 is in 1000's bucket, 513..1024
  EXPECT_NE(cache.get(k, 1000, true).fn, first.fn);   // static 1000 is a kernel of its own
  const KernelCacheStats s = cache.stats();
  EXPECT_EQ(s.lookups, 4);
  EXPECT_EQ(s.hits, 2);
  EXPECT_EQ(s.compiles, 2);
  EXPECT_EQ(s.codegens, 2);
  EXPECT_EQ(s.disk_loads, 0);
}

TEST(KernelCache, ASecondProcessCompilesNothing) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const KernelIR k = KernelIR::parse(kCrossEntropy);
  {
    KernelCache first(dir.path());
    EXPECT_FALSE(first.get(k, 1000, false).from_cache);
    EXPECT_FALSE(first.get(k, 1000, true).from_cache);
  }
  EXPECT_EQ(dir.files().size(), 2u);
  KernelCache second(dir.path());  // as a second process would
  for (bool is_static : {false, true}) {
    const KernelCache::Lookup l = second.get(k, 1000, is_static);
    EXPECT_TRUE(l.compiled);
    EXPECT_TRUE(l.from_cache);
    check_kernel(second, k, {.rows = 3, .cols = 1000, .is_static = is_static}, {1e-5, 1e-5});
  }
  EXPECT_EQ(second.stats().codegens, 0);
  EXPECT_EQ(second.stats().disk_loads, 2);
}

TEST(KernelCache, ConcurrentMissesCompileOnce) {
  KernelCache cache("");
  const KernelIR k = KernelIR::parse(kRmsNorm);
  std::vector<KernelFn> fns(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] { fns[t] = cache.get(k, 4096, false).fn; });
  for (auto& t : threads) t.join();
  for (KernelFn fn : fns) EXPECT_EQ(fn, fns[0]);
  EXPECT_EQ(cache.stats().compiles, 1);
  EXPECT_EQ(cache.stats().hits, 3);
}

TEST(KernelCache, RefusesBadBoundariesUpFront) {
  EXPECT_THROW(KernelCache("", {128, -4}), InvalidArgument);
}

// The optimised IR of softmax over 513..1024 columns: host-wide vectors, exp inline (no call to
// expf or llvm.exp, which would run lane by lane).
TEST(KernelCache, VectorisedForTheHost) {
  LlvmCompiler compiler({.keep_optimized_ir = true});
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto m = emit_kernel(KernelIR::parse(kSoftmax), {513, 1024}, host_target(), *ctx, "softmax");
  const CompiledKernel c =
      compiler.compile(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx)), "softmax");
  const std::string& ir = c.optimized_ir;
  const int lanes = host_target().vector_bits / 32;
  EXPECT_NE(ir.find("<" + std::to_string(lanes) + " x float>"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("expf"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("llvm.exp."), std::string::npos) << ir;
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512 on this host";
  EXPECT_NE(ir.find("<16 x float>"), std::string::npos) << ir;
}

// Compile time per kernel (emission, O3, code generation): the pattern kernels over a few
// buckets. Printed for the record; the bound only catches a pathological slowdown.
TEST(KernelCache, CompileTimePerKernel) {
  KernelCache cache("");
  std::vector<double> seconds;
  for (const char* text : {kBroadcasts, kSoftmax, kRmsNorm, kCrossEntropy, kAdamW, kCompares})
    for (int64_t cols : {7, 100, 1000, 32000})
      for (bool is_static : {false, true})
        seconds.push_back(cache.get(KernelIR::parse(text), cols, is_static).seconds);
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  std::printf("compile time over %zu kernels: median %.1f ms, max %.1f ms\n", seconds.size(),
              median * 1e3, seconds.back() * 1e3);
  EXPECT_LT(median, 1.0);
}

}  // namespace
}  // namespace disc::jit
