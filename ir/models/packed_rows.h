// A language model written over rows of tokens [B, S] (an imported ONNX graph) made to take a
// packed step: whole examples one after another in its one row, attention inside each example
// and never across two, RoPE at each token's position in its own example.
//
//   import with the batch dim bounded by 1 and the row by the step's tokens (T)
//   nn::Packing p = pack_one_row(g, max_sequences);  // inputs `positions` i32[S], `offsets`
//                                                    // i32[N+1]; S is the row's symbol, N new
//
// The layers and attention passes run first, so that the graph's attention and RoPE are disc's
// `attention` and `rope` ops; each then reads the offsets (the positions). What else could mix
// the examples of a row is refused, naming the node: an index along the row (`iota`: positions
// that no rope took), a causal mask or a [.., S, S] value (attention the pass did not find).
#pragma once

#include <cstdint>

#include "ir/graph.h"
#include "ir/nn.h"

namespace disc::ir::models {

// `g` takes `tokens` i32[B, S] (or i64, cast) with B's upper bound 1; N, the examples a step, is
// bounded by `max_sequences`. Throws InvalidArgument (g.source() and why) when `g` cannot pack.
nn::Packing pack_one_row(Graph& g, int64_t max_sequences);

}  // namespace disc::ir::models
