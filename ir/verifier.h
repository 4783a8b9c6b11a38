// Checks that a graph is well formed: definitions before uses, consistent use lists, attributes
// that fit their op, result types that match what the op infers, declared symbols.
#pragma once

#include "ir/graph.h"

namespace disc::ir {

// Throws VerifyError naming the first inconsistency found (the node, and what disagrees).
void verify(const Graph& g);

}  // namespace disc::ir
