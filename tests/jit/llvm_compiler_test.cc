// The ORC compiler core end to end: IR built with IRBuilder is optimised, vectorised, compiled,
// run on real data and compared with plain C++; LLVM's failures arrive as CompileError; the
// on-disk object cache lets a second compiler (as a second process would) skip compilation.
#include "jit/cpu/llvm_compiler.h"

#include <gtest/gtest.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "jit/cpu/target.h"
#include "tests/jit/scratch_dir.h"

namespace disc::jit {
namespace {

using AxpyFn = void (*)(float* y, const float* x, float a, int64_t n);

// The cache key a kernel cache would build: what the kernel is, the target, the compiler.
std::string key(const std::string& kernel) {
  return kernel + "|" + host_target().fingerprint() + "|" + LlvmCompiler::version();
}

// void axpy(float* noalias y, const float* noalias x, float a, int64_t n):
//   for (i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
llvm::orc::ThreadSafeModule axpy_module(const std::string& id) {
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto m = std::make_unique<llvm::Module>(id, *ctx);
  llvm::IRBuilder<> b(*ctx);
  llvm::Type* f32 = b.getFloatTy();
  llvm::Type* i64 = b.getInt64Ty();
  auto* type =
      llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(), b.getPtrTy(), f32, i64}, false);
  auto* f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "axpy", *m);
  f->addParamAttr(0, llvm::Attribute::NoAlias);
  f->addParamAttr(1, llvm::Attribute::NoAlias);
  llvm::Value *y = f->getArg(0), *x = f->getArg(1), *a = f->getArg(2), *n = f->getArg(3);
  auto* entry = llvm::BasicBlock::Create(*ctx, "entry", f);
  auto* loop = llvm::BasicBlock::Create(*ctx, "loop", f);
  auto* exit = llvm::BasicBlock::Create(*ctx, "exit", f);
  b.SetInsertPoint(entry);
  b.CreateCondBr(b.CreateICmpSGT(n, b.getInt64(0)), loop, exit);
  b.SetInsertPoint(loop);
  llvm::PHINode* i = b.CreatePHI(i64, 2, "i");
  i->addIncoming(b.getInt64(0), entry);
  llvm::Value* yp = b.CreateInBoundsGEP(f32, y, i);
  llvm::Value* ax = b.CreateFMul(a, b.CreateLoad(f32, b.CreateInBoundsGEP(f32, x, i)));
  b.CreateStore(b.CreateFAdd(ax, b.CreateLoad(f32, yp)), yp);
  llvm::Value* next = b.CreateAdd(i, b.getInt64(1), "next", /*HasNUW=*/true, /*HasNSW=*/true);
  i->addIncoming(next, loop);
  b.CreateCondBr(b.CreateICmpSLT(next, n), loop, exit);
  b.SetInsertPoint(exit);
  b.CreateRetVoid();
  return llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx));
}

// Runs the compiled axpy and plain C++ on the same random data; returns the mismatches.
DISC_CALLS_JIT_CODE int64_t axpy_mismatches(void* address, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) x[i] = u(rng), y[i] = u(rng);
  std::vector<float> expected = y;
  const float a = u(rng);
  for (int64_t i = 0; i < n; ++i) {
    const float ax = a * x[i];  // two statements: no contraction into an FMA, as in the IR
    expected[i] = ax + expected[i];
  }
  reinterpret_cast<AxpyFn>(address)(y.data(), x.data(), a, n);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += y[i] != expected[i];
  return bad;
}

constexpr int64_t kSizes[] = {0, 1, 7, 17, 1000003};  // empty, scalar, below/above one vector, odd

TEST(LlvmCompiler, AxpyMatchesPlainCpp) {
  LlvmCompiler compiler;
  const CompiledKernel k = compiler.compile(axpy_module(key("axpy")), "axpy");
  ASSERT_NE(k.address, nullptr);
  EXPECT_FALSE(k.from_cache);
  for (int64_t n : kSizes) EXPECT_EQ(axpy_mismatches(k.address, n, 7 + n), 0) << "n=" << n;
  const CompilerStats s = compiler.stats();
  EXPECT_EQ(s.compiles, 1);
  EXPECT_EQ(s.codegens, 1);
  EXPECT_GT(s.seconds, 0);
  EXPECT_EQ(s.cache.misses, 1);
}

