#!/usr/bin/env bash
# Packs what tools/gpu_check.sh runs into one self-contained archive, for a GPU machine that has the
# driver and CUDA but not our Debian packages (LLVM 19, oneDNN, oneTBB...): the GPU test binaries,
# bench_gpu, bench_attention and disc-train from a Release build, every library they load that is
# not glibc's, and the benchmark's data. Then `tools/gpu_check.sh --bundle FILE` there runs from it, without building.
# The archive is compressed to fit the device tool's 64 MiB transfer (about 55 MB).
#
#   tools/gpu_bundle.sh                        # builds build-gpu, writes .gpu-bundle/disc-gpu.tar.xz
#   tools/gpu_bundle.sh --build build-bench    # any Release build folder
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-gpu
data=../shared/data/codealpaca/codealpaca.json
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    *) echo "gpu_bundle.sh: unknown option '$1' (use --build DIR or --data FILE)" >&2; exit 2 ;;
  esac
done
[ -f "$data" ] || { echo "gpu_bundle.sh: no data at $data (pass --data FILE)" >&2; exit 2; }
[ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
grep -q 'CMAKE_BUILD_TYPE:STRING=Release' "$build/CMakeCache.txt" ||
  { echo "gpu_bundle.sh: $build is not a Release build" >&2; exit 2; }
bins=(tests/conformance/disc_conformance_tests tests/devices/disc_devices_tests tests/jit/disc_jit_tests
      tests/memory/disc_memory_tests tools/bench/bench_gpu tools/bench/bench_attention
      apps/disc-train/disc-train)
targets=(); for b in "${bins[@]}"; do targets+=("$(basename "$b")"); done
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

stage=.gpu-bundle/disc-gpu
rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib" "$stage/data"
for b in "${bins[@]}"; do strip -o "$stage/bin/$(basename "$b")" "$build/$b"; done
# glibc's own libraries (and its loader) are on any Linux; everything else travels.
ldd "$stage"/bin/* | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libgcc_s.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
cp "$data" "$stage/data/"
git rev-parse --short HEAD > "$stage/commit"
pwd > "$stage/source_dir"
tar -C .gpu-bundle -cf - disc-gpu | xz -9 -T "$(nproc)" > .gpu-bundle/disc-gpu.tar.xz
rm -rf "$stage"
ls -l .gpu-bundle/disc-gpu.tar.xz
