// How long OpenMP's idle workers spin. oneDNN's GEMMs run on libgomp, disc's own kernels (JIT
// kernels, block attention) on TBB. After each GEMM libgomp's workers spin for the next parallel
// region, by default 300,000 turns (about 3 ms), on the very cores TBB's workers then need: on 2
// cores the kernel that follows a GEMM runs at half speed. GOMP_SPINCOUNT=10000 makes them sleep
// after about 0.1 ms: a padded Llama step on 2 cores runs 5-15% faster than with the default.
// 1000 (about 10 us) was as fast for padded steps, but a packed step's attention runs a small GEMM
// every 50-100 us, and each then had to wake the sleeping workers: disc-train on
// configs/codealpaca.yaml (packed) ran 26,000-27,000 tokens/s with 1000 and 31,700-32,100 with
// 10000; padded steps within 3% either way (2-core Xeon, docs/performance.md).
//
// libgomp reads its environment once, when it is loaded, before main. A setenv in main comes too
// late, and one in an executable's .preinit_array is undone when libc initialises; so a program
// sets it by running itself again.
#pragma once

namespace disc::devices::cpu {

// The spin disc asks for when the user set none.
inline constexpr const char* kShortOpenMpSpin = "10000";

// Call first thing in main. When neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY is set, sets
// GOMP_SPINCOUNT and runs this program again (the file /proc/self/exe names) with the same
// arguments; the new process finds the variable set and goes on. Returns when the user chose a
// spin, or when the program cannot be run again (it then goes on with libgomp's default). Child
// processes inherit the variable.
void run_again_with_short_openmp_spin(char** argv);

}  // namespace disc::devices::cpu
