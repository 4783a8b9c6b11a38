// The memory report: one training step's bytes held, node by node, drawn against the cap and the
// lower bound, as an SVG page a person can open in a browser. disc-train writes it next to the
// metrics (memory.svg) for the step with the highest planned peak.
#pragma once

#include <string>

#include "memory/governor.h"

namespace disc::engine {

// Draws the plan at `b` (bytes held with the governor's evictions, and without them).
void write_memory_report(const std::string& path, const ir::Graph& g, memory::Governor& gov,
                         const ir::Bindings& b, int64_t held_before_step);

}  // namespace disc::engine
