// What a trace and the metrics call what a step ran, in words: a node's span (a fused node by its
// kernel's arithmetic) and the JIT's shape buckets of a step's symbols.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/binding.h"
#include "ir/graph.h"

namespace disc::engine {

// "fused: exp, mul, reduce_sum" (the kernel's arithmetic, in order of first use, loads and stores
// left out, at most six); any other node by its op's name.
std::string span_name(const ir::Node& n);

// "B=8,S=64-127": the shape bucket of each symbol, under these boundaries (none: powers of two).
// Steps in the same buckets run the same kernels.
std::string bucket_of(const ir::Bindings& b, const std::vector<int64_t>& boundaries);

}  // namespace disc::engine
