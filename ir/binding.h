// Symbol values: bound from the concrete shapes of a graph's arguments (every shape checked
// against what the graph says: ranges, multiple_of, equalities, a bad input refused with a message
// that names the input, the dim, the symbol and the bound it breaks), and the bindings the
// planners look at: the largest step a graph admits, sample shapes to compare schedules on, and
// shapes named on a command line ("B=8,S=64").
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace disc::ir {

using ShapeOf = std::map<std::string, std::pair<DType, std::vector<int64_t>>>;

// Values of every symbol (independent and eliminated). Throws ShapeError or InvalidArgument.
Bindings bind_symbols(const Graph& g, const ShapeOf& args);

// A value's concrete shape under `b`.
std::vector<int64_t> concrete_shape(const Graph& g, const Value& v, const Bindings& b);

// The worst case whose values hold the most elements in all: every independent symbol at its
// upper bound (rounded down to its multiple_of) when no limit binds them, completed. A memory cap
// must hold every worst case (ir/worst_case.h); this one is the shape a report shows first.
Bindings largest_bindings(const Graph& g);

// Bindings at which orders are compared: the first and last worst cases (every independent symbol
// at its upper bound, without limits), every symbol at its hint and at a quarter of its upper bound
// (kept within range and multiple_of). Samples that break an equality the solver kept or a limit
// are left out.
std::vector<Bindings> sample_bindings(const Graph& g);

// "B=8,S=64": the symbols named take the values given, the others keep theirs from `base`.
// Throws InvalidArgument naming the item for an unknown or derived symbol or a non-integer, and
// ShapeError for values outside the graph's ranges.
Bindings parse_bindings(const std::string& text, const Graph& g, const Bindings& base);

// The independent symbols of `b`: "B=8, S=64".
std::string describe_bindings(const Graph& g, const Bindings& b);

}  // namespace disc::ir
