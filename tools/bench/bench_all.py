#!/usr/bin/env python3
"""bench_all: every comparison docs/performance.md reports, in one run on this machine.

Builds the benchmarks (Release, in --build-dir: build-bench), installs the PyTorch peers when they
are missing (tools/setup.sh --bench: Debian's PyTorch 1.13, and the pinned PyTorch 2 from PyPI in
~/.cache/disc-bench/torch2), then runs in turn:
  bench_step    a llama training step: disc fused, unfused and bf16 against PyTorch 1.13 eager
                (unpadded, padded, with activation checkpointing per layer, bf16 autocast) and
                PyTorch 2 (eager and torch.compile, f32 and bf16 autocast; --torch2 PYTHON names
                another, --no-torch2 skips it), same batches and weights, passes alternating;
                compiles and the kernel cache over CodeAlpaca
  bench_memory  BladeDISC++'s table: llama 4x512 on CodeAlpaca lengths at growing batch sizes,
                dynamic without memory optimisation, static (padded to buckets) and disc with
                schedule + remat, at the same cap; tokens/s against the cap for both
  bench_kernels memory-bound fused kernels against a STREAM triad
  bench_matmul  oneDNN GEMMs against the measured FMA peak
Each writes JSON; this script merges them into OUT/results.json, prints one table (also in
OUT/table.txt) and draws OUT/cap_curve.svg (tokens/s against the memory cap for each system).

  tools/bench/bench_all.py --quick    # small workloads, one pass each: under 3 minutes
  tools/bench/bench_all.py            # the full run behind docs/performance.md's figures (about 17 min here)
The PyTorch 2 rows add about 2 minutes per round of bench_step (2 with --quick, 3 without) on 2
cores: torch.compile compiles cold in each round (measured: bench_step --quick 1m49s without them,
5m35s with them). --no-torch2 leaves them out.
  tools/bench/bench_all.py --render-only OUT   # table, JSON and plot again from OUT's JSON files
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_report import render  # noqa: E402

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGETS = ["bench_step", "bench_memory", "bench_kernels", "bench_matmul"]


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def run(cmd, **kw):
    log("$ " + " ".join(cmd))
    return subprocess.run(cmd, check=True, **kw)


def build(build_dir):
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        run(["cmake", "-S", SOURCE, "-B", build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"])
    run(["cmake", "--build", build_dir, "--target"] + TARGETS)


# Where tools/setup.sh --bench puts PyTorch 2, and bench_step looks for it.
TORCH2_VENV = os.environ.get("DISC_TORCH2_VENV") or os.path.expanduser("~/.cache/disc-bench/torch2")


def torch_ready(args):
    probe = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True)
    ready = probe.returncode == 0 and os.path.isdir("/usr/lib/x86_64-linux-gnu/openblas-openmp")
    if not (args.no_torch2 or args.torch2):
        ready = ready and os.access(os.path.join(TORCH2_VENV, "bin", "python"), os.X_OK)
    return ready


def ensure_torch(args):
    if torch_ready(args):
        return
    log("PyTorch 1.13 (python3-torch), OpenBLAS with OpenMP or PyTorch 2 in " + TORCH2_VENV +
        " is missing: installing them")
    run([os.path.join(SOURCE, "tools", "setup.sh"), "--bench"])
    if not torch_ready(args):
        raise SystemExit("bench_all: PyTorch is still missing after tools/setup.sh --bench; install "
                         "python3-torch and libopenblas0-openmp (and PyTorch 2, or pass --no-torch2), "
                         "or pass --no-torch")


def commands(args, bench):
    """(name, argv) of each benchmark, with its JSON written to OUT/<name>.json."""
    step = [bench("bench_step"), "--threads", str(args.threads)]
    memory = [bench("bench_memory"), "--threads", str(args.threads)]
    kernels = [bench("bench_kernels"), "--threads", str(args.threads)]
    if args.quick:
        step += ["--quick"]
        memory += ["--quick"]
        kernels += ["--scale", "0.25", "--repeats", "3"]
    else:
        step += ["--epoch"]
        memory += ["--batches", "8,16,24", "--steps", "2", "--repeats", "2"]  # goal (a) sits near the noise
    if args.no_torch:
        step += ["--no-torch"]
    if args.no_torch2:
        step += ["--no-torch2"]
    elif args.torch2:
        step += ["--torch2", args.torch2]
    return [("step", step), ("memory", memory), ("kernels", kernels),
            ("matmul", [bench("bench_matmul"), str(args.threads)])]


def machine():
    cpu, flags = "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
        cpu = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
        flags = set(next(line.split(":", 1)[1] for line in lines if line.startswith("flags")).split())
    except (OSError, StopIteration):
        pass
    # The bf16 figures depend on the 16-bit dot-product instructions.
    cpu += ", avx512_bf16 " + ("yes" if "avx512_bf16" in flags else "no")
    cpu += ", AMX " + ("yes" if "amx_bf16" in flags else "no")
    mem = 0
    try:
        with open("/proc/meminfo") as f:
            mem = int(next(line.split()[1] for line in f if line.startswith("MemTotal"))) * 1024
    except (OSError, StopIteration):
        pass
    rev = subprocess.run(["git", "-C", SOURCE, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_bytes": mem, "os": platform.platform(),
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "git": rev.stdout.strip() or "unknown"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--quick", action="store_true",
                    help="small workloads: under 3 minutes, plus about 4 with the PyTorch 2 rows")
    ap.add_argument("--build-dir", default=os.path.join(SOURCE, "build-bench"),
                    help="where to build the benchmarks (Release; default: build-bench in the source tree)")
    ap.add_argument("--out", default="bench-results", help="folder for the JSON, table and plot")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads for disc and PyTorch alike")
    ap.add_argument("--no-build", action="store_true", help="use the benchmarks already in --build-dir")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch rows (1.13 and 2)")
    ap.add_argument("--torch2", metavar="PYTHON",
                    help="bench_step's PyTorch 2 peer (default: tools/setup.sh --bench's venv, " + TORCH2_VENV + ")")
    ap.add_argument("--no-torch2", action="store_true", help="skip the PyTorch 2 rows (eager and torch.compile)")
    ap.add_argument("--render-only", metavar="DIR", help="only merge, print and plot DIR's JSON files")
    args = ap.parse_args()
    if args.render_only:
        render(args.render_only, None)
        return
    start = time.time()
    if not args.no_build:
        build(args.build_dir)
    if not args.no_torch:
        ensure_torch(args)
    os.makedirs(args.out, exist_ok=True)
    bench = lambda name: os.path.join(args.build_dir, "tools", "bench", name)  # noqa: E731
    for name, cmd in commands(args, bench):
        if not os.access(cmd[0], os.X_OK):
            raise SystemExit(f"bench_all: {cmd[0]} is missing: build it (drop --no-build)")
        log(f"\n== {name} ==")
        with open(os.path.join(args.out, name + ".txt"), "w") as text:
            run(cmd + ["--json", os.path.join(args.out, name + ".json")], stdout=text)
    meta = {"mode": "quick" if args.quick else "full", "threads": args.threads,
            "command": " ".join([os.path.relpath(sys.argv[0], SOURCE)] + sys.argv[1:]),
            "machine": machine(), "seconds": round(time.time() - start)}
    with open(os.path.join(args.out, "run.json"), "w") as f:
        json.dump(meta, f, indent=2)
    render(args.out, meta)
    if shutil.which("uptime"):
        log(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
