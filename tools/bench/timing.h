// Clock, machine-load and timing-statistics helpers shared by the benchmarks: they run on a shared
// machine, so each prints how busy it was beside its timings.
#pragma once

#include <string>
#include <vector>

namespace disc::bench {

// A monotonic clock in seconds (only differences mean anything).
double now_seconds();

// "AMD EPYC 9R14 96-Core Processor, avx512_bf16 yes, AMX no": the CPU and the 16-bit dot-product
// instructions its bf16 figures depend on (from /proc/cpuinfo; "cpu unknown" elsewhere).
std::string cpu_facts();

// cpu_facts(), then "load average 0.4 over 1 min, 1.2 over 15 min (2 cores)": which machine, and
// how much else ran while the timings were taken. Every benchmark prints it.
std::string machine_load();

// GOMP_SPINCOUNT as the benchmark runs with it (devices/cpu/openmp_spin.h: disc-train shortens
// libgomp's spin, and so do the benchmarks that call run_again_with_short_openmp_spin), or
// "unset (libgomp's default)".
std::string openmp_spin();

// The q-quantile (0..1) of `v`, interpolated between neighbours; 0 for an empty `v`.
double percentile(std::vector<double> v, double q);

}  // namespace disc::bench
