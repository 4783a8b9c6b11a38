// Data parallelism in the training step: every rank of a run holds the same graph and trains on its
// share of the global batch. These build the parts that make the ranks' step equal to one
// process's step on the whole batch: the loss over every rank's examples, and the gradients
// summed over the ranks in buckets (`all_reduce` nodes, ir/ops/collective_ops.cc) before the
// gradient norm, clipping and updates read them.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace disc::ir {

struct DataParallel {
  // A bucket closes once its gradients hold at least this many bytes (PyTorch DDP's default).
  int64_t bucket_bytes = 25 << 20;
  // ZeRO stage 1: each of the `ranks` ranks keeps the optimizer state of its part of each
  // parameter (the flat elements [rank * s, rank * s + s), s = ceil(numel / ranks)) and updates
  // that part alone, from its part of the summed gradients (reduce_scatter); the ranks' updated
  // parts, joined (all_gather), are the new parameter. The gradient norm sums the ranks' parts'.
  // The step then takes the input `rank` (i64).
  bool shard_optimizer = false;
  int64_t ranks = 1;
};

// The indices of `values` in the order `g` makes them (their producers' order; arguments first):
// for gradients, the order the backward makes them, the last layer's first.
std::vector<size_t> made_order(const Graph& g, const std::vector<Value*>& values);

// How many labels the cross-entropy that made `loss` counts (labels != ignore_index), as a scalar
// of the loss's dtype; 1 for any other loss.
Value* loss_count(Graph& g, Value* loss);

// The loss of the global batch: the ranks' losses, each times the count it averages over, summed
// and divided by the sum of the counts. For a cross-entropy loss (cross_entropy,
// linear_cross_entropy) the count is its labels != ignore_index, so the result is the mean over
// the global batch's real tokens however the ranks' rows differ in length; for any other loss it
// is 1 (the mean of the ranks' losses). Its gradient is each rank's share: count / total count
// times the local loss's.
Value* global_loss(Graph& g, Value* loss);

// `grads` summed over the ranks: one all_reduce node per bucket of about `bucket_bytes`, filled in
// the order the backward makes the gradients (their producers' order in `g`), so that the first
// bucket can be summed while the backward still runs. Returns the sums in the order of `grads`.
std::vector<Value*> all_reduce_in_buckets(Graph& g, const std::vector<Value*>& grads,
                                          int64_t bucket_bytes);

// Rank `rank`'s part of `numel` elements of `esize` bytes each at `whole`, as rank_shard takes
// it: the elements [rank * s, rank * s + s) into the s = `part_size` elements at `part`, zeros
// past the end of `whole`.
void copy_rank_part(const void* whole, int64_t numel, int64_t esize, int64_t rank, void* part,
                    int64_t part_size);

// The same with each rank keeping its part of each sum (the flat elements rank_shard takes): one
// reduce_scatter node per bucket (ZeRO stage 1, DataParallel::shard_optimizer).
std::vector<Value*> reduce_scatter_in_buckets(Graph& g, const std::vector<Value*>& grads,
                                              int64_t bucket_bytes, int64_t ranks);

}  // namespace disc::ir
