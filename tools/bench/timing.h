// Clock, machine-load and timing-statistics helpers shared by the benchmarks: they run on a shared
// machine, so each prints how busy it was beside its timings.
#pragma once

#include <string>
#include <vector>

namespace disc::bench {

// A monotonic clock in seconds (only differences mean anything).
double now_seconds();

// "load average 0.4 over 1 min, 1.2 over 15 min (2 cores)": how much else ran while the timings
// were taken.
std::string machine_load();

// The q-quantile (0..1) of `v`, interpolated between neighbours; 0 for an empty `v`.
double percentile(std::vector<double> v, double q);

}  // namespace disc::bench
