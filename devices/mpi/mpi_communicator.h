// The Communicator over MPI (Open MPI from Debian): the ranks that `mpirun -np N` started.
#pragma once

#include <memory>

#include "devices/communicator.h"

namespace disc::devices {

// MPI_COMM_WORLD of this process, MPI initialised on the first call and finalised at exit. Null
// when the process was not started by mpirun (a single process needs no MPI). Errors of MPI
// calls are DeviceErrors naming the call and the rank.
std::shared_ptr<Communicator> mpi_world();

// The world when mpi_world() has made it already (null otherwise): an error handler ends every
// rank through it without starting MPI for a process that never used it.
std::shared_ptr<Communicator> mpi_world_if_started();

}  // namespace disc::devices
