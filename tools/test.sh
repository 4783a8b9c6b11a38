#!/usr/bin/env bash
# Installs what is missing, builds disc, and runs the whole test suite:
#   1. the release build (g++) under ctest;
#   2. a clang-19 build with AddressSanitizer + UndefinedBehaviorSanitizer running the same tests
#      and the parser fuzzer for DISC_FUZZ_SECONDS (default 60).
# usage: tools/test.sh [--quick]     (--quick: step 1 only)
set -euo pipefail
cd "$(dirname "$0")/.."
"$(pwd)/tools/setup.sh"
jobs=$(nproc)

echo "== release build and tests"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"

if [ "${1:-}" = "--quick" ]; then exit 0; fi
echo "== sanitizer build (ASan + UBSan), tests and fuzzing"
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-19 \
  -DDISC_FUZZ=ON -DDISC_FUZZ_SECONDS="${DISC_FUZZ_SECONDS:-60}" > /dev/null
cmake --build build-sanitize -j "$jobs"
ctest --test-dir build-sanitize --output-on-failure -j "$jobs"
