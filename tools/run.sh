#!/usr/bin/env bash
# Installs what is missing, builds disc, and runs the main job: disc-train on the default config
# (a small Llama learning a synthetic task with a new sequence length every batch, about two
# minutes on 2 cores). Extra arguments go to disc-train as overrides, e.g. train.steps=100.
# usage: tools/run.sh [key=value ...]
set -euo pipefail
cd "$(dirname "$0")/.."
"$(pwd)/tools/setup.sh"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build build -j "$(nproc)" --target disc-train
build/apps/disc-train/disc-train run --config configs/default.yaml "$@"
