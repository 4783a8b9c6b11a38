#include "ranks.h"

#include <spdlog/spdlog.h>

#include "base/error.h"
#include "base/hash.h"
#include "engine/world.h"

namespace disc::apps {
namespace {

// A hash of the resolved config and of the run's identity (its data's fingerprint included).
uint64_t run_hash(const Config& c, const std::map<std::string, std::string>& identity) {
  std::string all = c.to_yaml();
  for (const auto& [key, value] : identity) all += key + "=" + value + "\n";
  return fnv1a(all);
}

}  // namespace

bool Ranks::any(bool mine) const {
  if (!world) return mine;
  int64_t count = mine ? 1 : 0;
  world->all_reduce_sum(&count, 1, DType::kI64);
  return count > 0;
}

Ranks join_ranks(const Config& c, RunSetup& s, const std::map<std::string, std::string>& identity) {
  Ranks r;
  r.world = engine::mpi_world();
  if (!r.world || r.world->size() == 1) return r;
  r.rank = r.world->rank();
  r.size = r.world->size();
  r.world->set_timeout(c.get_float("distributed.timeout"));
  if (!r.writes()) spdlog::set_level(spdlog::level::warn);
  // Every rank takes part in each check before any rank throws, so none is left waiting.
  uint64_t root = run_hash(c, identity);
  const uint64_t mine = root;
  r.world->broadcast(&root, sizeof root, 0);
  int64_t differ = mine != root ? 1 : 0;
  r.world->all_reduce_sum(&differ, 1, DType::kI64);
  if (differ > 0) {
    throw InvalidArgument(std::to_string(differ) + " of the " + std::to_string(r.size) +
                          " ranks run another config or other data than rank 0: start every "
                          "rank with the same config file and data (mpirun -np N disc-train run "
                          "--config F)");
  }
  const int64_t batch = s.batching.batch_size;
  if (s.batching.token_budget == 0 && batch % r.size != 0) {
    throw InvalidArgument("data.batch_size " + std::to_string(batch) +
                          " is not a multiple of the " + std::to_string(r.size) +
                          " ranks: each rank takes an equal share of a " +
                          "batch; set data.batch_size to a multiple of " + std::to_string(r.size) +
                          " or start " + "another number of ranks");
  }
  s.trainer.communicator = r.world;
  s.trainer.bucket_bytes = c.get_bytes("distributed.bucket_bytes");
  s.trainer.shard_optimizer = c.get_bool("distributed.shard_optimizer");
  if (s.trainer.shard_optimizer && c.get_string("optimizer.state_dtype") == "int8") {
    throw InvalidArgument(
        "distributed.shard_optimizer cannot shard an int8 optimizer state yet (each rank's part "
        "would have scales a checkpoint cannot join): set optimizer.state_dtype to bf16, or "
        "distributed.shard_optimizer to false");
  }
  spdlog::info("data parallel: {} ranks ({})", r.size, r.world->describe());
  return r;
}

}  // namespace disc::apps
