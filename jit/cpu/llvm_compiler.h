// Compiles LLVM IR modules to host machine code with LLVM's ORC JIT and returns function
// addresses. The emitters hand it one module per kernel; it verifies the module, optimises it with
// LLVM's O3 pipeline for the host (loops vectorise to host_target().vector_bits), generates code,
// links it into its own JITDylib and looks the function up. Objects go through an ObjectCache
// keyed by the module identifier, so a cached kernel skips both O3 and code generation.
//
//   jit::LlvmCompiler compiler({.cache_dir = "/var/cache/disc"});
//   auto ctx = std::make_unique<llvm::LLVMContext>();
//   // The identifier is the cache key: the kernel's fingerprint and bucket,
//   // host_target().fingerprint() and LlvmCompiler::version().
//   auto m = std::make_unique<llvm::Module>(key, *ctx);
//   ... build @axpy with llvm::IRBuilder ...
//   llvm::orc::ThreadSafeModule tsm(std::move(m), std::move(ctx));
//   jit::CompiledKernel k = compiler.compile(std::move(tsm), "axpy");
//   using Axpy = void (*)(float* y, const float* x, float a, int64_t n);
//   reinterpret_cast<Axpy>(k.address)(y, x, a, n);  // in a function marked DISC_CALLS_JIT_CODE
//
// Thread-safe: compile() calls are serialised. Failures throw CompileError (a module that does
// not verify, a missing function or symbol, an error LLVM reports); none aborts the process.
// Compiled code stays loaded until the compiler is destroyed.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "jit/object_cache.h"

// Put on a function that calls JIT code through a pointer. Clang's UBSan (-fsanitize=function, in
// -fsanitize=undefined) checks such calls by reading a signature that clang places just before the
// functions it compiles; JIT code has none, and the read may even fault when the code starts a
// page. GCC has no such check.
#if defined(__clang__)
#define DISC_CALLS_JIT_CODE __attribute__((no_sanitize("function")))
#else
#define DISC_CALLS_JIT_CODE
#endif

namespace llvm::orc {
class LLJIT;
class ThreadSafeModule;
}  // namespace llvm::orc

namespace disc::jit {

struct CompilerOptions {
  // Folder of the on-disk object cache (the config's jit.cache_dir); "": in memory only.
  std::string cache_dir;
  // Keep the optimised IR of each compiled kernel in CompiledKernel::optimized_ir (tests, dumps).
  bool keep_optimized_ir = false;
};

struct CompiledKernel {
  void* address = nullptr;
  bool from_cache = false;   // the object came from the cache: no optimisation, no code generation
  double seconds = 0;        // wall time of this compile() call
  std::string optimized_ir;  // with keep_optimized_ir, when the module was really compiled
};

struct CompilerStats {
  int64_t compiles = 0;  // compile() calls that returned a kernel
  int64_t codegens = 0;  // modules optimised and compiled to machine code (the others were cached)
  double seconds = 0;    // wall time spent in compile(), all calls
  ObjectCacheStats cache;
};

class LlvmCompiler {
 public:
  explicit LlvmCompiler(CompilerOptions options = {});
  ~LlvmCompiler();
  LlvmCompiler(const LlvmCompiler&) = delete;
  LlvmCompiler& operator=(const LlvmCompiler&) = delete;

  // Compiles `module` and returns the address of its function `function`. A module without a
  // target triple or data layout gets the host's. Its identifier is the cache key ("": not cached).
  CompiledKernel compile(llvm::orc::ThreadSafeModule module, const std::string& function);

  // The compiler's identity for cache keys: the LLVM version and the revision of this pipeline.
  static std::string version();
  CompilerStats stats() const;

 private:
  class OptimizingCompiler;

  CompilerOptions options_;
  ObjectCache cache_;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  mutable std::mutex mu_;  // one compile at a time: LLVM's TargetMachine is not thread-safe
  CompilerStats stats_;
  int64_t next_dylib_ = 0;
  // State of the compile() in progress, shared with OptimizingCompiler (ORC calls it from inside
  // compile(), under mu_); compile() resets them on entry.
  std::string* ir_sink_ = nullptr;  // where the optimised IR goes, when kept
  bool compiled_ = false;           // the module was optimised and compiled (not a cache hit)
  std::string session_errors_;      // what ORC and the back end reported
};

}  // namespace disc::jit
