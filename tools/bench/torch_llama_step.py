#!/usr/bin/env python3
"""Times PyTorch eager training steps of llama: the baseline that bench_step compares disc against.

The model and loss are tools/torch_reference.py's (the ones disc's PyTorch reference test checks),
trained with torch.optim.AdamW plus clipping by global norm when clip_norm > 0, as disc's step
does. It runs a warm-up pass over the batches (the first step's loss is the one to compare with
disc), timed passes over the same batches as they are (padded to their own longest row), then
timed passes with every batch padded to its bucket: the next power of two, at most pad_to (what a
static-shape framework with power-of-two buckets pays); with
--checkpoint, both again with activation checkpointing per layer (a fresh copy of the initial
weights, so every variant trains from the same start); with --autocast, unpadded passes under
torch.autocast(dtype=torch.bfloat16). Each variant reports its peak resident
memory (VmHWM, reset before its passes). It prints one JSON object on stdout; progress goes to
stderr.

Two ways to run it:
  * on bench_step's workload: --dir DIR, where DIR holds batches.safetensors (tokens.<i>,
    targets.<i>, and the model/optimizer settings as metadata `config`) and weights/state.safetensors
    (disc's initial parameters, written by engine::Trainer::save). bench_step does this itself.
  * standalone: no --dir; the same workload shapes made here (lengths uniform in
    [min_len, max_len], random ids, weights drawn as disc documents its initialisation), e.g.
      LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp /usr/bin/python3 \\
        tools/bench/torch_llama_step.py --threads 2 --steps 20
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_reference import llama, llama_shapes, read_safetensors  # noqa: E402

IGNORE_INDEX = -100
# The workload; disc's OptimizerConfig defaults; bench_step's learning rate.
DEFAULT_CONFIG = {
    "model": {"vocab": 1000, "hidden": 256, "layers": 2, "heads": 4, "kv_heads": 4, "ffn": 688,
              "norm_eps": 1e-5, "rope_theta": 10000.0},
    "optimizer": {"lr": 3e-4, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01, "clip_norm": 0.0},
    "max_len": 512,
}


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def load_workload(folder):
    """bench_step's batches, settings and initial parameters."""
    data, meta = read_safetensors(os.path.join(folder, "batches.safetensors"))
    config = json.loads(meta["config"])
    batches = [{"tokens": data[f"tokens.{i}"], "targets": data[f"targets.{i}"]}
               for i in range(int(meta["batches"]))]
    state, _ = read_safetensors(os.path.join(folder, "weights", "state.safetensors"))
    missing = [n for n in llama_shapes(config["model"]) if n not in state]
    if missing:
        raise SystemExit(f"{folder}/weights/state.safetensors lacks parameters {missing[:3]}: not this model's")
    params = {n: state[n].clone().requires_grad_(True) for n in llama_shapes(config["model"])}
    return config, batches, params


def make_workload(args):
    """The same shapes without bench_step: a batch pads to its own longest row; targets are the
    next token, ignored at each row's end and in the padding (as disc's batcher lays them out)."""
    config = json.loads(json.dumps(DEFAULT_CONFIG))
    config["max_len"] = args.max_len
    g = torch.Generator().manual_seed(args.seed)
    vocab = config["model"]["vocab"]
    batches = []
    for _ in range(args.steps):
        lengths = torch.randint(args.min_len, args.max_len + 1, (args.batch,), generator=g).tolist()
        s = max(lengths)
        tokens = torch.zeros(args.batch, s, dtype=torch.int32)
        targets = torch.full((args.batch, s), IGNORE_INDEX, dtype=torch.int32)
        for row, n in enumerate(lengths):
            tokens[row, :n] = torch.randint(0, vocab, (n,), generator=g, dtype=torch.int32)
            targets[row, : n - 1] = tokens[row, 1:n]
        batches.append({"tokens": tokens, "targets": targets})
    params = {}
    for name, shape in llama_shapes(config["model"]).items():  # disc: matrices N(0, 0.02^2), norms 1
        t = torch.randn(shape, generator=g) * 0.02 if len(shape) == 2 else torch.ones(shape)
        params[name] = t.requires_grad_(True)
    return config, batches, params


def bucket_bound(seq, pad_to):
    """A static-shape framework's bucket for a length: the next power of two, at most pad_to."""
    bound = 1
    while bound < seq:
        bound *= 2
    return min(bound, pad_to)


def pad(batch, seq):
    b, s = batch["tokens"].shape
    tokens = torch.zeros(b, seq, dtype=torch.int32, device=batch["tokens"].device)
    targets = torch.full((b, seq), IGNORE_INDEX, dtype=torch.int32, device=batch["tokens"].device)
    tokens[:, :s], targets[:, :s] = batch["tokens"], batch["targets"]
    return {"tokens": tokens, "targets": targets}


