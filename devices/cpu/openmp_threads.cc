// Finds the OpenMP runtime's thread-count functions at run time; see openmp_threads.h.
#include "devices/cpu/openmp_threads.h"

#include <dlfcn.h>

namespace disc::devices::cpu {
namespace {

struct OpenMpApi {
  int (*get_max_threads)() = nullptr;
  void (*set_num_threads)(int) = nullptr;
};

// RTLD_DEFAULT searches every library loaded at startup, libdnnl's libgomp among them.
const OpenMpApi& api() {
  static const OpenMpApi found = [] {
    OpenMpApi a;
    a.get_max_threads = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    a.set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    return a;
  }();
  return found;
}

}  // namespace

int openmp_max_threads() {
  return api().get_max_threads != nullptr ? api().get_max_threads() : 0;
}

void set_openmp_threads(int threads) {
  if (api().set_num_threads != nullptr) api().set_num_threads(threads);
}

}  // namespace disc::devices::cpu
