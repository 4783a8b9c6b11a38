// Concrete shapes the memory planner looks at: the largest step a graph admits, sample shapes to
// compare schedules on, and shapes named on a command line ("B=8,S=64").
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace disc::memory {

// Every independent symbol at its upper bound (rounded down to its multiple_of), completed:
// the step that needs the most memory.
ir::Bindings largest_bindings(const ir::Graph& g);

// Bindings at which orders are compared: every independent symbol at its upper bound, at its hint
// and at a quarter of its upper bound (kept within range and multiple_of). Samples that break an
// equality the solver kept are left out.
std::vector<ir::Bindings> sample_bindings(const ir::Graph& g);

// "B=8,S=64": the symbols named take the values given, the others keep theirs from `base`.
// Throws InvalidArgument naming the item for an unknown or derived symbol or a non-integer, and
// ShapeError for values outside the graph's ranges.
ir::Bindings parse_bindings(const std::string& text, const ir::Graph& g, const ir::Bindings& base);

// The independent symbols of `b`: "B=8, S=64".
std::string describe_bindings(const ir::Graph& g, const ir::Bindings& b);

}  // namespace disc::memory