class Stepper:
    """One training step as disc's graph does it: loss, backward, clipping (if any), AdamW."""

    def __init__(self, config, params, checkpoint=False, device="cpu", autocast=False):
        o = config["optimizer"]
        self.device = device
        self.autocast = autocast
        self.model, self.params, self.clip = config["model"], params, o["clip_norm"]
        self.checkpoint = checkpoint
        self.opt = torch.optim.AdamW(params.values(), lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                                     weight_decay=o["weight_decay"])

    def __call__(self, batch):
        self.opt.zero_grad(set_to_none=True)
        # bf16 autocast as a PyTorch user writes it: matmuls in bf16, the rest as autocast decides.
        with torch.autocast(self.device.split(":")[0], dtype=torch.bfloat16, enabled=self.autocast):
            _, loss = llama(self.params, batch, self.model, self.checkpoint)
        loss = loss.float()
        loss.backward()
        if self.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.params.values(), self.clip)
        self.opt.step()
        return loss.item()


def run_pass(step, batches, label):
    """Seconds per step and losses over one pass."""
    seconds, losses = [], []
    for i, b in enumerate(batches):
        start = time.perf_counter()
        losses.append(step(b))
        seconds.append(time.perf_counter() - start)
        log(f"  [torch {label}] {i + 1}/{len(batches)}  B={b['tokens'].shape[0]} S={b['tokens'].shape[1]}  "
            f"{seconds[-1] * 1e3:.0f} ms  loss {losses[-1]:.4f}")
    return seconds, losses


def status_bytes(key):
    """A "Key:  1234 kB" line of /proc/self/status in bytes (0 where unknown)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def reset_peak_rss():
    """Restarts VmHWM at the current resident memory, so that each variant gets its own peak."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def timed(step, batches, repeats, label, tokens):
    """Tokens/s of the fastest of `repeats` passes (the machine may be shared), all passes' tokens/s,
    the median step time over every timed step, and the peak resident memory over them (and, on a
    GPU, the peak of the bytes PyTorch's caching allocator handed out)."""
    passes, steps = [], []
    reset_peak_rss()
    on_gpu = torch.cuda.is_available() and step.device.startswith("cuda")
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    for r in range(repeats):
        seconds, _ = run_pass(step, batches, f"{label} {r + 1}")
        passes.append(tokens / sum(seconds))
        steps += seconds
    return {"tokens_per_s": max(passes), "passes_tokens_per_s": passes,
            "step_ms_median": 1e3 * statistics.median(steps), "step_ms": [1e3 * t for t in steps],
            "peak_rss_bytes": status_bytes("VmHWM"),
            "peak_device_bytes": torch.cuda.max_memory_allocated() if on_gpu else 0,
            "reserved_device_bytes": torch.cuda.max_memory_reserved() if on_gpu else 0}


def variants(config, params, batches, pad_to, args, tokens, checkpoint, autocast=False):
    """Unpadded and (with pad_to > 0) padded timings of one way of stepping, from a copy of params."""
    step = Stepper(config, {n: p.detach().clone().to(args.device).requires_grad_(True) for n, p in params.items()},
                   checkpoint, args.device, autocast)
    label = "bf16 autocast" if autocast else "checkpointed" if checkpoint else "timed"
    _, warm_losses = run_pass(step, batches, f"{label} warm-up")
    out = {"first_loss": warm_losses[0], "unpadded": timed(step, batches, args.repeats, label, tokens)}
    if pad_to > 0:
        padded = [pad(b, bucket_bound(b["tokens"].shape[1], pad_to)) for b in batches]
        step(padded[0])  # the first step at the padded shape allocates its buffers
        out["padded"] = timed(step, padded, args.repeats, f"{label} padded to buckets <= {pad_to}", tokens)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", help="bench_step's workload folder (default: make the workload here)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2, help="timed passes each, unpadded and padded")
    ap.add_argument("--pad-to", type=int, default=0, help="padded passes' length (default: max_len; -1: skip)")
    ap.add_argument("--steps", type=int, default=20, help="standalone: batches")
    ap.add_argument("--batch", type=int, default=8, help="standalone: rows per batch")
    ap.add_argument("--min-len", type=int, default=32, help="standalone: shortest sequence")
    ap.add_argument("--max-len", type=int, default=512, help="standalone: longest sequence")
    ap.add_argument("--seed", type=int, default=1, help="standalone: data and weights")
    ap.add_argument("--device", default="cpu", help="where PyTorch runs: cpu, or cuda (cuda:N)")
    ap.add_argument("--checkpoint", action="store_true",
                    help="also time activation checkpointing per layer, unpadded and padded")
    ap.add_argument("--autocast", action="store_true",
                    help="also time torch.autocast(dtype=torch.bfloat16), unpadded")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    config, batches, params = load_workload(args.dir) if args.dir else make_workload(args)
    batches = [{k: v.to(args.device) for k, v in b.items()} for b in batches]
    pad_to = args.pad_to or config["max_len"]
    tokens = sum(int((b["targets"] != IGNORE_INDEX).sum()) for b in batches)
    eager = variants(config, params, batches, pad_to, args, tokens, False)
    out = {"torch": torch.__version__, "device": args.device, "threads": torch.get_num_threads(), "batches": len(batches),
           "real_tokens": tokens, "first_loss": eager["first_loss"], "unpadded": eager["unpadded"]}
    if pad_to > 0:
        out["padded_to"] = pad_to
        out["padded"] = eager["padded"]
    if args.checkpoint:
        out["checkpointed"] = variants(config, params, batches, pad_to, args, tokens, True)
    if args.autocast:
        out["autocast"] = variants(config, params, batches, 0, args, tokens, False, autocast=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
