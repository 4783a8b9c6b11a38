// Binds a graph's symbols from the concrete shapes of its arguments, and checks every shape
// against what the graph says (ranges, multiple_of, equalities). A bad input is refused with a
// message that names the input, the dim, the symbol and the bound it breaks.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace disc::engine {

using ShapeOf = std::map<std::string, std::pair<ir::DType, std::vector<int64_t>>>;

// Values of every symbol (independent and eliminated). Throws ShapeError or InvalidArgument.
ir::Bindings bind_symbols(const ir::Graph& g, const ShapeOf& args);

// A value's concrete shape under `b`.
std::vector<int64_t> concrete_shape(const ir::Graph& g, const ir::Value& v, const ir::Bindings& b);

}  // namespace disc::engine
