#!/usr/bin/env bash
# Installs what is missing, builds disc, and runs the main job. Until `disc-train` lands, the
# main job is the IR pipeline on the Llama-style graph: parse, verify, canonicalize, CSE, DCE,
# then print the graph and its symbolic shape facts.
# usage: tools/run.sh [GRAPH_FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
"$(pwd)/tools/setup.sh"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build build -j "$(nproc)"
build/tools/disc-opt/disc-opt "${1:-tests/graphs/llama.disc}" \
  --passes=verify,canonicalize,cse,dce --facts --stats
