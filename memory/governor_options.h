// What a run asks of the memory governor (governor.h): the cap and the ways to keep it. Apart from
// the governor, so that TrainerOptions (the public API) does not pull the planner in.
#pragma once

#include <cstdint>

namespace disc::memory {

struct GovernorOptions {
  int64_t cap = 0;       // bytes; 0: none
  bool schedule = true;  // memory-aware op order (else the graph's order)
  bool remat = true;     // recompute evicted values
  bool offload = false;  // copy evicted values to the host (devices with separate memory)
};

}  // namespace disc::memory
