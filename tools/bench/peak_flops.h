// Measures the machine's peak f32 FLOP/s with a tight FMA kernel: independent accumulator chains,
// enough of them to cover the FMA latency on every port, so the loop runs at the FMA units'
// throughput. This is the ceiling other kernels are compared against ("% of peak").
#pragma once

#include <string>

namespace disc::bench {

struct PeakFlops {
  std::string isa;         // "avx512f", "avx2+fma", or "none" (then both rates are 0)
  double one_thread = 0;   // FLOP/s
  double all_threads = 0;  // FLOP/s with `threads` threads at once
  int threads = 0;
};

// Runs each measurement for about `seconds`. The ISA is picked at run time, so the binary stays
// generic x86-64.
PeakFlops measure_peak_flops(int threads, double seconds);

}  // namespace disc::bench
