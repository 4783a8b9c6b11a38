// Runs the CUDA emitter's kernels on the CPU, so that their arithmetic is checked against the
// interpreter on a machine without a GPU. The kernels' source is compiled by the C++ compiler that
// built the tests, with a prelude that makes CUDA's names plain C++: one thread per block
// (threadIdx.x = 0, blockDim.x = 1, a warp of one), one block striding over every row group, block
// and warp reductions that return their one thread's value. What this does not check is the
// reductions' warp and shared-memory code (NVRTC compiles it; a GPU runs it).
//
//   CudaHostRunner host({{k, bucket}, ...});      // one shared object for every kernel
//   host.run(0, rows, cols, buffers);             // kernel 0: totals, rows, sums, as on a GPU
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "jit/gpu/cuda_emitter.h"
#include "jit/gpu/gpu_kernels.h"
#include "tests/jit/scratch_dir.h"

namespace disc::jit {

// CUDA's names as plain C++, for both host builds (the op kernels' threads and blocks come apart).
inline constexpr const char* kHostIntrinsics = R"(#include <math.h>
#include <string.h>
struct disc_dim { unsigned x; };
#define __global__
#define __device__ static
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(n)
static float __int_as_float(int i) { float f; memcpy(&f, &i, sizeof f); return f; }
static double __longlong_as_double(long long i) { double d; memcpy(&d, &i, sizeof d); return d; }
static float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, sizeof f); return f; }
static unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, sizeof i); return i; }
)";

// The fused kernels' host build: one thread in one block.
inline constexpr const char* kHostOneThread = R"(
static const disc_dim threadIdx = {0}, blockIdx = {0}, blockDim = {1}, gridDim = {1};
#define __syncthreads()
)";

inline constexpr const char* kHostReductions = R"(
#define DISC_WARP 1
static float disc_warp_sum(float v) { return v; }
static float disc_warp_max(float v) { return v; }
static float disc_warp_lse(disc_lse v) { return v.m + logf(v.s); }
static float disc_block_sum(float v, float*) { return v; }
static float disc_block_max(float v, float*) { return v; }
static float disc_block_lse(disc_lse v, float*) { return v.m + logf(v.s); }
static double disc_block_sum_f64(double v, double*) { return v; }
)";

class CudaHostRunner {
 public:
  using Entry = void (*)(long long, long long, void* const*, double*, float*);

  explicit CudaHostRunner(std::vector<std::pair<KernelIR, Bucket>> kernels) {
    std::string src = std::string(kHostIntrinsics) + kHostOneThread;
    for (size_t i = 0; i < kernels.size(); ++i) {
      const auto& [k, b] = kernels[i];
      sources_.push_back(emit_cuda_kernel(k, b, "k" + std::to_string(i)));
      irs_.push_back(k);
      if (i == 0) src += sources_[0].math + kHostReductions;
      src += sources_[i].body + wrapper(k, sources_[i]);
    }
    const std::string cc = dir_.path() + "/kernels.cc", so = dir_.path() + "/kernels.so";
    std::ofstream(cc) << src;
    const std::string cmd =
        std::string(DISC_TEST_CXX) + " -std=c++17 -O1 -w -shared -fPIC -o " + so + " " + cc;
    if (std::system(cmd.c_str()) != 0)
      throw CompileError("the host build of the CUDA kernels failed: " + cmd);
    handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw CompileError(std::string("dlopen: ") + dlerror());
  }
  ~CudaHostRunner() {
    if (handle_) dlclose(handle_);
  }

  // Kernel i over its buffers, launched as GpuKernels launches them (gpu_launches): the totals
  // and the label check they carry, the rows, then the sums over rows.
  void run(size_t i, int64_t rows, int64_t cols, void** buffers) const {
    const CudaKernelSource& s = sources_[i];
    const KernelIR& k = irs_[i];
    std::vector<double> totals(k.code.size(), 0.0);
    std::vector<float> sums(static_cast<size_t>(gpu_sums_floats(s, rows, cols)) + 1, -777.0f);
    const int64_t groups = (rows + s.rows_per_group - 1) / s.rows_per_group;
    for (const GpuLaunch& l : gpu_launches(s, rows, cols, 1)) {
      entry(l.function + "_host")(l.kind == GpuLaunch::Kind::kSums ? groups : rows, cols, buffers,
                                  totals.data(), sums.data());
      if (l.kind != GpuLaunch::Kind::kTotals) continue;
      for (size_t j = 0; j < k.code.size(); ++j)
        if (k.code[j].op == KOp::kCheckLabels && totals[j] != 0)
          throw_bad_labels(static_cast<int64_t>(totals[j]), cols);
    }
  }

 private:
  // extern "C" entries of one signature, casting the buffers to the kernel's parameter types.
  static std::string wrapper(const KernelIR& k, const CudaKernelSource& s) {
    auto cast = [&](int b) {
      const char* t = k.types[b] == DType::kF64    ? "double"
                      : k.types[b] == DType::kI32  ? "int"
                      : k.types[b] == DType::kI64  ? "long long"
                      : k.types[b] == DType::kBool ? "unsigned char"
                      : is_half_float(k.types[b])  ? "unsigned short"
                                                   : "float";
      return std::string("(") + (b < k.inputs ? "const " : "") + t + "*)b[" + std::to_string(b) +
             "]";
    };
    std::string bufs;
    for (int b = 0; b < k.buffers(); ++b) bufs += ", " + cast(b);
    const std::string sig =
        "(long long rows, long long cols, void* const* b, double* totals, float* sums)";
    std::string w = "extern \"C\" void " + s.name + "_host" + sig + " { " + s.name + "(rows, cols" +
                    bufs + ", totals, sums); }\n";
    if (s.has_totals)
      w += "extern \"C\" void " + s.name + "_totals_host" + sig + " { " + s.name +
           "_totals(rows, cols" + bufs + ", totals); }\n";
    if (!s.summed.empty()) {
      std::string outs;
      for (int b : s.summed) outs += ", (float*)b[" + std::to_string(b) + "]";
      w += "extern \"C\" void " + s.name + "_sums_host" + sig + " { " + s.name +
           "_sums(rows, cols, sums" + outs + "); }\n";
    }
    return w;
  }
  Entry entry(const std::string& name) const {
    auto f = reinterpret_cast<Entry>(dlsym(handle_, name.c_str()));
    if (!f) throw CompileError("no " + name + " in the host build");
    return f;
  }

  ScratchDir dir_;
  std::vector<CudaKernelSource> sources_;
  std::vector<KernelIR> irs_;
  void* handle_ = nullptr;
};

}  // namespace disc::jit
