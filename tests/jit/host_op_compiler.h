// GpuOps::Compile for the host: the GPU op kernels' source (jit/gpu/gpu_op_source.h) built as a
// shared object with the compiler that built the tests, for HostGpuRuntime (host_gpu_runtime.h)
// to load. A launch runs each block's threads at once, as fibers of the launching thread that
// take turns between one __syncthreads and the next, and the blocks one after another (__shared__
// arrays are the object's statics): so a block's shared loads, its idle threads and its barriers
// run as on a GPU.
//
//   devices::GpuDevice dev(std::make_unique<HostGpuRuntime>(), 1);
//   HostOpCompiler compile;
//   GpuOps ops(dev, [&](const std::string& source, KernelRun&) { return compile(source); });
#pragma once

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "base/error.h"
#include "base/hash.h"
#include "tests/jit/cuda_host_runner.h"
#include "tests/jit/scratch_dir.h"

namespace disc::jit {

// What the host build adds: threads and blocks, CUDA's atomicCAS, disc_host_run (the launch, for
// HostGpuRuntime) and, for each kernel, an entry that takes cuLaunchKernel's parameter array.
inline constexpr const char* kHostThreads = R"(
#define DISC_HOST_BUILD 1
#include <setjmp.h>
#include <ucontext.h>
// A block's threads are fibers on the launching thread, each run in turn up to its next barrier.
// makecontext gives each its stack; after that _setjmp and _longjmp switch between them, which
// (unlike swapcontext) leave the signal mask alone: no system call per switch. OS threads meeting
// at a futex, before, spent most of the run in the kernel. (Plain C headers: the build compiles
// once per module.)
static disc_dim threadIdx, blockIdx, blockDim, gridDim;
static jmp_buf disc_host_main, disc_host_fiber[32];  // a block is at most kHostMaxThreads
static void __syncthreads() {
  if (!_setjmp(disc_host_fiber[threadIdx.x])) _longjmp(disc_host_main, 1);
}
static unsigned long long atomicCAS(unsigned long long* p, unsigned long long expected, unsigned long long v) {
  __atomic_compare_exchange_n(p, &expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;  // the old value, whether or not it was swapped
}
// A warp's shuffle: the block is one warp here (kHostMaxThreads), so the block's barrier serves.
static float __shfl_xor_sync(unsigned, float v, int lane_mask) {
  static float lanes[32];
  lanes[threadIdx.x & 31] = v;
  __syncthreads();
  const float r = lanes[(threadIdx.x & 31) ^ lane_mask];
  __syncthreads();
  return r;
}
static void (*disc_host_entry)(void**);
static void** disc_host_params;
static bool disc_host_ended;  // set by the fiber that just returned to disc_host_run
static void disc_host_thread() {
  disc_host_entry(disc_host_params);
  disc_host_ended = true;
  _longjmp(disc_host_main, 1);
}
// Each thread of a block runs to its next barrier (or its end) in turn, round after round, until
// all have ended; then the next block.
extern "C" void disc_host_run(void (*entry)(void**), void** params, unsigned grid, unsigned block) {
  enum { kStack = 1 << 18 };
  static char stacks[32 * kStack];  // the module's own (a malloc would outlive its dlclose)
  disc_host_entry = entry, disc_host_params = params;
  blockDim = {block}, gridDim = {grid};
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx = {b};
    bool started[32] = {}, ended[32] = {};
    for (volatile unsigned running = block; running > 0;)
      for (volatile unsigned t = 0; t < block; ++t) {
        if (ended[t]) continue;
        threadIdx = {t}, disc_host_ended = false;
        if (!_setjmp(disc_host_main)) {
          if (started[t]) _longjmp(disc_host_fiber[t], 1);
          started[t] = true;
          ucontext_t here, fiber;
          getcontext(&fiber);
          fiber.uc_stack = {stacks + t * kStack, 0, kStack};
          fiber.uc_link = nullptr;  // a fiber leaves by _longjmp, never by returning
          makecontext(&fiber, disc_host_thread, 0);
          swapcontext(&here, &fiber);
        }
        ended[t] = disc_host_ended;
        running = running - ended[t];
      }
  }
}
)";

