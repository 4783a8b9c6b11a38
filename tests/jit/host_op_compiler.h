// GpuOps::Compile for the host: the GPU op kernels' source (jit/gpu/gpu_op_source.h) built as a
// shared object with the compiler that built the tests, for HostGpuRuntime (host_gpu_runtime.h)
// to load. A launch runs each block's threads at once, on host threads of their own that meet at
// every __syncthreads, and the blocks one after another (__shared__ arrays are the object's
// statics): so a block's shared loads, its idle threads and its barriers run as on a GPU.
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
#include "jit/hash.h"
#include "tests/jit/cuda_host_runner.h"
#include "tests/jit/scratch_dir.h"

namespace disc::jit {

// What the host build adds: threads and blocks, CUDA's atomicCAS, disc_host_run (the launch, for
// HostGpuRuntime) and, for each kernel, an entry that takes cuLaunchKernel's parameter array.
inline constexpr const char* kHostThreads = R"(
#define DISC_HOST_BUILD 1
#include <barrier>
#include <thread>
#include <vector>
static thread_local disc_dim threadIdx, blockIdx;
static disc_dim blockDim, gridDim;
static std::barrier<>* disc_host_block;
static void __syncthreads() { disc_host_block->arrive_and_wait(); }
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
extern "C" void disc_host_run(void (*entry)(void**), void** params, unsigned grid, unsigned block) {
  std::barrier<> sync(block);
  disc_host_block = &sync;
  blockDim = {block}, gridDim = {grid};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < block; ++t)
    threads.emplace_back([&, t] {
      threadIdx = {t};
      for (unsigned b = 0; b < grid; ++b) {
        blockIdx = {b};
        entry(params);
        sync.arrive_and_wait();  // the block's threads are done before the next block starts
      }
    });
  for (std::thread& t : threads) t.join();
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
                  P(const double*, 6), P(double, 7));                                                       \
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
                    P(disc_i64, 5), P(unsigned long long*, 6));                                            \
  }                                                                                                        \
  extern "C" void disc_scatter_order_##S##_params(void** p) {                                              \
    disc_scatter_order_##S(P(const I*, 0), P(disc_i64, 1), P(disc_i64, 2), P(int*, 3),                      \
                           P(unsigned long long*, 4));                                                      \
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
                          P(disc_i64, 5), P(int, 6), P(float, 7), P(double*, 8));                           \
  }
DISC_FLOATS(DISC_HOST_LCE)
extern "C" void disc_lce_loss_params(void** p) {
  disc_lce_loss(P(const double*, 0), P(disc_i64, 1), P(disc_i64, 2), P(float*, 3));
}
#define DISC_HOST_ATTENTION_MMA(D, DV, T)                                                                       \
  extern "C" void disc_attention_mma_fwd_##D##_##DV##_params(void** p) {                                        \
    disc_attention_mma_fwd_##D##_##DV(P(const T*, 0), P(const T*, 1), P(const T*, 2), P(T*, 3), P(disc_i64, 4), \
                                      P(disc_i64, 5), P(disc_i64, 6), P(int, 7), P(float, 8));                  \
  }                                                                                                             \
  extern "C" void disc_attention_mma_bwd_q_##D##_##DV##_params(void** p) {                                      \
    disc_attention_mma_bwd_q_##D##_##DV(P(const T*, 0), P(const T*, 1), P(const T*, 2), P(const T*, 3),         \
                                        P(T*, 4), P(float*, 5), P(disc_i64, 6), P(disc_i64, 7),                 \
                                        P(disc_i64, 8), P(int, 9), P(float, 10));                               \
  }                                                                                                             \
  extern "C" void disc_attention_mma_bwd_kv_##D##_##DV##_params(void** p) {                                     \
    disc_attention_mma_bwd_kv_##D##_##DV(P(const T*, 0), P(const T*, 1), P(const T*, 2), P(const T*, 3),        \
                                         P(const float*, 4), P(T*, 5), P(T*, 6), P(disc_i64, 7),                \
                                         P(disc_i64, 8), P(disc_i64, 9), P(int, 10), P(float, 11));             \
  }
#define DISC_HOST_ATTENTION(D, DV, T)                                                                         \
  extern "C" void disc_attention_fwd_##D##_##DV##_params(void** p) {                                          \
    disc_attention_fwd_##D##_##DV(P(const T*, 0), P(const T*, 1), P(const T*, 2), P(T*, 3), P(disc_i64, 4),   \
                                  P(disc_i64, 5), P(disc_i64, 6), P(int, 7), P(float, 8));                    \
  }                                                                                                           \
  extern "C" void disc_attention_bwd_q_##D##_##DV##_params(void** p) {                                        \
    disc_attention_bwd_q_##D##_##DV(P(const T*, 0), P(const T*, 1), P(const T*, 2), P(const T*, 3), P(T*, 4), \
                                    P(float*, 5), P(disc_i64, 6), P(disc_i64, 7), P(disc_i64, 8), P(int, 9),  \
                                    P(float, 10));                                                            \
  }                                                                                                           \
  extern "C" void disc_attention_bwd_v_##D##_##DV##_params(void** p) {                                        \
    disc_attention_bwd_v_##D##_##DV(P(const T*, 0), P(const T*, 1), P(const T*, 2), P(const float*, 3),       \
                                    P(T*, 4), P(disc_i64, 5), P(disc_i64, 6), P(disc_i64, 7), P(int, 8),      \
                                    P(float, 9));                                                             \
  }                                                                                                           \
  extern "C" void disc_attention_bwd_k_##D##_##DV##_params(void** p) {                                        \
    disc_attention_bwd_k_##D##_##DV(P(const T*, 0), P(const T*, 1), P(const T*, 2), P(const T*, 3),           \
                                    P(const float*, 4), P(T*, 5), P(disc_i64, 6), P(disc_i64, 7),             \
                                    P(disc_i64, 8), P(int, 9), P(float, 10));                                 \
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
