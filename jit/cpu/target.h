// The machine a CPU kernel is compiled for: LLVM's view of the host (CPU name, the features it
// has, the vector width they allow). Emitters read `vector_bits` to choose unrolling and remainder
// handling; kernel caches put `fingerprint()` in their keys, so an object compiled on one machine
// is never loaded on a machine with fewer features or another LLVM.
//
//   jit::Target t = jit::host_target();
//   t.vector_bits;        // 512 on an AVX-512 host, 256 with AVX/AVX2, else 128
//   t.fingerprint();      // "x86_64-pc-linux-gnu|znver4|+adx,+aes,...|llvm-19.1.7"
#pragma once

#include <string>

namespace disc::jit {

struct Target {
  std::string triple;     // the process's target triple, e.g. "x86_64-pc-linux-gnu"
  std::string cpu;        // LLVM's host CPU name, e.g. "znver4"; informative, not a decision input
  std::string features;   // the enabled features, sorted: "+adx,+aes,+avx,+avx2,+avx512f,..."
  int vector_bits = 128;  // widest vector register the features allow the compiler to use

  // A stable string for cache keys: triple, CPU, sorted enabled features and the LLVM version.
  std::string fingerprint() const;
};

// The host as LLVM detects it (once per process, then copied). The vector width comes from the
// features, not the CPU name: a CPU LLVM does not know by name still reports its features, and
// virtual machines may hide features the CPU model would have.
Target host_target();

}  // namespace disc::jit
