#include "jit/gpu/runtime_compiler.h"

#include <algorithm>
#include <memory>

#include "base/error.h"
#include "devices/shared_library.h"

namespace disc::jit {

// NVRTC's and hiprtc's opaque program; outside the anonymous namespace because
// RuntimeCompiler::Api's members name it (a class with external linkage may not hold a member
// whose type has internal linkage).
struct RtcProgram;

namespace {

using Program = RtcProgram*;
using Result = int;
constexpr Result kSuccess = 0;
using SizeFn = Result (*)(Program, size_t*);
using ReadFn = Result (*)(Program, char*);

}  // namespace

// NVRTC's and hiprtc's C APIs are the same functions under two prefixes; the outputs differ.
struct RuntimeCompiler::Api {
  GpuVendor vendor = GpuVendor::kNvidia;
  devices::SharedLibrary lib;
  std::string prefix;  // "nvrtc", "hiprtc"
  std::string error;   // empty when usable
  const char* (*error_string)(Result) = nullptr;
  Result (*version)(int*, int*) = nullptr;
  Result (*create)(Program*, const char*, const char*, int, const char* const*,
                   const char* const*) = nullptr;
  Result (*destroy)(Program*) = nullptr;
  Result (*compile)(Program, int, const char* const*) = nullptr;
  SizeFn log_size = nullptr, text_size = nullptr, binary_size = nullptr;
  ReadFn log = nullptr, text = nullptr, binary = nullptr;
  Result (*num_archs)(int*) = nullptr;  // NVIDIA only
  Result (*archs)(int*) = nullptr;

