// The optimizer state of a run that shards it (ZeRO stage 1, TrainerOptions::shard_optimizer):
// each rank holds its part of each parameter's state (ir/data_parallel.h), while a checkpoint
// holds the whole, so that a run resumes at any world size, sharded or not.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "devices/communicator.h"
#include "engine/tensor.h"
#include "ir/graph.h"

namespace disc::engine {

class StateShards {
 public:
  StateShards() = default;
  // The state arguments of `step` that hold a part: each parameter's `.m`, `.v` or `.momentum`,
  // where the step shards them over `comm`'s ranks (null, or sharding off: none).
  StateShards(const ir::Graph& step, const std::vector<ir::Value*>& params,
              devices::Communicator* comm, bool sharding);

  bool empty() const { return whole_shape_.empty(); }
  // The shape of `name` in a checkpoint: its parameter's where it holds a part.
  std::vector<int64_t> saved_shape(const std::string& name, const Tensor& t) const;
  // `state` with every part joined whole, in tensors of `host` (memory outside the step's cap). A
  // collective: every rank calls it at the same step.
  std::map<std::string, Tensor> gather(const std::map<std::string, Tensor>& state,
                                       memory::Allocator& host) const;
  // Copies this rank's part of `whole` (a checkpoint's tensor) into `part`; a whole tensor into a
  // whole one where `name` holds no part.
  void take_part(const std::string& name, const Tensor& whole, const Tensor& part) const;

 private:
  devices::Communicator* comm_ = nullptr;
  std::map<std::string, std::vector<int64_t>> whole_shape_;  // by state name
};

}  // namespace disc::engine
