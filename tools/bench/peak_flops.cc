// Peak f32 FMA throughput; see peak_flops.h. Each kernel iterates acc = acc * x + y on
// independent vector accumulators. x < 1 makes every chain converge to y / (1 - x), so values
// stay normal (no overflow, no denormal slow path) however long it runs.
#include "peak_flops.h"

#include <immintrin.h>

#include <cstdint>
#include <latch>
#include <thread>
#include <vector>

#include "timing.h"

namespace disc::bench {
namespace {

// AVX-512 has 32 vector registers: 16 chains hide a 4-cycle latency on 2 FMA ports twice over.
constexpr int kChains512 = 16;
// AVX2 has 16: 12 chains plus x and y fit without spilling.
constexpr int kChains256 = 12;

__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iters) {
  __m512 acc[kChains512];
  for (int c = 0; c < kChains512; ++c) acc[c] = _mm512_set1_ps(0.01f * c);
  const __m512 x = _mm512_set1_ps(0.9999f), y = _mm512_set1_ps(1e-4f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains512; ++c) acc[c] = _mm512_fmadd_ps(acc[c], x, y);
  }
  for (int c = 1; c < kChains512; ++c) acc[0] = _mm512_add_ps(acc[0], acc[c]);
  // Two lanes are enough to keep the loop alive (the caller uses the result). Not
  // _mm512_reduce_add_ps: GCC 12 warns about uninitialized values inside it.
  float lanes[16];
  _mm512_storeu_ps(lanes, acc[0]);
  return lanes[0] + lanes[15];
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iters) {
  __m256 acc[kChains256];
  for (int c = 0; c < kChains256; ++c) acc[c] = _mm256_set1_ps(0.01f * c);
  const __m256 x = _mm256_set1_ps(0.9999f), y = _mm256_set1_ps(1e-4f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains256; ++c) acc[c] = _mm256_fmadd_ps(acc[c], x, y);
  }
  for (int c = 1; c < kChains256; ++c) acc[0] = _mm256_add_ps(acc[0], acc[c]);
  float lanes[8];
  _mm256_storeu_ps(lanes, acc[0]);
  return lanes[0] + lanes[7];
}

struct Kernel {
  const char* isa;
  float (*loop)(int64_t);
  double flops_per_iter;  // chains * lanes * 2 (an FMA is two FLOPs)
};

Kernel pick_kernel() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"avx512f", fma_loop_avx512, kChains512 * 16 * 2};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return {"avx2+fma", fma_loop_avx2, kChains256 * 8 * 2};
  }
  return {"none", nullptr, 0};
}

volatile float g_sink;  // keeps every kernel's result alive

// FLOP/s of `threads` threads each running `iters` iterations, started together.
double run_threads(const Kernel& k, int threads, int64_t iters) {
  std::latch start(threads + 1);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      start.arrive_and_wait();
      g_sink = k.loop(iters);
    });
  }
  start.arrive_and_wait();
  const double t0 = now_seconds();
  for (auto& th : pool) th.join();
  return k.flops_per_iter * static_cast<double>(iters) * threads / (now_seconds() - t0);
}

// Iterations that take about `seconds` on one thread, from a short calibration run.
int64_t calibrate(const Kernel& k, double seconds) {
  int64_t iters = 1 << 16;
  double t = 0;
  while (t < 0.02) {
    iters *= 4;
    const double t0 = now_seconds();
    g_sink = k.loop(iters);
    t = now_seconds() - t0;
  }
  return static_cast<int64_t>(static_cast<double>(iters) * seconds / t);
}

}  // namespace

PeakFlops measure_peak_flops(int threads, double seconds) {
  const Kernel k = pick_kernel();
  PeakFlops result{k.isa, 0, 0, threads};
  if (k.loop == nullptr) return result;
  const int64_t iters = calibrate(k, seconds);
  result.one_thread = run_threads(k, 1, iters);
  result.all_threads = run_threads(k, threads, iters);
  return result;
}

}  // namespace disc::bench