inline constexpr const char* kHostEntries = R"(
#define P(T, i) (*(T*)p[i])
extern "C" void disc_transpose_4_params(void** p) {
  disc_transpose_4(P(const unsigned*, 0), P(unsigned*, 1), P(disc_i64, 2), P(disc_perm, 3));
}
extern "C" void disc_transpose_8_params(void** p) {
  disc_transpose_8(P(const unsigned long long*, 0), P(unsigned long long*, 1), P(disc_i64, 2), P(disc_perm, 3));
}
extern "C" void disc_transpose_2_params(void** p) {
  disc_transpose_2(P(const unsigned short*, 0), P(unsigned short*, 1), P(disc_i64, 2), P(disc_perm, 3));
}
#define DISC_HOST_FLOAT(T, S)                                                                               \
  extern "C" void disc_rope_##S##_params(void** p) {                                                        \
    disc_rope_##S(P(const T*, 0), P(T*, 1), P(disc_i64, 2), P(disc_i64, 3), P(disc_i64, 4), P(disc_i64, 5), \
                  P(const double*, 6), P(double, 7), P(const int*, 8), P(unsigned long long*, 9),           \
                  P(unsigned long long, 10));                                                               \
  }
DISC_FLOATS(DISC_HOST_FLOAT)
extern "C" void disc_rope_table_params(void** p) {
  disc_rope_table(P(double*, 0), P(disc_i64, 1), P(disc_i64, 2), P(double, 3));
}
#define DISC_HOST_CONVERT(T, S)                                    \
  extern "C" void disc_narrow_##S##_params(void** p) {             \
    disc_narrow_##S(P(const float*, 0), P(T*, 1), P(disc_i64, 2)); \
  }
DISC_HOST_CONVERT(disc_bf16, bf16)
DISC_HOST_CONVERT(disc_f16, f16)
#define DISC_HOST_INDEXED(I, S)                                                                            \
  extern "C" void disc_gather_##S##_params(void** p) {                                                     \
    disc_gather_##S(P(const float*, 0), P(const I*, 1), P(float*, 2), P(disc_i64, 3), P(disc_i64, 4),      \
                    P(disc_i64, 5), P(unsigned long long*, 6), P(unsigned long long, 7));                  \
  }                                                                                                        \
  extern "C" void disc_scatter_order_##S##_params(void** p) {                                              \
    disc_scatter_order_##S(P(const I*, 0), P(disc_i64, 1), P(disc_i64, 2), P(int*, 3),                      \
                           P(unsigned long long*, 4), P(unsigned long long, 5));                            \
  }                                                                                                        \
  extern "C" void disc_scatter_runs_##S##_params(void** p) {                                               \
    disc_scatter_runs_##S(P(float*, 0), P(const I*, 1), P(const float*, 2), P(const int*, 3), P(disc_i64, 4), \
                          P(disc_i64, 5), P(disc_i64, 6));                                                  \
  }
DISC_HOST_INDEXED(int, i32)
DISC_HOST_INDEXED(long long, i64)
#define DISC_HOST_LCE(G, S)                                                                                 \
  extern "C" void disc_lce_rows_i64_##S##_params(void** p) {                                                \
    disc_lce_rows_i64_##S(P(const float*, 0), P(G*, 1), P(const long long*, 2), P(disc_i64, 3), P(disc_i64, 4), \
                          P(disc_i64, 5), P(const disc_i64*, 6), P(double*, 7));                            \
  }
DISC_FLOATS(DISC_HOST_LCE)
#define DISC_HOST_LCE_COUNT(I, S)                                                                              \
  extern "C" void disc_lce_count_##S##_params(void** p) {                                                      \
    disc_lce_count_##S(P(const I*, 0), P(disc_i64, 1), P(disc_i64, 2), P(disc_i64, 3), P(unsigned long long*, 4), \
                       P(unsigned long long, 5), P(disc_i64*, 6));                                             \
  }