TEST(LlvmCompiler, LoopVectorisesToTheHostWidth) {
  LlvmCompiler compiler({.keep_optimized_ir = true});
  const CompiledKernel k = compiler.compile(axpy_module(key("axpy")), "axpy");
  ASSERT_NE(k.optimized_ir.find("define void @axpy"), std::string::npos) << k.optimized_ir;
  const int lanes = host_target().vector_bits / 32;
  EXPECT_NE(k.optimized_ir.find("<" + std::to_string(lanes) + " x float>"), std::string::npos)
      << k.optimized_ir;
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512 on this host";
  EXPECT_NE(k.optimized_ir.find("<16 x float>"), std::string::npos) << k.optimized_ir;
}

// A module flagged "disc.loops_done" (the emitters' loops are vectorised already) gets the short
// pipeline, which leaves a scalar loop scalar: the flag really chooses the pipeline.
TEST(LlvmCompiler, ModulesWhoseLoopsAreDoneSkipTheVectoriser) {
  LlvmCompiler compiler({.keep_optimized_ir = true});
  llvm::orc::ThreadSafeModule m = axpy_module(key("axpy-done"));
  m.withModuleDo(
      [](llvm::Module& mod) { mod.addModuleFlag(llvm::Module::Error, "disc.loops_done", 1); });
  const CompiledKernel k = compiler.compile(std::move(m), "axpy");
  ASSERT_NE(k.optimized_ir.find("define void @axpy"), std::string::npos) << k.optimized_ir;
  EXPECT_EQ(k.optimized_ir.find(" x float>"), std::string::npos) << k.optimized_ir;
  EXPECT_EQ(axpy_mismatches(k.address, 1000, 1), 0);
}

TEST(LlvmCompiler, SameKeyTwiceComesFromTheCache) {
  LlvmCompiler compiler;
  const CompiledKernel first = compiler.compile(axpy_module(key("axpy")), "axpy");
  const CompiledKernel second = compiler.compile(axpy_module(key("axpy")), "axpy");
  EXPECT_FALSE(first.from_cache);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(compiler.stats().codegens, 1);
  // Each compile links into its own JITDylib: both copies stay callable.
  EXPECT_EQ(axpy_mismatches(first.address, 1000, 1), 0);
  EXPECT_EQ(axpy_mismatches(second.address, 1000, 2), 0);
}

// Runs `compile` and returns the CompileError's message ("" when nothing was thrown).
template <typename F>
std::string compile_error(F compile) {
  try {
    compile();
  } catch (const CompileError& e) {
    return e.what();
  }
  return "";
}

TEST(LlvmCompiler, InvalidModuleThrowsWithTheVerifierMessage) {
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto m = std::make_unique<llvm::Module>("broken-kernel", *ctx);
  auto* f = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(*ctx), false),
                                   llvm::Function::ExternalLinkage, "bad", *m);
  llvm::BasicBlock::Create(*ctx, "entry", f);  // a block without a terminator
  LlvmCompiler compiler;
  const std::string msg = compile_error(
      [&] { compiler.compile(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx)), "bad"); });
  EXPECT_NE(msg.find("module `broken-kernel` does not verify"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not have terminator"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  // The compiler is still usable afterwards.
  EXPECT_EQ(axpy_mismatches(compiler.compile(axpy_module("ok"), "axpy").address, 17, 3), 0);
}

TEST(LlvmCompiler, MissingFunctionThrows) {
  LlvmCompiler compiler;
  const std::string msg = compile_error([&] { compiler.compile(axpy_module("m"), "saxpy"); });
  EXPECT_NE(msg.find("defines no function `saxpy`"), std::string::npos) << msg;
}

TEST(LlvmCompiler, UnresolvedSymbolThrowsWithItsName) {
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto m = std::make_unique<llvm::Module>("calls-nothing", *ctx);
  auto* void_fn = llvm::FunctionType::get(llvm::Type::getVoidTy(*ctx), false);
  auto* missing =
      llvm::Function::Create(void_fn, llvm::Function::ExternalLinkage, "disc_no_such_symbol", *m);
  auto* f = llvm::Function::Create(void_fn, llvm::Function::ExternalLinkage, "calls", *m);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(*ctx, "entry", f));
  b.CreateCall(missing);
  b.CreateRetVoid();
  LlvmCompiler compiler;
  const std::string msg = compile_error([&] {
    compiler.compile(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx)), "calls");
  });
  EXPECT_NE(msg.find("cannot compile `calls`"), std::string::npos) << msg;
  EXPECT_NE(msg.find("disc_no_such_symbol"), std::string::npos) << msg;
}

