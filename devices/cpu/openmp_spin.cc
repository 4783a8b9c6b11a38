// Runs the program again with a short OpenMP spin; see openmp_spin.h.
#include "devices/cpu/openmp_spin.h"

#include <unistd.h>

#include <cstdlib>

namespace disc::devices::cpu {

void run_again_with_short_openmp_spin(char** argv) {
  if (std::getenv("GOMP_SPINCOUNT") != nullptr || std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("GOMP_SPINCOUNT", kShortOpenMpSpin, 0) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure
  unsetenv("GOMP_SPINCOUNT");     // libgomp keeps its default: say so to child processes too
}

}  // namespace disc::devices::cpu
