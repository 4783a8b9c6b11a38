#!/usr/bin/env bash
# Installs disc from BUILD_DIR into a scratch prefix, then builds the example embedder
# (apps/examples/embed) against it twice: with find_package(disc CONFIG) and with pkg-config.
# Both binaries must train (print falling losses; the CMake one also an imported ONNX llama), the CMake one without asking for C++20 itself
# and printing the installed version; engine/trainer.h alone must not pull in the JIT, the
# compile pipeline, the executor or the memory planner.
# usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > /dev/null
cmake -S "$src/apps/examples/embed" -B "$work/embed" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" > /dev/null
cmake --build "$work/embed" > /dev/null
"$work/embed/train_counting" 20 | tee "$work/cmake.out"
PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --exists disc
# shellcheck disable=SC2046  # pkg-config output is meant to be split into flags
c++ "$src/apps/examples/embed/train_counting.cc" -o "$work/pc_train" \
  $(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs disc) -fopenmp
"$work/pc_train" 20 > "$work/pc.out"
grep -q "step 20 loss" "$work/cmake.out" && grep -q "step 20 loss" "$work/pc.out"
# The C++ API takes an ONNX model: the llama exported from PyTorch, trained from its weights.
"$work/embed/train_counting" 20 "$src/tests/reference/llama.onnx" > "$work/onnx.out"
grep -q "step 20 loss" "$work/onnx.out"
grep -qx "disc $(sed -n 's/^project(disc VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")" "$work/cmake.out"
# The public header pulls in no compiler, JIT or planner: a consumer compiles what it uses.
echo '#include <disc/engine/trainer.h>' |
  c++ -std=c++20 -I"$work/prefix/include" -I"$work/prefix/include/disc" -x c++ -fsyntax-only -H - \
    2> "$work/headers.txt"
if grep -E "disc/(jit/|engine/kernels/|engine/(executor|pipeline)\.h|memory/(governor|scheduler|caching_allocator|memory_plan|liveness)\.h|devices/(cuda|hip)/)" \
  "$work/headers.txt"; then
  echo "engine/trainer.h pulls in the internal headers above" >&2
  exit 1
fi
echo "installed package: find_package(disc) and pkg-config builds both train"
