// The process's resident memory (Linux /proc), for the benchmarks' "peak RSS" columns: every
// system is measured by the memory the operating system gave it, whatever its own accounting.
//
//   reset_peak_resident();
//   ... one system's steps ...
//   int64_t peak = peak_resident_bytes();
#pragma once

#include <cstdint>

namespace disc::bench {

// Resident bytes now (VmRSS); 0 where /proc/self/status cannot be read.
int64_t resident_bytes();

// The most resident bytes since the process started or the last reset (VmHWM); 0 where unknown.
int64_t peak_resident_bytes();

// Restarts the peak at the current resident bytes (writes 5 to /proc/self/clear_refs), so that
// systems run one after another in one process each get their own peak. Returns false where the
// kernel refuses (the peak then stays the process's).
bool reset_peak_resident();

}  // namespace disc::bench
