// The graph text format: print and parse a whole graph, exactly round-tripping.
//
//   graph @mlp {
//     sym B in [1, 256] hint 32
//     input %x : f32[B, 784]
//     param %w : f32[784, 10]
//     %y = matmul(%x, %w) : f32[B, 10]
//     %l = reduce_mean(%y) {axes = [0, 1]} : f32[]
//     output loss = %l
//     update %w = %w.new     // after the step, param %w takes %w.new's value (optimizers)
//   }
//
// Attributes print sorted, and only where they differ from the op's default. Symbols print with
// their declared bounds.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace disc::ir {

std::string print_graph(const Graph& g);

// Parses one graph. Throws ParseError ("file:line:col: what was expected") for malformed text,
// and VerifyError (with the location) for a well-formed node that is inconsistent.
std::unique_ptr<Graph> parse_graph(std::string_view text, const std::string& source = "<input>");
// Reads and parses a file; a file that cannot be read throws InvalidArgument.
std::unique_ptr<Graph> parse_graph_file(const std::string& path);

// A dim expression such as `4096*B*S + 7`; every identifier is a symbol.
DimExpr parse_dim_expr(std::string_view text);

}  // namespace disc::ir
