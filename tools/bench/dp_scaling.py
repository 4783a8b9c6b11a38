#!/usr/bin/env python3
"""Data-parallel scaling on paper: the efficiency of N ranks from one rank's step time and the
gradient bytes, with a ring all-reduce's cost (the algorithm NCCL and Open MPI use for large
messages):

    T_allreduce(N) = 2 (N - 1) / N * bytes / bandwidth + 2 (N - 1) * latency
    efficiency(N)  = T_step / (T_step + max(0, T_allreduce(N) - hidden * T_step))

`hidden` is the share of the step that communication can hide behind: 0 for an all-reduce after
the backward (one bucket), about 2/3 (the backward's share of a step) with buckets overlapped
(disc's schedule starts each bucket as the backward makes it).

    tools/bench/dp_scaling.py                      # docs/data-parallel.md's table
    tools/bench/dp_scaling.py --params 45.4e6 --step-ms 14.3 --grad-bytes 4
"""
import argparse

# Links: (name, bus bandwidth in bytes/s, per-hop latency in s). NVLink 4 within one 8-GPU
# node (nccl-tests reach about 360 GB/s of bus bandwidth on H100/H200 nodes); 400 Gb/s
# InfiniBand or RoCE between nodes (about 45 GB/s of the 50 a link carries).
LINKS = [("NVLink (8 GPUs a node)", 360e9, 5e-6), ("400 Gb/s network", 45e9, 10e-6)]

# Models: (name, parameters, step seconds on one H200 in bf16). The memory issue's llama
# (4x512, vocab 32000: 45.4M parameters) at disc's measured 213,188 tokens/s with B=8 (about
# 3,040 tokens a step: 14.3 ms); a 1B llama (hidden 2048, 16 layers, vocab 32000: 1.1e9) at the
# same achieved FLOP/s (6 * parameters FLOPs a token: 58 TFLOP/s) with 8,192 tokens a step.
MODELS = [("memory llama 45M", 45.4e6, 14.3e-3),
          ("1B llama", 1.1e9, 6 * 1.1e9 * 8192 / (6 * 45.4e6 * 213188))]


def allreduce_seconds(ranks, nbytes, bandwidth, latency):
    return 2 * (ranks - 1) / ranks * nbytes / bandwidth + 2 * (ranks - 1) * latency


def efficiency(ranks, step, nbytes, bandwidth, latency, hidden):
    exposed = max(0.0, allreduce_seconds(ranks, nbytes, bandwidth, latency) - hidden * step)
    return step / (step + exposed)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--params", type=float, help="parameters (default: docs/data-parallel.md's two models)")
    p.add_argument("--step-ms", type=float, help="one rank's step time in ms")
    p.add_argument("--grad-bytes", type=int, default=4, help="bytes a gradient element (f32: 4)")
    p.add_argument("--ranks", type=int, nargs="+", default=[8, 64, 512])
    a = p.parse_args()
    models = MODELS
    if a.params:
        if not a.step_ms:
            p.error("--params needs --step-ms")
        models = [(f"{a.params:.3g} parameters", a.params, a.step_ms / 1e3)]
    print("| model | step | link | " + " | ".join(f"{n} ranks" for n in a.ranks) + " |")
    print("|---" * (3 + len(a.ranks)) + "|")
    for name, params, step in models:
        nbytes = params * a.grad_bytes
        for link, bandwidth, latency in LINKS:
            cells = []
            for n in a.ranks:
                if link.startswith("NVLink") and n > 8:
                    cells.append("-")
                    continue
                cells.append(f"{efficiency(n, step, nbytes, bandwidth, latency, 0):.0%} / "
                             f"{efficiency(n, step, nbytes, bandwidth, latency, 2 / 3):.0%}")
            print(f"| {name} | {step * 1e3:.1f} ms | {link} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
