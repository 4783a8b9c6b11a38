// The ranks of a data-parallel `disc-train run` (mpirun -np N disc-train run --config F): every
// rank builds the same step and takes its share of each global batch (data::rank_share); rank 0
// alone writes logs, metrics, traces, checkpoints and exports. A single process is one rank.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "config.h"
#include "engine/world.h"
#include "setup.h"

namespace disc::apps {

struct Ranks {
  std::shared_ptr<engine::Communicator> world;  // null: one process
  int rank = 0, size = 1;

  bool writes() const { return rank == 0; }
  // Whether `mine` holds on any rank (a stop signal that reached some ranks first): the ranks
  // decide together, so that none waits in a collective for a rank that has stopped.
  bool any(bool mine) const;
};

// Joins the ranks mpirun started, if it started this process. Before anything is written, checks
// that every rank runs the same config on the same data (a hash of both, compared with rank 0's)
// and that data.batch_size is a multiple of the ranks; InvalidArgument, on every rank, otherwise.
// Sets the communicator in s.trainer and its timeout (distributed.timeout), and quietens every
// rank but rank 0 to warnings.
Ranks join_ranks(const Config& c, RunSetup& s, const std::map<std::string, std::string>& identity);

}  // namespace disc::apps
