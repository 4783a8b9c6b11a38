// Clock and machine-load helpers shared by the benchmarks: they run on a shared machine, so each
// prints how busy it was beside its timings.
#pragma once

#include <string>

namespace disc::bench {

// A monotonic clock in seconds (only differences mean anything).
double now_seconds();

// "load average 0.4 over 1 min, 1.2 over 15 min (2 cores)": how much else ran while the timings
// were taken.
std::string machine_load();

}  // namespace disc::bench
