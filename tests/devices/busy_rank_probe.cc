// The watchdog's second case (devices/mpi/mpi_watchdog.h), which a signal cannot make: a rank
// alive and answering, but busy outside MPI, never reaching the collective the others wait in.
// Under `mpirun -np 2` (tests/devices/CMakeLists.txt): rank 1 sleeps while rank 0 sums with a
// one-second timeout; rank 0 must end the job naming rank 1 as busy, which ctest looks for in
// the output.
#include <chrono>
#include <cstdio>
#include <thread>

#include "devices/mpi/mpi_communicator.h"

int main() {
  const std::shared_ptr<disc::devices::Communicator> world = disc::devices::mpi_world();
  if (!world || world->size() != 2) {
    std::fprintf(stderr, "run this under mpirun -np 2\n");
    return 2;
  }
  world->set_timeout(1);
  if (world->rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(60));
  int64_t one = 1;
  world->all_reduce_sum(&one, 1, disc::DType::kI64);
  std::fprintf(stderr, "the sum ended: rank 0's watchdog did not\n");
  return 1;
}
