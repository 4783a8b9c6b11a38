#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on a GPU, for bench_attention: causal attention forward,
and forward + backward, over q, k, v [batch, heads, seq, dim] for each --seq, timed with CUDA
events. The flash kernel is asked for (--backend flash); the JSON on stdout gives each shape's
milliseconds per call (the median over --iters) and the backend that ran.

  python3 tools/bench/torch_sdpa.py --batch 16 --heads 8 --dim 64 --seq 512,1024 --dtype bf16
"""
import argparse
import contextlib
import json
import statistics
import sys

import torch
import torch.nn.functional as F


def backend_context(name):
    """sdpa_kernel (PyTorch >= 2.3) limited to one backend, or nothing for 'any'."""
    if name == "any":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel({"flash": SDPBackend.FLASH_ATTENTION,
                        "efficient": SDPBackend.EFFICIENT_ATTENTION,
                        "cudnn": SDPBackend.CUDNN_ATTENTION}[name])


def median_ms(fn, iters):
    """fn's time per call over `iters` calls after three warm-up calls, each timed by events."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--seq", default="512,1024", help="comma-separated sequence lengths")
    p.add_argument("--dtype", choices=["bf16", "f16"], default="bf16")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--backend", choices=["flash", "efficient", "cudnn", "any"], default="flash")
    a = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_sdpa.py: PyTorch sees no CUDA GPU")
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    scale = a.dim ** -0.5
    rows = []
    for s in [int(x) for x in a.seq.split(",")]:
        shape = (a.batch, a.heads, s, a.dim)
        q, k, v, dout = (torch.rand(shape, device="cuda", dtype=dtype).mul_(2).sub_(1)
                         for _ in range(4))
        q, k, v = (x.requires_grad_() for x in (q, k, v))
        with backend_context(a.backend):
            fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
            step = lambda: torch.autograd.grad(fwd(), (q, k, v), dout)
            rows.append({"seq": s, "fwd_ms": median_ms(lambda: fwd(), a.iters),
                         "fwd_bwd_ms": median_ms(step, a.iters)})
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(),
                      "backend": a.backend, "rows": rows}))


if __name__ == "__main__":
    main()
