// NVRTC, NVIDIA's run-time CUDA C compiler, loaded at run time (libnvrtc.so.13 or .12: the CUDA
// toolkit's, found through the ld cache or LD_LIBRARY_PATH), so that a build needs no CUDA and a
// machine without a GPU can still compile kernels for one: the tests check every generated kernel
// that way. Compiles the CUDA emitter's source to PTX and, for a real architecture, to a cubin
// that the CUDA device loads.
//
//   const jit::Nvrtc& nvrtc = jit::Nvrtc::get();          // throws CompileError: no NVRTC
//   jit::NvrtcOutput o = nvrtc.compile(src.source(), "k0.cu", "sm_90");
//   gpu.load_kernel(o.cubin, "k0");
#pragma once

#include <string>
#include <vector>

namespace disc::jit {

struct NvrtcOutput {
  std::string ptx;    // always
  std::string cubin;  // for a real architecture (sm_XX); empty for a virtual one (compute_XX)
  std::string log;    // the compiler's warnings
};

class Nvrtc {
 public:
  // The library, loaded once per process. Throws CompileError saying it was not found and how to
  // get it.
  static const Nvrtc& get();
  // Whether NVRTC can be loaded; `why` gets the reason when not. Never throws.
  static bool available(std::string* why = nullptr);

  // "13.0"
  std::string version() const;
  // The real architectures it compiles for: {"sm_75", ..., "sm_90", ...}.
  std::vector<std::string> architectures() const;
  // Compiles `source` for `arch` ("sm_90": PTX and cubin; "compute_90": PTX). Throws CompileError
  // with the compiler's log when the source does not compile, and naming the architectures it
  // knows when `arch` is not one of them.
  NvrtcOutput compile(const std::string& source, const std::string& file_name, const std::string& arch) const;

  struct Api;

 private:
  explicit Nvrtc(const Api* api) : api_(api) {}
  const Api* api_;
};

}  // namespace disc::jit
