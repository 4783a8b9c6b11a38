#include "jit/cpu/llvm_compiler.h"

#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/ObjectCache.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Transforms/InstCombine/InstCombine.h>
#include <llvm/Transforms/Scalar/EarlyCSE.h>
#include <llvm/Transforms/Scalar/GVN.h>
#include <llvm/Transforms/Scalar/LICM.h>
#include <llvm/Transforms/Scalar/LoopPassManager.h>
#include <llvm/Transforms/Scalar/SimplifyCFG.h>

#include <chrono>

#include "base/error.h"
#include "jit/cpu/target.h"

namespace disc::jit {
namespace {

// Bump when the pipeline below changes what it generates for the same IR (passes, options,
// attributes): cached objects from the previous revision then miss instead of being reused.
constexpr int kPipelineRevision = 2;

// LLVM's messages span lines (the verifier prints the offending instruction); ours are one line.
std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (size_t p; (p = s.find('\n')) != std::string::npos;) s.replace(p, 1, "; ");
  constexpr size_t kMax = 2000;
  if (s.size() > kMax) s = s.substr(0, kMax) + "...";
  return s;
}

std::string message(llvm::Error e) {
  return one_line(llvm::toString(std::move(e)));
}

// The new pass manager's O3 pipeline, with the host TargetMachine so that cost models see the
// host's vector registers and instructions.
void optimize_o3(llvm::Module& m, llvm::TargetMachine& tm) {
  // Declared in this order so that they are destroyed in the right one: each refers to the last.
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;  // what clang sets at -O3
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(m, mam);
}

// For modules whose loops are already vectorised and unrolled (the kernel emitters'; they say so
// with the module flag "disc.loops_done"): what O3 would still change in them, in a quarter of
// its time, measured to give kernels as fast (tools/bench/bench_kernels). EarlyCSE and GVN merge
// the values each pass recomputes, LICM hoists what a loop does not change (splats, buffer
// pointers), InstCombine and SimplifyCFG fold the rest.
void optimize_emitted(llvm::Module& m, llvm::TargetMachine& tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::FunctionPassManager fpm;
  fpm.addPass(llvm::EarlyCSEPass(/*UseMemorySSA=*/true));
  fpm.addPass(llvm::InstCombinePass());
  llvm::LoopPassManager lpm;
  lpm.addPass(llvm::LICMPass(llvm::LICMOptions()));
  fpm.addPass(llvm::createFunctionToLoopPassAdaptor(std::move(lpm), /*UseMemorySSA=*/true));
  fpm.addPass(llvm::GVNPass());
  fpm.addPass(llvm::InstCombinePass());
  fpm.addPass(llvm::SimplifyCFGPass());
  llvm::ModulePassManager mpm;
  mpm.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(fpm)));
  mpm.run(m, mam);
}

// Code generation without Loop Strength Reduction (llc's -disable-lsr): on the emitters' loops
// it took a third of code generation and changed no kernel's speed (tools/bench/bench_kernels).
// The option is LLVM's, process-wide; only disc's compiler reads it here.
void disable_loop_strength_reduction() {
  auto& options = llvm::cl::getRegisteredOptions();
  auto it = options.find("disable-lsr");
  if (it != options.end()) static_cast<llvm::cl::opt<bool>*>(it->second)->setValue(true);
}

void initialize_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    disable_loop_strength_reduction();
  });
}

}  // namespace

// The IRCompileLayer's compiler. It asks the object cache before doing anything, so a cached
// kernel skips the O3 pipeline as well as code generation (orc::SimpleCompiler's own cache lookup
// would come after optimisation). Called by ORC inside compile(), under the compiler's lock.
class LlvmCompiler::OptimizingCompiler final : public llvm::orc::IRCompileLayer::IRCompiler {
 public:
  OptimizingCompiler(LlvmCompiler& owner, std::unique_ptr<llvm::TargetMachine> tm)
      : IRCompiler(llvm::orc::irManglingOptionsFromTargetOptions(tm->Options)),
        owner_(owner),
        tm_(std::move(tm)) {}

  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> operator()(llvm::Module& m) override {
    llvm::ObjectCache& cache = owner_.cache_.llvm_cache();
    if (auto object = cache.getObject(&m)) return object;
    // LLVM's tuning for some AVX-512 CPUs (Skylake-SP, Ice Lake) prefers 256-bit vectors. The
    // emitters size their loops by Target::vector_bits, so the vectoriser must use that width;
    // a function that states its own preference keeps it.
    const std::string width = std::to_string(host_target().vector_bits);
    for (llvm::Function& f : m)
      if (!f.isDeclaration() && !f.hasFnAttribute("prefer-vector-width"))
        f.addFnAttr("prefer-vector-width", width);
    if (m.getModuleFlag("disc.loops_done"))
      optimize_emitted(m, *tm_);
    else
      optimize_o3(m, *tm_);
    if (owner_.ir_sink_) llvm::raw_string_ostream(*owner_.ir_sink_) << m;
    owner_.compiled_ = true;
    auto object = llvm::orc::SimpleCompiler(*tm_)(m);
    if (!object) return object.takeError();
    if (!owner_.session_errors_.empty())  // the back end reported an error diagnostic
      return llvm::createStringError(llvm::inconvertibleErrorCode(), owner_.session_errors_);
    cache.notifyObjectCompiled(&m, (*object)->getMemBufferRef());
    return object;
  }