  template <typename Fn>
  void find(Fn& fn, const std::string& name) {
    fn = lib.symbol<Fn>((prefix + name).c_str());
    if (!fn && error.empty())
      error = lib.name() + " has no " + prefix + name + ": it is too old for disc";
  }
  void check(Result r, const char* what) const {
    if (r != kSuccess) throw CompileError(prefix + ": " + what + " failed: " + error_string(r));
  }
  // One of the program's outputs, read through its size and copy functions.
  std::string read(Program p, SizeFn size, ReadFn get, const char* what) const {
    size_t n = 0;
    check(size(p, &n), what);
    std::string s(n, '\0');
    check(get(p, s.data()), what);
    return s;
  }
};

namespace {

std::unique_ptr<RuntimeCompiler::Api> load(GpuVendor v) {
  auto a = std::make_unique<RuntimeCompiler::Api>();
  a->vendor = v;
  const bool nv = v == GpuVendor::kNvidia;
  a->prefix = nv ? "nvrtc" : "hiprtc";
  a->lib =
      nv ? devices::SharedLibrary::open({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
         : devices::SharedLibrary::open({"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"});
  if (!a->lib) {
    a->error = nv ? "NVRTC not found (" + a->lib.error() +
                        "): install the CUDA toolkit (its lib folder in the ld cache or "
                        "LD_LIBRARY_PATH) to compile for NVIDIA GPUs"
                  : "hiprtc not found (" + a->lib.error() +
                        "): install Debian's libamdhip64-5 and libhiprtc-builtins5 to compile for "
                        "AMD GPUs";
    return a;
  }
  a->find(a->error_string, "GetErrorString");
  a->find(a->version, "Version");
  a->find(a->create, "CreateProgram");
  a->find(a->destroy, "DestroyProgram");
  a->find(a->compile, "CompileProgram");
  a->find(a->log_size, "GetProgramLogSize");
  a->find(a->log, "GetProgramLog");
  if (nv) {
    a->find(a->text_size, "GetPTXSize");
    a->find(a->text, "GetPTX");
    a->find(a->binary_size, "GetCUBINSize");
    a->find(a->binary, "GetCUBIN");
    a->find(a->num_archs, "GetNumSupportedArchs");
    a->find(a->archs, "GetSupportedArchs");
  } else {
    a->find(a->binary_size, "GetCodeSize");
    a->find(a->binary, "GetCode");
  }
  return a;
}

const RuntimeCompiler::Api& loaded(GpuVendor v) {
  static const std::unique_ptr<RuntimeCompiler::Api> nvidia = load(GpuVendor::kNvidia);
  static const std::unique_ptr<RuntimeCompiler::Api> amd = load(GpuVendor::kAmd);
  return v == GpuVendor::kNvidia ? *nvidia : *amd;
}

// One program, destroyed however compile() leaves.
struct ProgramGuard {
  const RuntimeCompiler::Api& api;
  Program p = nullptr;
  ~ProgramGuard() {
    if (p) api.destroy(&p);
  }
};

}  // namespace

const RuntimeCompiler& RuntimeCompiler::get(GpuVendor v) {
  const Api& a = loaded(v);
  if (!a.error.empty()) throw CompileError(a.error);
  static const RuntimeCompiler nvidia(&loaded(GpuVendor::kNvidia)), amd(&loaded(GpuVendor::kAmd));
  return v == GpuVendor::kNvidia ? nvidia : amd;
}

bool RuntimeCompiler::available(GpuVendor v, std::string* why) {
  const Api& a = loaded(v);
  if (why) *why = a.error;
  return a.error.empty();
}

const char* RuntimeCompiler::vendor_header(GpuVendor v) {
  return v == GpuVendor::kNvidia ? ""
                                 : "#define __shfl_xor_sync(mask, v, lane) __shfl_xor(v, lane)\n";
}

std::string RuntimeCompiler::name() const {
  int major = 0, minor = 0;
  api_->check(api_->version(&major, &minor), "Version");
  return api_->prefix + " " + std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> RuntimeCompiler::architectures() const {
  if (!api_->num_archs) return {};
  int n = 0;
  api_->check(api_->num_archs(&n), "GetNumSupportedArchs");
  std::vector<int> v(static_cast<size_t>(n));
  api_->check(api_->archs(v.data()), "GetSupportedArchs");
  std::vector<std::string> names;
  for (int a : v) names.push_back("sm_" + std::to_string(a));
  return names;
}

GpuCode RuntimeCompiler::compile(const std::string& source, const std::string& file_name,
                                 const std::string& arch) const {
  const bool nv = api_->vendor == GpuVendor::kNvidia;
  const bool real = arch.rfind(nv ? "sm_" : "gfx", 0) == 0;
  if (!real && !(nv && arch.rfind("compute_", 0) == 0))
    throw CompileError(name() + ": architecture `" + arch + "` is not " +
                       (nv ? "sm_XX or compute_XX" : "gfxNNN"));
  if (const std::vector<std::string> known = architectures();
      nv && real && std::find(known.begin(), known.end(), arch) == known.end()) {
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    throw CompileError(name() + " cannot compile for " + arch + "; it knows " + list +
                       ": use a newer CUDA toolkit for this GPU");
  }
  ProgramGuard g{*api_};
  const std::string full = vendor_header(api_->vendor) + source;
  api_->check(api_->create(&g.p, full.c_str(), file_name.c_str(), 0, nullptr, nullptr),
              "CreateProgram");
  const std::string arch_option = (nv ? "--gpu-architecture=" : "--offload-arch=") + arch;
  const char* options[] = {arch_option.c_str(), "-std=c++17"};
  const Result r = api_->compile(g.p, 2, options);
  GpuCode out;
  out.log = api_->read(g.p, api_->log_size, api_->log, "GetProgramLog");
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  if (r != kSuccess)
    throw CompileError(name() + ": " + file_name + " does not compile for " + arch + ": " +
                       api_->error_string(r) + "\n" + out.log);
  if (nv) out.text = api_->read(g.p, api_->text_size, api_->text, "GetPTX");
  if (real) out.binary = api_->read(g.p, api_->binary_size, api_->binary, "GetCode");
  if (out.binary.empty() && real)
    throw CompileError(name() + ": " + file_name + " compiled for " + arch +
                       " into no code: " + out.log);
  return out;
}

}  // namespace disc::jit
