// The ranks of a data-parallel run, and the collectives they run together. Every rank must call
// the same collectives in the same order with the same counts (the training step's graph makes
// them so): a collective that one rank skips waits for it forever.
//
//   std::shared_ptr<devices::Communicator> world = devices::mpi_world();  // null: not launched
//   float g[3] = {...};                                                    //   by mpirun
//   world->all_reduce_sum(g, 3, DType::kF32);  // every rank now holds the sum over the ranks
//
//   Collective c = world->start_all_reduce_sum(g, 3, DType::kF32);  // runs on the communicator's
//   ...                                                              // thread: compute meanwhile,
//   c.get();                                                         // g untouched until here
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <string>

#include "base/dtype.h"

namespace disc::devices {

// When a collective ran on the communicator's thread: for traces and the share of it hidden.
struct CollectiveSpan {
  std::chrono::steady_clock::time_point begin, end;
};
// A collective under way; get() waits for it and rethrows its error.
using Collective = std::shared_future<CollectiveSpan>;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "mpi (Open MPI v4.1.4), rank 0 of 2": logs and errors.
  virtual std::string describe() const = 0;
  // Starts replacing `count` values at `data` (host memory) with their elementwise sum over every
  // rank: f32, f64 and i64. Collectives run one after the other, in the order started, on a
  // thread of the communicator's own, so the caller computes meanwhile; `data` is neither read
  // nor written by anyone else until the returned Collective is ready. The sum's order depends
  // only on the number of ranks and the count, so a run repeats bit for bit at one world size.
  virtual Collective start_all_reduce_sum(void* data, int64_t count, DType dtype) = 0;
  void all_reduce_sum(void* data, int64_t count, DType dtype) {
    start_all_reduce_sum(data, count, dtype).get();
  }
  // Starts summing `count` values at `data` over the ranks and writes this rank's part of the sum,
  // its values [rank * s, rank * s + s) with s = ceil(count / size) (zeros past the end), to
  // `part`, on the communicator's thread. `data` is copied before this returns.
  virtual Collective start_reduce_scatter_sum(const void* data, int64_t count, DType dtype,
                                              void* part) = 0;
  // Starts joining every rank's `count` values at `part` (f32, f64 or i64), in rank order, and
  // writes the first `all_count` of them to `all`, on the communicator's thread like the sums.
  // `part` is copied before this returns; `all` is written until the Collective is ready.
  virtual Collective start_all_gather(const void* part, int64_t count, DType dtype, void* all,
                                      int64_t all_count) = 0;
  // Rank `root`'s `bytes` bytes at `data` into every rank's `data`, after the collectives started
  // before it.
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  // Ends every rank's process with exit code `code`: what a rank that fails does, so that no other
  // rank waits forever in a collective it will never join.
  [[noreturn]] virtual void abort(int code) = 0;
  // A collective that waits more than `seconds` for the other ranks (one of them hung, stopped or
  // died without its launcher noticing) ends every rank with exit code 3, after a line on stderr
  // naming this rank, the call and the wait. 0 (the default): wait forever.
  virtual void set_timeout(double seconds) = 0;
};

}  // namespace disc::devices
