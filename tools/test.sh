#!/usr/bin/env bash
# Installs what is missing, builds disc, and runs the whole test suite:
#   0. the format check (tools/format.sh --check: every C++ file as .clang-format says);
#   1. the release build (g++) under ctest;
#   2. a clang-19 build with AddressSanitizer + UndefinedBehaviorSanitizer running the same tests
#      (less the slowest that repeat covered code paths; see below) and the fuzzers (parser,
#      config loader, safetensors reader), DISC_FUZZ_SECONDS (default 60) shared among them;
#   3. a clang-19 build with ThreadSanitizer running the tests that start threads of their own
#      (background compilation, concurrent kernel and object caches).
# usage: tools/test.sh [--quick]     (--quick: steps 0 and 1 only)
set -euo pipefail
cd "$(dirname "$0")/.."
# The sanitizer builds: -O1, as the sanitizers' documentation advises, and line tables only,
# which is all their stack traces need; a quarter less compile time than -O2 -g.
sanitizer_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-19
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" -DCMAKE_UNITY_BUILD=ON)
# Every build here is a unity build (CMake joins each target's sources eight to a file): the
# headers (gtest, nlohmann-json, the project's own) are parsed and their inline functions compiled
# once per eight files instead of once per file, which halves the compile time. So two files of
# one target must not define the same name in their anonymous namespaces: share a helper in a
# header, or name each for what it holds. A plain build (the README's) compiles them one by one.
"$(pwd)/tools/setup.sh"
jobs=$(nproc)

echo "== format check"
tools/format.sh --check

echo "== release build and tests"
# Line tables (-g1) rather than full debug information: backtraces keep file and line, and the
# build takes a quarter less time.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" -DCMAKE_UNITY_BUILD=ON > /dev/null
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"

if [ "${1:-}" = "--quick" ]; then exit 0; fi
echo "== sanitizer build (ASan + UBSan), tests and fuzzing"
cmake -S . -B build-sanitize -G Ninja "${sanitizer_flags[@]}" -DDISC_FUZZ=ON -DDISC_FUZZ_SECONDS="${DISC_FUZZ_SECONDS:-60}" -DDISC_BENCH=OFF > /dev/null
cmake --build build-sanitize -j "$jobs"
# Every test but those that repeat, at the sanitizers' tenfold cost, code paths the tests that do
# run already take (the release run above keeps them all): the 300-step llama that learns to
# count; the training runs compared across options (fusion, attention and head ops, backward
# recompute, in-place updates, background compiles: the governed-cap tests train every option
# here); the 300-step bf16 and f16 loss curves (their cap tests and short runs stay); the 512-cube
# GEMMs (the small and prime-sized cases stay); the CUDA C kernels compiled for the host (the
# emitter's code, not ours, runs there), and by NVRTC and hiprtc (theirs too); the engine's
# data-parallel tests on 2 and 3 ranks (100 s here: LeakSanitizer must unwind every malloc slowly
# to see Open MPI's libraries; disc-train's data-parallel runs take the same paths). About six
# minutes of CI.
slow='^Training\.(LlamaLearnsCounting|AttentionOp|FusedKernels|LinearCrossEntropyOp|TriangularAttention'
slow+='|TheTrainersStep|BackwardRecompute|CompiledKernels|BackgroundCompilation|UpdatesWrittenInPlace)'
slow+='|^Precision\..*Follow|^Large/GemmConformance|^CudaEmitter\.PatternsAndOpsMatchTheInterpreter'
slow+='|^CudaEmitter\.Every.*Compiles|^GpuOps\.(HostBuildMatches|SourceCompiles)|^DataParallel\.[0-9]'
ctest --test-dir build-sanitize --output-on-failure -j "$jobs" -E "$slow"

echo "== ThreadSanitizer build: the tests that run threads of their own"
cmake -S . -B build-tsan -G Ninja "${sanitizer_flags[@]}" -DDISC_TSAN=ON > /dev/null
cmake --build build-tsan -j "$jobs" --target disc_thread_tests
# A compiler thread beside the executor (background compilation); the LLVM compiler, kernel and
# object caches under concurrent callers; collectives that land on another thread while the step
# goes on (one thread of compute). Not the training tests: oneTBB's pool is not built with
# TSan, so every parallel loop over its threads reads as a race.
ctest --test-dir build-tsan --output-on-failure -j "$jobs" -R 'Concurrent|FusedGraphs.BackgroundCompil|CollectiveOverlap'
