#include "jit/nvrtc.h"

#include <algorithm>
#include <memory>

#include "devices/shared_library.h"
#include "ir/error.h"

namespace disc::jit {
namespace {

using Program = struct NvrtcProgram*;
using Result = int;
constexpr Result kSuccess = 0;

}  // namespace

struct Nvrtc::Api {
  devices::SharedLibrary lib;
  std::string error;
  const char* (*error_string)(Result) = nullptr;
  Result (*version)(int*, int*) = nullptr;
  Result (*num_archs)(int*) = nullptr;
  Result (*archs)(int*) = nullptr;
  Result (*create)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  Result (*destroy)(Program*) = nullptr;
  Result (*compile)(Program, int, const char* const*) = nullptr;
  Result (*ptx_size)(Program, size_t*) = nullptr;
  Result (*ptx)(Program, char*) = nullptr;
  Result (*cubin_size)(Program, size_t*) = nullptr;
  Result (*cubin)(Program, char*) = nullptr;
  Result (*log_size)(Program, size_t*) = nullptr;
  Result (*log)(Program, char*) = nullptr;

  void check(Result r, const char* what) const {
    if (r != kSuccess) throw CompileError(std::string("nvrtc: ") + what + " failed: " + error_string(r));
  }
};

namespace {

template <typename Fn>
void find(Nvrtc::Api& a, Fn& fn, const char* name) {
  fn = a.lib.symbol<Fn>(name);
  if (!fn && a.error.empty()) a.error = a.lib.name() + " has no " + name + ": it is older than CUDA 11.1";
}

std::unique_ptr<Nvrtc::Api> load() {
  auto a = std::make_unique<Nvrtc::Api>();
  a->lib = devices::SharedLibrary::open({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"});
  if (!a->lib) {
    a->error = "NVRTC not found (" + a->lib.error() +
               "): install the CUDA toolkit (its lib folder in the ld cache or LD_LIBRARY_PATH) to compile GPU kernels";
    return a;
  }
  find(*a, a->error_string, "nvrtcGetErrorString");
  find(*a, a->version, "nvrtcVersion");
  find(*a, a->num_archs, "nvrtcGetNumSupportedArchs");
  find(*a, a->archs, "nvrtcGetSupportedArchs");
  find(*a, a->create, "nvrtcCreateProgram");
  find(*a, a->destroy, "nvrtcDestroyProgram");
  find(*a, a->compile, "nvrtcCompileProgram");
  find(*a, a->ptx_size, "nvrtcGetPTXSize");
  find(*a, a->ptx, "nvrtcGetPTX");
  find(*a, a->cubin_size, "nvrtcGetCUBINSize");
  find(*a, a->cubin, "nvrtcGetCUBIN");
  find(*a, a->log_size, "nvrtcGetProgramLogSize");
  find(*a, a->log, "nvrtcGetProgramLog");
  return a;
}

const Nvrtc::Api& loaded() {
  static const std::unique_ptr<Nvrtc::Api> api = load();
  return *api;
}

// One program, destroyed however compile() leaves.
struct ProgramGuard {
  const Nvrtc::Api& api;
  Program p = nullptr;
  ~ProgramGuard() {
    if (p) api.destroy(&p);
  }
};

}  // namespace

const Nvrtc& Nvrtc::get() {
  const Api& a = loaded();
  if (!a.error.empty()) throw CompileError(a.error);
  static const Nvrtc nvrtc(&a);
  return nvrtc;
}

bool Nvrtc::available(std::string* why) {
  const Api& a = loaded();
  if (why) *why = a.error;
  return a.error.empty();
}

std::string Nvrtc::version() const {
  int major = 0, minor = 0;
  api_->check(api_->version(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> Nvrtc::architectures() const {
  int n = 0;
  api_->check(api_->num_archs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> v(static_cast<size_t>(n));
  api_->check(api_->archs(v.data()), "nvrtcGetSupportedArchs");
  std::vector<std::string> names;
  for (int a : v) names.push_back("sm_" + std::to_string(a));
  return names;
}

NvrtcOutput Nvrtc::compile(const std::string& source, const std::string& file_name, const std::string& arch) const {
  const bool real = arch.rfind("sm_", 0) == 0;
  if (!real && arch.rfind("compute_", 0) != 0)
    throw CompileError("nvrtc: architecture `" + arch + "` is neither sm_XX nor compute_XX");
  if (real) {
    const std::vector<std::string> known = architectures();
    if (std::find(known.begin(), known.end(), arch) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      throw CompileError("nvrtc " + version() + " cannot compile for " + arch + "; it knows " + list +
                         ": use a newer CUDA toolkit for this GPU");
    }
  }
  ProgramGuard g{*api_};
  api_->check(api_->create(&g.p, source.c_str(), file_name.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  const std::string arch_option = "--gpu-architecture=" + arch;
  const char* options[] = {arch_option.c_str(), "--std=c++17"};
  const Result r = api_->compile(g.p, 2, options);
  NvrtcOutput out;
  size_t size = 0;
  api_->check(api_->log_size(g.p, &size), "nvrtcGetProgramLogSize");
  out.log.resize(size);
  api_->check(api_->log(g.p, out.log.data()), "nvrtcGetProgramLog");
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  if (r != kSuccess)
    throw CompileError("nvrtc: " + file_name + " does not compile for " + arch + ": " + api_->error_string(r) +
                       "\n" + out.log);
  api_->check(api_->ptx_size(g.p, &size), "nvrtcGetPTXSize");
  out.ptx.resize(size);
  api_->check(api_->ptx(g.p, out.ptx.data()), "nvrtcGetPTX");
  if (real) {
    api_->check(api_->cubin_size(g.p, &size), "nvrtcGetCUBINSize");
    out.cubin.resize(size);
    api_->check(api_->cubin(g.p, out.cubin.data()), "nvrtcGetCUBIN");
  }
  return out;
}

}  // namespace disc::jit
