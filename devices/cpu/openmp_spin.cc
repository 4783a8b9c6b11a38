// Runs the program again with a short OpenMP spin; see openmp_spin.h.
#include "devices/cpu/openmp_spin.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>

namespace disc::devices::cpu {

void run_again_with_short_openmp_spin(char** argv) {
  if (std::getenv("GOMP_SPINCOUNT") != nullptr || std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  // The program's own path, not /proc/self/exe itself: under a tool that runs programs (valgrind)
  // the link names the program while exec of the link would start the tool's binary.
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return;
  path[n] = '\0';
  if (setenv("GOMP_SPINCOUNT", kShortOpenMpSpin, 0) != 0) return;
  execv(path, argv);           // returns only on failure
  unsetenv("GOMP_SPINCOUNT");  // libgomp keeps its default: say so to child processes too
}

}  // namespace disc::devices::cpu