DISC_HOST_LCE_COUNT(int, i32)
DISC_HOST_LCE_COUNT(long long, i64)
extern "C" void disc_report_nonzero_params(void** p) {
  disc_report_nonzero(P(const double*, 0), P(unsigned long long*, 1), P(unsigned long long, 2));
}
extern "C" void disc_lce_loss_params(void** p) {
  disc_lce_loss(P(const double*, 0), P(disc_i64, 1), P(const disc_i64*, 2), P(float*, 3));
}
#define DISC_HOST_ATTENTION_MMA(D, DV, T)                                                                       \
  extern "C" void disc_attention_mma_fwd_##D##_##DV##_params(void** p) {                                        \
    disc_attention_mma_fwd_##D##_##DV(P(const T*, 0), P(const T*, 1), P(const T*, 2), P(T*, 3), P(disc_i64, 4), \
                                      P(disc_i64, 5), P(disc_i64, 6), P(int, 7), P(float, 8),                   \
                                      P(const int*, 9), P(disc_i64, 10));                                        \
  }                                                                                                             \
  extern "C" void disc_attention_mma_bwd_q_##D##_##DV##_params(void** p) {                                      \
    disc_attention_mma_bwd_q_##D##_##DV(P(const T*, 0), P(const T*, 1), P(const T*, 2), P(const T*, 3),         \
                                        P(T*, 4), P(float*, 5), P(disc_i64, 6), P(disc_i64, 7),                 \
                                        P(disc_i64, 8), P(int, 9), P(float, 10), P(const int*, 11),             \
                                        P(disc_i64, 12));                                                       \
  }                                                                                                             \
  extern "C" void disc_attention_mma_bwd_kv_##D##_##DV##_params(void** p) {                                     \
    disc_attention_mma_bwd_kv_##D##_##DV(P(const T*, 0), P(const T*, 1), P(const T*, 2), P(const T*, 3),        \
                                         P(const float*, 4), P(T*, 5), P(T*, 6), P(disc_i64, 7),                \
                                         P(disc_i64, 8), P(disc_i64, 9), P(int, 10), P(float, 11),              \
                                         P(const int*, 12), P(disc_i64, 13));                                   \
  }
#define DISC_HOST_ATTENTION(D, DV, T)                                                                         \
  extern "C" void disc_attention_fwd_##D##_##DV##_params(void** p) {                                          \
    disc_attention_fwd_##D##_##DV(P(const T*, 0), P(const T*, 1), P(const T*, 2), P(T*, 3), P(disc_i64, 4),   \
                                  P(disc_i64, 5), P(disc_i64, 6), P(int, 7), P(float, 8), P(const int*, 9),   \
                                  P(disc_i64, 10));                                                           \
  }                                                                                                           \
  extern "C" void disc_attention_bwd_q_##D##_##DV##_params(void** p) {                                        \
    disc_attention_bwd_q_##D##_##DV(P(const T*, 0), P(const T*, 1), P(const T*, 2), P(const T*, 3), P(T*, 4), \
                                    P(float*, 5), P(disc_i64, 6), P(disc_i64, 7), P(disc_i64, 8), P(int, 9),  \
                                    P(float, 10), P(const int*, 11), P(disc_i64, 12));                        \
  }                                                                                                           \
  extern "C" void disc_attention_bwd_v_##D##_##DV##_params(void** p) {                                        \
    disc_attention_bwd_v_##D##_##DV(P(const T*, 0), P(const T*, 1), P(const T*, 2), P(const float*, 3),       \
                                    P(T*, 4), P(disc_i64, 5), P(disc_i64, 6), P(disc_i64, 7), P(int, 8),      \
                                    P(float, 9), P(const int*, 10), P(disc_i64, 11));                         \
  }                                                                                                           \
  extern "C" void disc_attention_bwd_k_##D##_##DV##_params(void** p) {                                        \
    disc_attention_bwd_k_##D##_##DV(P(const T*, 0), P(const T*, 1), P(const T*, 2), P(const T*, 3),           \
                                    P(const float*, 4), P(T*, 5), P(disc_i64, 6), P(disc_i64, 7),             \
                                    P(disc_i64, 8), P(int, 9), P(float, 10), P(const int*, 11),               \
                                    P(disc_i64, 12));                                                         \
  }
)";

// GpuOps::Compile for the host: the source (and its DISC_ATTENTION lines' entries) as a shared
// object, built once per source; the image is its path.
class HostOpCompiler {
 public:
  std::string operator()(const std::string& source) {
    const std::string so = dir_.path() + "/ops" + std::to_string(fnv1a(source)) + ".so";
    if (built_.contains(so)) return so;
    std::string entries = kHostEntries;
    std::istringstream lines(source);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("DISC_ATTENTION", 0) == 0)  // DISC_HOST_ATTENTION[_MMA](D, DV, T)
        entries += "DISC_HOST_" + line.substr(5) + "\n";
    const std::string cc = so + ".cc";
    std::ofstream(cc) << kHostIntrinsics << kHostThreads << source << entries;
    const std::string cmd = std::string(DISC_TEST_CXX) +
                            " -std=c++20 -O1 -w -shared -fPIC -pthread -o " + so + " " + cc;
    if (std::system(cmd.c_str()) != 0)
      throw CompileError("the host build of the GPU op kernels failed: " + cmd);
    built_.insert(so);
    return so;
  }

 private:
  ScratchDir dir_;
  std::set<std::string> built_;
};

}  // namespace disc::jit