 private:
  LlvmCompiler& owner_;
  std::unique_ptr<llvm::TargetMachine> tm_;
};

LlvmCompiler::LlvmCompiler(CompilerOptions options)
    : options_(std::move(options)), cache_(options_.cache_dir) {
  initialize_llvm();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb)
    throw CompileError("jit: cannot describe the host to LLVM: " + message(jtmb.takeError()));
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  using IRCompilerPtr = std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>;
  auto make_compiler =
      [this](llvm::orc::JITTargetMachineBuilder b) -> llvm::Expected<IRCompilerPtr> {
    auto tm = b.createTargetMachine();
    if (!tm) return tm.takeError();
    return std::make_unique<OptimizingCompiler>(*this, std::move(*tm));
  };
  auto jit = llvm::orc::LLJITBuilder()
                 .setJITTargetMachineBuilder(std::move(*jtmb))
                 .setCompileFunctionCreator(std::move(make_compiler))
                 .create();
  if (!jit) throw CompileError("jit: cannot start LLVM's ORC JIT: " + message(jit.takeError()));
  jit_ = std::move(*jit);
  // ORC logs failed materialisations to stderr by default; keep them for the exception instead.
  jit_->getExecutionSession().setErrorReporter([this](llvm::Error e) {
    session_errors_ += (session_errors_.empty() ? "" : "; ") + message(std::move(e));
  });
}

LlvmCompiler::~LlvmCompiler() {
  jit_.reset();  // first: tearing ORC down may still report errors into session_errors_
}

std::string LlvmCompiler::version() {
  return std::string("llvm-") + LLVM_VERSION_STRING + "/disc-jit-" +
         std::to_string(kPipelineRevision);
}

CompilerStats LlvmCompiler::stats() const {
  std::lock_guard lock(mu_);
  CompilerStats s = stats_;
  s.cache = cache_.stats();
  return s;
}

CompiledKernel LlvmCompiler::compile(llvm::orc::ThreadSafeModule module,
                                     const std::string& function) {
  std::lock_guard lock(mu_);
  const auto start = std::chrono::steady_clock::now();
  CompiledKernel kernel;
  session_errors_.clear();
  compiled_ = false;
  ir_sink_ = options_.keep_optimized_ir ? &kernel.optimized_ir : nullptr;

  // Checked here, before ORC sees the module: LLVM's code generator assumes valid IR and may
  // crash on anything else, and a missing function is clearer said by name than by ORC.
  std::string id, problem;
  module.withModuleDo([&](llvm::Module& m) {
    id = m.getModuleIdentifier();
    if (m.getTargetTriple().empty()) m.setTargetTriple(jit_->getTargetTriple().str());
    if (m.getDataLayout().isDefault()) m.setDataLayout(jit_->getDataLayout());
    llvm::raw_string_ostream os(problem);
    if (llvm::verifyModule(m, &os)) {
      problem = "does not verify: " + one_line(problem);
      return;
    }
    const llvm::Function* f = m.getFunction(function);
    if (!f || f->isDeclaration()) problem = "defines no function `" + function + "`";
    // Error diagnostics (from the back end) would otherwise print and exit(1) the process.
    m.getContext().setDiagnosticHandlerCallBack(
        [](const llvm::DiagnosticInfo* d, void* self) {
          if (d->getSeverity() != llvm::DS_Error) return;
          std::string text;
          llvm::raw_string_ostream os(text);
          llvm::DiagnosticPrinterRawOStream printer(os);
          d->print(printer);
          auto& errors = static_cast<LlvmCompiler*>(self)->session_errors_;
          errors += (errors.empty() ? "" : "; ") + one_line(text);
        },
        this);
  });
  const std::string what = "jit: module `" + id + "`";
  if (!problem.empty()) throw CompileError(what + " " + problem);

  // LLJIT links every JITDylib it creates to the process's symbols (LLJITBuilder's default), so
  // the libm functions kernels call (exp, log, tanh, pow, powf) resolve without a generator here.
  auto dylib = jit_->createJITDylib("disc_kernel_" + std::to_string(next_dylib_++));
  if (!dylib) throw CompileError(what + ": " + message(dylib.takeError()));
  // ORC's own message names the symbol; what it reported on the way says why.
  auto fail = [&](llvm::Error e) {
    std::string why = message(std::move(e));
    if (!session_errors_.empty()) why += " (" + session_errors_ + ")";
    llvm::consumeError(jit_->getExecutionSession().removeJITDylib(*dylib));
    return CompileError(what + ": cannot compile `" + function + "`: " + why);
  };
  if (llvm::Error e = jit_->addIRModule(*dylib, std::move(module))) throw fail(std::move(e));
  auto address = jit_->lookup(*dylib, function);  // compiles (or loads from the cache) and links
  if (!address) throw fail(address.takeError());

  kernel.address = address->toPtr<void*>();
  kernel.from_cache = !compiled_;
  kernel.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ir_sink_ = nullptr;
  ++stats_.compiles;
  stats_.codegens += compiled_ ? 1 : 0;
  stats_.seconds += kernel.seconds;
  return kernel;
}

}  // namespace disc::jit
