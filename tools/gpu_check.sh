#!/usr/bin/env bash
# What needs a GPU, on a machine with one: builds disc (Release), runs the tests that use the GPU
# (the GEMM conformance suite, the device's copies and memory, the fused kernels against the
# interpreter, training against the CPU's losses, with and without a cap) and bench_gpu, disc
# against PyTorch eager on the GPU. For an NVIDIA GPU: its driver (libcuda.so.1), the CUDA toolkit
# (NVRTC and cuBLAS; /usr/local/cuda/lib64 is added to the library path) and, for the comparison,
# a Python with PyTorch built for CUDA. Results go to out/gpu/.
#
#   tools/gpu_check.sh                      # cuda:0, python3 from PATH
#   tools/gpu_check.sh --device hip:0 --no-torch
#   tools/gpu_check.sh --batches 8,16,24 --steps 4   # any bench_gpu option
set -euo pipefail
cd "$(dirname "$0")/.."
device=cuda:0
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device="$2"; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
build=build-gpu
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)"
mkdir -p out/gpu
# The tests that do something different with a GPU present (they skip without one).
ctest --test-dir "$build" --output-on-failure -j 4 \
  -R 'GpuDeviceTest|GemmConformance|GpuKernels|OnAGpu|CudaEmitter|RuntimeCompiler|GpuLaunches|GpuKernelCompiler' \
  | tee out/gpu/ctest.txt
python="$(command -v python3)"
"$build/tools/bench/bench_gpu" --device "$device" --python "$python" --json out/gpu/bench_gpu.json "${args[@]}" \
  | tee out/gpu/bench_gpu.txt
