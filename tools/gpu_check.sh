#!/usr/bin/env bash
# What needs a GPU, on a machine with one: builds disc (Release), runs the op-conformance suite
# (every registered kernel on every device present, the GPU included, against the reference
# kernels) and the whole device, JIT and memory test suites (whose GPU tests skip elsewhere: the
# device's copies and memory, the fused kernels against the interpreter, training against the
# CPU's losses with and without a cap), then bench_gpu, disc against PyTorch on the GPU, and
# bench_attention, disc's attention against PyTorch's SDPA. For an NVIDIA GPU: its driver
# (libcuda.so.1), the CUDA toolkit (NVRTC and cuBLAS; /usr/local/cuda/lib64 is added to the library
# path) and, for the comparison, a Python with PyTorch built for CUDA. Results go to out/gpu/.
#
#   tools/gpu_check.sh                      # cuda:0, python3 from PATH
#   tools/gpu_check.sh --device hip:0 --no-torch
#   tools/gpu_check.sh --batches 8,16,24 --steps 4   # any bench_gpu option
#   tools/gpu_check.sh --bundle disc-gpu.tar.xz      # no build: what tools/gpu_bundle.sh packed
#   tools/gpu_check.sh --profile                     # then Nsight Compute's GPU time per kernel
#                                                    # over two bf16 steps at B=16 (ncu.csv,
#                                                    # ncu_summary.txt)
#   tools/gpu_check.sh --gpu-tests-only              # skip the tests that need no GPU (host builds
#                                                    # of the kernels, NVRTC/hiprtc compiles): a
#                                                    # lent GPU's minutes go to what needs it
set -euo pipefail
cd "$(dirname "$0")/.."
device=cuda:0
bundle=
profile=
out=out/gpu
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device="$2"; shift 2 ;;
    --bundle) bundle="$2"; shift 2 ;;
    --profile) profile=1; shift ;;
    --gpu-tests-only) export GTEST_FILTER='-*HostBuild*:*Nvrtc*:*Hiprtc*'; shift ;;
    --out) out="$2"; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
# NVRTC and cuBLAS: the toolkit's folder, else the ones pip's nvidia-* wheels hold.
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for d in $(python3 -c 'import nvidia, os; [print(os.path.join(p, q, "lib")) for p in nvidia.__path__ for q in os.listdir(p)]' 2>/dev/null); do
  [ -d "$d" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
done
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
mkdir -p "$out"
suites=(disc_conformance_tests disc_devices_tests disc_jit_tests disc_memory_tests)
python="$(command -v python3)"
if [ -z "$bundle" ]; then
  build=build-gpu
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j "$(nproc)"
  bin=("$build"/tests/*/)
  bench="$build/tools/bench/bench_gpu"
  attention="$build/tools/bench/bench_attention"
else
  # The test binaries name tests/ by this checkout's path where they were built: link it there.
  dir="$(mktemp -d)"
  tar -C "$dir" -xJf "$bundle"
  dir="$dir/disc-gpu"
  export LD_LIBRARY_PATH="$dir/lib:$LD_LIBRARY_PATH"
  src="$(cat "$dir/source_dir")"
  [ -e "$src" ] || { mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; }
  bin=("$dir/bin/")
  bench="$dir/bin/bench_gpu"
  attention="$dir/bin/bench_attention"
  args=(--data "$dir/data/codealpaca.json" "${args[@]}")
fi
status=0
: > "$out/ctest.txt"
for t in "${suites[@]}"; do
  exe="$(find "${bin[@]}" -maxdepth 1 -name "$t" -type f | head -1)"
  rc=0
  "$exe" >> "$out/ctest.txt" 2>&1 || rc=$?
  echo "$t: $([ "$rc" = 0 ] && echo passed || echo "FAILED (exit $rc)")"
  [ "$rc" = 0 ] || status=1
done
[ "$status" = 0 ] || echo "gpu_check.sh: GPU tests FAILED (see $out/ctest.txt)" >&2
"$bench" --device "$device" --python "$python" --json "$out/bench_gpu.json" "${args[@]}" | tee "$out/bench_gpu.txt"
# Attention alone against PyTorch's SDPA (flash), bf16, at the issue's shapes.
torch=(--python "$python"); [[ " ${args[*]} " == *" --no-torch "* ]] && torch=(--no-torch)
"$attention" --device "$device" "${torch[@]}" | tee "$out/bench_attention.txt"
if [ -n "$profile" ]; then
  data=(); [ -z "$bundle" ] || data=(--data "$dir/data/codealpaca.json")
  ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$out/ncu.csv" \
    "$bench" --device "$device" --no-torch --precision bf16 --batches 16 --steps 2 --repeats 0 \
    --cap-share 0 "${data[@]}" >/dev/null
  python3 tools/bench/ncu_summary.py "$out/ncu.csv" | tee "$out/ncu_summary.txt"
fi
exit "$status"
