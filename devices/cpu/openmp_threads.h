// The thread count of the OpenMP runtime that oneDNN runs on (the Debian build uses GCC's
// libgomp). Its functions are looked up at run time in the loaded libraries rather than taken
// from <omp.h>, for two reasons: a clang build (the sanitizer CI) has no omp.h for libgomp and
// would link LLVM's libomp instead, a second OpenMP runtime beside oneDNN's; and the lookup
// finds exactly the runtime oneDNN loaded, whichever it is.
#pragma once

namespace disc::devices::cpu {

// The threads the calling thread's next parallel region gets; 0 when no OpenMP runtime is loaded
// (a oneDNN built for TBB or a thread pool), where there is nothing to keep in step.
int openmp_max_threads();

// Sets that count for parallel regions started from the calling thread (OpenMP keeps it per
// thread). Does nothing when no OpenMP runtime is loaded.
void set_openmp_threads(int threads);

}  // namespace disc::devices::cpu