TEST(LlvmCompiler, LlvmErrorsBecomeCompileErrors) {
  llvm::orc::ThreadSafeModule tsm = axpy_module("wrong-layout");
  tsm.withModuleDo([](llvm::Module& m) { m.setDataLayout("e-p:32:32"); });  // not the host's
  LlvmCompiler compiler;
  const std::string msg = compile_error([&] { compiler.compile(std::move(tsm), "axpy"); });
  EXPECT_NE(msg.find("module `wrong-layout`"), std::string::npos) << msg;
  EXPECT_NE(msg.find("data layout"), std::string::npos) << msg;
}

// A second compiler on the same folder stands for a second process: it generates no code, and
// a damaged file costs one recompilation, not a failure.
TEST(LlvmCompiler, DiskCacheSkipsCompilationInANewCompiler) {
  ScratchDir dir;
  const std::string id = key("axpy");
  {
    LlvmCompiler first({.cache_dir = dir.path()});
    const CompiledKernel k = first.compile(axpy_module(id), "axpy");
    EXPECT_FALSE(k.from_cache);
    EXPECT_EQ(first.stats().cache.misses, 1);
    EXPECT_EQ(first.stats().cache.writes, 1);
  }
  ASSERT_EQ(dir.files().size(), 1u);  // the object, and no temporary file
  const std::string path = ObjectCache(dir.path()).path_for(id);
  {
    LlvmCompiler second({.cache_dir = dir.path(), .keep_optimized_ir = true});
    const CompiledKernel k = second.compile(axpy_module(id), "axpy");
    EXPECT_TRUE(k.from_cache);
    EXPECT_TRUE(k.optimized_ir.empty());  // O3 did not even run
    EXPECT_EQ(second.stats().codegens, 0);
    EXPECT_EQ(second.stats().cache.hits, 1);
    for (int64_t n : kSizes) EXPECT_EQ(axpy_mismatches(k.address, n, 11 + n), 0) << "n=" << n;
  }
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);  // a damaged file
  {
    LlvmCompiler third({.cache_dir = dir.path()});
    const CompiledKernel k = third.compile(axpy_module(id), "axpy");
    EXPECT_FALSE(k.from_cache);
    EXPECT_EQ(third.stats().cache.rejected, 1);
    EXPECT_EQ(third.stats().codegens, 1);
    EXPECT_EQ(axpy_mismatches(k.address, 1000003, 5), 0);
  }
  LlvmCompiler fourth({.cache_dir = dir.path()});  // the rewritten file is good again
  EXPECT_TRUE(fourth.compile(axpy_module(id), "axpy").from_cache);
  EXPECT_EQ(dir.files(), std::vector<std::string>{std::filesystem::path(path).filename()});
}

TEST(LlvmCompiler, ConcurrentCompilesAreSafe) {
  LlvmCompiler compiler;
  std::vector<std::thread> threads;
  std::vector<int64_t> bad(4, -1);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      const CompiledKernel k =
          compiler.compile(axpy_module(key("axpy-" + std::to_string(t))), "axpy");
      bad[t] = axpy_mismatches(k.address, 1000 + t, t);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, std::vector<int64_t>(4, 0));
  EXPECT_EQ(compiler.stats().compiles, 4);
}

}  // namespace
}  // namespace disc::jit
