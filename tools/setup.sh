#!/usr/bin/env bash
# Installs every build and test dependency of disc from Debian 12 packages; with --bench, also
# the peers tools/bench/bench_all.py compares against (Debian's PyTorch 1.13 with OpenMP OpenBLAS,
# and PyTorch 2 from PyPI in a virtual environment: see install_torch2), and python3-onnx, which
# tools/onnx_export.py uses.
# Idempotent: packages already present are not fetched again, and a machine that has them all
# runs no apt command at all. Usable by CI and by a user (as root, or with sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build git pkg-config python3
  # LLVM 19: ORC JIT for kernels, FileCheck for golden tests, clang + runtimes for the fuzzer and
  # the sanitizer builds, clang-format for tools/format.sh.
  llvm-19-dev llvm-19-tools clang-19 libclang-rt-19-dev libzstd-dev clang-format-19
  # oneDNN (its CMake package needs the OpenCL loader) and oneTBB for the CPU device.
  libdnnl-dev ocl-icd-opencl-dev libtbb-dev
  # Checksums, config, logging, CLI, JSON.
  zlib1g-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  # sentencepiece for Llama's tokenizer.model; its test trains a model and checks it against Python.
  libsentencepiece-dev sentencepiece python3-sentencepiece
  # ONNX import: the ONNX protobuf messages, and ONNX's own backend test data (its node tests).
  libonnx-dev libprotobuf-dev libonnx-testdata
  # Open MPI: launches data-parallel runs (mpirun) and sums their gradients on the CPU.
  openmpi-bin libopenmpi-dev
  # Tests and benchmarks.
  libgtest-dev libgmock-dev libbenchmark-dev
  # hiprtc (in the HIP runtime), so that the tests compile the GPU kernels for AMD GPUs too; the
  # build links nothing of it (loaded at run time). NVRTC comes with the CUDA toolkit, not Debian.
  libamdhip64-5 libhiprtc-builtins5
)
bench=false
if [ "${1:-}" = "--bench" ]; then
  bench=true
  packages+=(python3-torch libopenblas0-openmp python3-onnx python3-venv)
elif [ $# -gt 0 ]; then
  echo "usage: tools/setup.sh [--bench]" >&2
  exit 2
fi

# PyTorch 2, bench_step's second CPU peer (eager and torch.compile), pinned so that its rows
# compare across runs. PyPI has only the CUDA build of torch for Linux (its NVIDIA libraries come
# with it: 5.3 GiB installed); it runs on a CPU alone, and Inductor compiles with g++. The install
# took 1m04s of wall time on a 2-core machine here (`/usr/bin/time tools/setup.sh --bench`, pip
# without a cache, the Debian packages present); a rerun with it in place takes 2 s. bench_step
# and bench_all.py look for this folder (DISC_TORCH2_VENV moves it for all three).
torch2_version=2.15.0
torch2_venv="${DISC_TORCH2_VENV:-$HOME/.cache/disc-bench/torch2}"

install_torch2() {
  local have
  have=$("$torch2_venv/bin/python" -c "import torch; print(torch.__version__.split('+')[0])" \
    2>/dev/null || true)
  if [ "$have" = "$torch2_version" ]; then
    echo "setup: PyTorch $torch2_version present in $torch2_venv"
    return
  fi
  echo "setup: installing PyTorch $torch2_version from PyPI into $torch2_venv"
  # Debian's Python, without its dist-packages: their torch 1.13 must not shadow the venv's.
  /usr/bin/python3 -m venv "$torch2_venv"
  "$torch2_venv/bin/pip" install -q --no-cache-dir "torch==$torch2_version"
}

install_packages() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all ${#packages[@]} packages present"
    return
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  echo "setup: done"
}

install_packages
if $bench; then install_torch2; fi
