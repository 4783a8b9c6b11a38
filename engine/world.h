// The ranks a data-parallel Trainer runs among (TrainerOptions::communicator), as an embedder
// reaches them through the engine's API: MPI's world when mpirun started this process.
//
//   engine::TrainerOptions o;
//   o.communicator = engine::mpi_world();  // null under a plain process: one rank
#pragma once

#include <memory>

#include "devices/communicator.h"
#include "devices/mpi/mpi_communicator.h"

namespace disc::engine {

using devices::Communicator;
// MPI_COMM_WORLD of this process (MPI started on the first call), or null without mpirun.
using devices::mpi_world;
// The world when mpi_world() made it already, else null: for error handlers.
using devices::mpi_world_if_started;

}  // namespace disc::engine
