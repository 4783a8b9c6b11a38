// DISC_VECTOR_CLONES: a function's loops built in AVX-512 and AVX2 as well as for every x86-64,
// the clone picked when the program loads (GCC and Clang), so that array loops (the bf16 and f16
// conversions, the devices' softmax rows) run as wide as the host allows while the build targets
// every x86-64. Clang clones no templates: put it on plain functions. Not under ThreadSanitizer:
// the loader calls the clones' resolver before TSan's runtime is up, and the instrumented
// resolver crashes there.
#pragma once

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DISC_NO_VECTOR_CLONES
#endif
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(DISC_NO_VECTOR_CLONES)
#define DISC_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DISC_VECTOR_CLONES
#endif
