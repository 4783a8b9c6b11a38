// The GPU vendors' run-time C++ compilers, loaded at run time so that a build needs neither
// toolkit and a machine without a GPU can still compile kernels for one (the tests check every
// generated kernel that way):
//   NVIDIA: NVRTC (libnvrtc.so.13 or .12, from the CUDA toolkit): PTX, and a cubin for sm_XX;
//   AMD:    hiprtc (in libamdhip64.so.5 or .6, Debian's libamdhip64-5): a code object for gfxNNN.
// Both compile the CUDA emitter's source; vendor_header() maps the few CUDA names HIP spells
// differently.
//
//   const jit::RuntimeCompiler& rtc = jit::RuntimeCompiler::get(jit::GpuVendor::kNvidia);
//   jit::GpuCode c = rtc.compile(src.source(), "k0.cu", "sm_90");   // CompileError with the log
//   gpu.load_kernel(c.binary, "k0");
#pragma once

#include <string>
#include <vector>

namespace disc::jit {

enum class GpuVendor { kNvidia, kAmd };

struct GpuCode {
  std::string text;    // PTX (NVIDIA); empty for AMD
  std::string binary;  // a cubin (sm_XX) or an AMD code object; empty for NVIDIA's compute_XX
  std::string log;     // the compiler's warnings
};

class RuntimeCompiler {
 public:
  // The vendor's compiler, loaded once per process. Throws CompileError saying it was not found
  // and how to get it.
  static const RuntimeCompiler& get(GpuVendor v);
  // Whether it can be loaded; `why` gets the reason when not. Never throws.
  static bool available(GpuVendor v, std::string* why = nullptr);
  // What makes the CUDA emitter's source this vendor's: nothing for NVIDIA; for AMD, the warp
  // shuffle without a mask (a wave of 64 reduces each half of 32 lanes as a CUDA warp does).
  static const char* vendor_header(GpuVendor v);

  // "nvrtc 13.0", "hiprtc 5.2"
  std::string name() const;
  // NVIDIA: the real architectures NVRTC compiles for ({"sm_75", ..., "sm_90", ...}).
  // AMD: empty (hiprtc does not list them).
  std::vector<std::string> architectures() const;
  // Compiles `source` (vendor_header() is put in front) for `arch`: NVIDIA's sm_XX (PTX and cubin)
  // or compute_XX (PTX), AMD's gfxNNN (a code object). Throws CompileError with the compiler's log
  // when the source does not compile, and for an architecture the compiler does not know.
  GpuCode compile(const std::string& source, const std::string& file_name,
                  const std::string& arch) const;

  struct Api;

 private:
  explicit RuntimeCompiler(const Api* api) : api_(api) {}
  const Api* api_;
};

}  // namespace disc::jit
