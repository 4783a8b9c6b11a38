// What a training step reports: its statistics (StepStats, in every StepResult) and, for traces,
// the events of its execution as they happen (StepEvent, to a StepObserver). Part of the public
// API (engine/trainer.h).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ir/dim_expr.h"

namespace disc::ir {
class Node;
class Value;
}  // namespace disc::ir

namespace disc::engine {

struct StepStats {
  double ms = 0;
  int64_t live_peak_bytes = 0;      // most bytes held at once during the step, arguments included
  int64_t reserved_peak_bytes = 0;  // most bytes reserved from the device (allocator caches too)
  int64_t planned_peak_bytes = 0;   // the plan's simulated peak
  int64_t held_before_step_bytes = 0;  // allocated as the step began (arguments and the like)
  int64_t allocations = 0;
  int64_t evictions = 0;
  int64_t recomputes = 0;  // nodes rerun to regenerate evicted values
  int64_t reloads = 0;
  double recompute_flops = 0;
  int64_t reload_bytes = 0;        // copied back from the host
  int64_t fused_kernels = 0;       // JIT kernels run (each may cover several nodes)
  int64_t kernel_compiles = 0;     // JIT kernels compiled from IR (optimised and code-generated)
  int64_t kernel_cache_loads = 0;  // JIT kernels whose object came from the kernel cache
  double compile_ms = 0;           // time spent compiling or loading kernels during the step
  std::vector<double> kernel_compile_ms;  // each kernel compiled (not loaded), in order: wall ms
  int64_t interpreted_kernels = 0;  // background compilation: fused nodes interpreted, not ready
  int64_t host_staged_nodes = 0;  // on a GPU: nodes run on the host (no GPU kernel for the op yet)
  int64_t staged_bytes = 0;       // ... the bytes of their operands and results copied
  // Data parallelism: the collectives' time on the communicator's thread, and the part of it the
  // step waited for (the rest ran beside the step's nodes, hidden).
  double collective_ms = 0;
  double collective_wait_ms = 0;
  ir::Bindings bindings;  // the symbol values of this step
};

// What the executor does, as it happens: for traces.
struct StepEvent {
  // kCollective: a node's collectives on the communicator's thread, reported once the step has
  // waited for them.
  enum class Kind { kRun, kEvict, kRecompute, kReload, kCollective };
  Kind kind = Kind::kRun;
  const ir::Node* node = nullptr;  // kRun, kRecompute, kCollective: the node
  const ir::Value* value =
      nullptr;                      // kEvict, kRecompute, kReload: the value evicted or regenerated
  double begin_us = 0, end_us = 0;  // since the step began
  int64_t live_bytes = 0;           // after the event
};
using StepObserver = std::function<void(const StepEvent&)>;

}  // namespace disc::engine
