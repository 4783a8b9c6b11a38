#!/usr/bin/env python3
"""Times PyTorch training steps of llama: the baseline that bench_step and bench_gpu compare disc against.

The model and loss are tools/torch_reference.py's (the ones disc's PyTorch reference test checks),
trained with torch.optim.AdamW plus clipping by global norm when clip_norm > 0, as disc's step
does. Each variant (way of stepping) starts from a fresh copy of the same initial weights, runs a
warm-up pass over the batches (its first step's loss is the one to compare with disc; its first
step's wall time, compiling included, is reported as first_step_s), then timed passes over the
same batches as they are (padded to their own longest row). Eager f32 and --checkpoint also time
passes with every batch padded to its bucket: the next power of two, at most pad_to (what a
static-shape framework with power-of-two buckets pays). Each variant reports its peak resident
memory (VmHWM, reset before its timed passes) and, on a GPU, the peak bytes PyTorch's caching
allocator handed out and reserved over them. The variants:
  * eager f32 (always), unpadded and padded
  * --checkpoint: eager f32 with activation checkpointing per layer, unpadded and padded
  * --autocast: eager under torch.autocast(dtype=torch.bfloat16), unpadded; with --sdpa its
    attention is F.scaled_dot_product_attention(is_causal=True) (flash kernels on a GPU)
  * --compile: torch.compile(dynamic=True) of the forward and loss (AOTAutograd compiles the
    backward with it; the optimizer stays eager) in f32, and in bf16 autocast with SDPA
  * --memory-budget X: the compiled bf16 one again with
    torch._functorch.config.activation_memory_budget = X (the partitioner recomputes in the
    backward to keep X of the default's saved activations)
A compiled variant that fails reports {"error": "<exception>: <its message's first line>"} instead
(its traceback goes to stderr) and the others still run. Compiled variants also report the graphs
compiled in their first step and the recompiles after it (dynamo's unique_graphs counter:
dynamic=True should not recompile for a new sequence length). Each compiles cold: dynamo is reset
and the on-disk caches are fresh folders (kernels an earlier variant compiled in this process may
still be reused from memory). --sdpa, --compile and --memory-budget fail with a message when this
PyTorch lacks what they need (torch.compile and SDPA came in 2.0, the memory budget in 2.4);
--features prints what it has. It prints one JSON object on stdout; progress goes to stderr.

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
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
import traceback

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_reference import llama, llama_shapes, read_safetensors, rms_norm, rope  # noqa: E402

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


def features():
    """What this PyTorch has of what --sdpa, --compile and --memory-budget need."""
    budget = False
    if hasattr(torch, "compile"):
        try:
            import torch._functorch.config as functorch_config
            budget = hasattr(functorch_config, "activation_memory_budget")
        except ImportError:
            pass
    return {"torch": torch.__version__, "sdpa": hasattr(F, "scaled_dot_product_attention"),
            "compile": hasattr(torch, "compile"), "memory_budget": budget}


def check_features(args, have):
    """Exits with a message when an option asks for what this PyTorch lacks."""
    needs = [("--sdpa", args.sdpa, "sdpa", "torch.nn.functional.scaled_dot_product_attention (PyTorch >= 2.0)"),
             ("--compile", args.compile, "compile", "torch.compile (PyTorch >= 2.0)"),
             ("--memory-budget", args.memory_budget is not None, "memory_budget",
              "torch.compile and torch._functorch.config.activation_memory_budget (PyTorch >= 2.4)")]
    for option, asked, key, what in needs:
        if asked and not have[key]:
            raise SystemExit(f"torch_llama_step.py: {option} needs {what}, which PyTorch {torch.__version__} at "
                             f"{sys.executable} lacks: run it with a newer PyTorch's python, or leave {option} out")


def sdpa_attention(x, p, pre, heads, kv_heads, theta):
    """torch_reference.attention (no biases) with the scores, causal mask, softmax and probs @ v as
    one F.scaled_dot_product_attention(is_causal=True): same scale 1/sqrt(head_dim), same mask."""
    b, s, d = x.shape
    hd = d // heads
    q = rope((x @ p[pre + "wq"]).view(b, s, heads, hd), theta)
    k = rope((x @ p[pre + "wk"]).view(b, s, kv_heads, hd), theta)
    v = (x @ p[pre + "wv"]).view(b, s, kv_heads, hd)
    rep = heads // kv_heads
    k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return ctx.transpose(1, 2).reshape(b, s, d) @ p[pre + "wo"]


def llama_sdpa(p, batch, c):
    """torch_reference.llama with sdpa_attention: the same parameters, layers and loss."""
    x = p["embed"][batch["tokens"].long()]
    for l in range(c["layers"]):
        pre = f"l{l}."
        x = x + sdpa_attention(rms_norm(x, p[pre + "attn_norm"], c["norm_eps"]), p, pre, c["heads"], c["kv_heads"],
                               c["rope_theta"])
        h = rms_norm(x, p[pre + "mlp_norm"], c["norm_eps"])
        x = x + (F.silu(h @ p[pre + "w_gate"]) * (h @ p[pre + "w_up"])) @ p[pre + "w_down"]
    logits = rms_norm(x, p["final_norm"], c["norm_eps"]) @ p["lm_head"]
    return logits, F.cross_entropy(logits.flatten(0, 1), batch["targets"].long().flatten(), ignore_index=-100)


@dataclasses.dataclass
class Way:
    """One way of stepping the model: a variant of the JSON output."""
    label: str                  # in the progress lines
    checkpoint: bool = False    # activation checkpointing per layer
    autocast: bool = False      # torch.autocast(dtype=torch.bfloat16)
    sdpa: bool = False          # attention as F.scaled_dot_product_attention(is_causal=True)
    compile: bool = False       # torch.compile(dynamic=True) of the forward and loss
    memory_budget: float = None  # torch._functorch.config.activation_memory_budget while it compiles
    padded: bool = False        # also timed padded to buckets


def loss_function(way, model):
    """(params, batch) -> loss; compiled with the way's torch.compile. Only the loss leaves it, so a
    compiled graph need not keep the logits for its caller."""
    def loss(params, batch):
        if way.sdpa:
            return llama_sdpa(params, batch, model)[1]
        return llama(params, batch, model, way.checkpoint)[1]
    # Parameters (nn.Parameter) keep static shapes under dynamic=True; the batch's B and S are symbols.
    return torch.compile(loss, dynamic=True) if way.compile else loss


class Stepper:
    """One training step as disc's graph does it: loss, backward, clipping (if any), AdamW."""

    def __init__(self, config, params, way, device="cpu"):
        o = config["optimizer"]
        self.device = device
        self.autocast = way.autocast
        self.loss = loss_function(way, config["model"])
        self.params, self.clip = params, o["clip_norm"]
        self.opt = torch.optim.AdamW(params.values(), lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                                     weight_decay=o["weight_decay"])

    def __call__(self, batch):
        self.opt.zero_grad(set_to_none=True)
        # bf16 autocast as a PyTorch user writes it: matmuls in bf16, the rest as autocast decides.
        with torch.autocast(self.device.split(":")[0], dtype=torch.bfloat16, enabled=self.autocast):
            loss = self.loss(self.params, batch)
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
    return {"tokens_per_s": max(passes, default=0.0), "passes_tokens_per_s": passes,  # 0 for --repeats 0
            "step_ms_median": 1e3 * statistics.median(steps) if steps else 0.0, "step_ms": [1e3 * t for t in steps],
            "peak_rss_bytes": status_bytes("VmHWM"),
            "peak_device_bytes": torch.cuda.max_memory_allocated() if on_gpu else 0,
            "reserved_device_bytes": torch.cuda.max_memory_reserved() if on_gpu else 0}


def compiled_graphs():
    """Graphs dynamo has compiled in this process so far (0 without torch.compile)."""
    if not hasattr(torch, "compile"):
        return 0
    from torch._dynamo.utils import counters
    return int(counters["stats"]["unique_graphs"])


class CompileSetting:
    """A compiled way's cold start and settings: dynamo reset, fresh on-disk caches (Inductor's and
    Triton's), and the activation memory budget while the way runs (restored after)."""

    def __init__(self, way):
        self.way = way

    def __enter__(self):
        if not self.way.compile:
            return self
        torch._dynamo.reset()
        self.cache = tempfile.TemporaryDirectory(prefix="torch_llama_step-")
        self.env = {k: os.environ.get(k) for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = self.cache.name
        os.environ["TRITON_CACHE_DIR"] = os.path.join(self.cache.name, "triton")
        if self.way.memory_budget is not None:
            import torch._functorch.config as functorch_config
            self.budget = functorch_config.activation_memory_budget
            functorch_config.activation_memory_budget = self.way.memory_budget
        return self

    def __exit__(self, *exc):
        if not self.way.compile:
            return
        if self.way.memory_budget is not None:
            import torch._functorch.config as functorch_config
            functorch_config.activation_memory_budget = self.budget
        for k, v in self.env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        torch._dynamo.reset()
        self.cache.cleanup()


def variant(way, config, params, batches, pad_to, args, tokens):
    """One way's warm-up and timed passes, unpadded and (with way.padded and pad_to > 0) padded,
    from a fresh copy of params."""
    fresh = {n: torch.nn.Parameter(p.detach().clone().to(args.device)) for n, p in params.items()}
    with CompileSetting(way):
        step = Stepper(config, fresh, way, args.device)
        graphs = compiled_graphs()
        warm_seconds, warm_losses = run_pass(step, batches[:1], f"{way.label} warm-up (first step)")
        after_first = compiled_graphs()
        more_seconds, more_losses = run_pass(step, batches[1:], f"{way.label} warm-up")
        out = {"first_loss": warm_losses[0], "first_step_s": warm_seconds[0], "sdpa": way.sdpa,
               "unpadded": timed(step, batches, args.repeats, way.label, tokens)}
        if way.padded and pad_to > 0:
            padded = [pad(b, bucket_bound(b["tokens"].shape[1], pad_to)) for b in batches]
            step(padded[0])  # the first step at the padded shape allocates its buffers
            out["padded"] = timed(step, padded, args.repeats, f"{way.label} padded to buckets <= {pad_to}", tokens)
        if way.compile:
            out["graphs_first_step"] = after_first - graphs
            out["recompiles"] = compiled_graphs() - after_first
        if way.memory_budget is not None:
            out["memory_budget"] = way.memory_budget
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
    ap.add_argument("--sdpa", action="store_true",
                    help="--autocast's attention is F.scaled_dot_product_attention(is_causal=True) (PyTorch >= 2.0)")
    ap.add_argument("--compile", nargs="?", const="f32,bf16", default="", metavar="DTYPES",
                    help="also time torch.compile(dynamic=True), unpadded, in these of f32 and bf16 (autocast with "
                         "SDPA), comma-separated (default: both)")
    ap.add_argument("--memory-budget", type=float, metavar="X",
                    help="also time compiled bf16 with torch._functorch.config.activation_memory_budget = X")
    ap.add_argument("--features", action="store_true",
                    help="print what this PyTorch has (sdpa, compile, memory_budget) as JSON and exit")
    args = ap.parse_args()
    have = features()
    if args.features:
        print(json.dumps(have))
        return
    check_features(args, have)
    if set(args.compile.split(",")) - {"", "f32", "bf16"}:
        raise SystemExit(f"torch_llama_step.py: --compile takes f32, bf16 or both (f32,bf16), not {args.compile}")
    if args.memory_budget is not None and not 0 <= args.memory_budget <= 1:
        raise SystemExit(f"torch_llama_step.py: --memory-budget {args.memory_budget} is outside [0, 1]")
    torch.set_num_threads(args.threads)
    config, batches, params = load_workload(args.dir) if args.dir else make_workload(args)
    batches = [{k: v.to(args.device) for k, v in b.items()} for b in batches]
    pad_to = args.pad_to or config["max_len"]
    tokens = sum(int((b["targets"] != IGNORE_INDEX).sum()) for b in batches)

    def run(way):
        return variant(way, config, params, batches, pad_to, args, tokens)

    eager = run(Way("timed", padded=True))
    out = {"torch": torch.__version__, "device": args.device, "threads": torch.get_num_threads(), "batches": len(batches),
           "real_tokens": tokens, "features": have, "first_loss": eager["first_loss"],
           "first_step_s": eager["first_step_s"], "unpadded": eager["unpadded"]}
    if pad_to > 0:
        out["padded_to"] = pad_to
        out["padded"] = eager["padded"]
    # Each further variant: its JSON key and way, when its option asks for it.
    more = [("checkpointed", args.checkpoint, Way("checkpointed", checkpoint=True, padded=True)),
            ("autocast", args.autocast, Way("bf16 autocast" + (" sdpa" if args.sdpa else ""), autocast=True,
                                            sdpa=args.sdpa)),
            ("compile_f32", "f32" in args.compile.split(","), Way("compiled f32", compile=True)),
            ("compile_bf16", "bf16" in args.compile.split(","), Way("compiled bf16 sdpa", autocast=True, sdpa=True, compile=True)),
            ("compile_bf16_budget", args.memory_budget is not None,
             Way(f"compiled bf16 sdpa budget {args.memory_budget}", autocast=True, sdpa=True, compile=True,
                 memory_budget=args.memory_budget))]
    for key, asked, way in more:
        if asked:
            out[key] = run_compiled(run, way) if way.compile else run(way)
    print(json.dumps(out))


def run_compiled(run, way):
    """run(way), or {"error": why} when torch.compile fails (a PyTorch on a CPU may lack what
    Inductor needs): the other variants still report, and the caller's row says why."""
    try:
        return run(way)
    except Exception as e:  # noqa: BLE001: Dynamo and Inductor raise many kinds
        log(traceback.format_exc())
        lines = [line for line in str(e).splitlines() if line.strip()]
        # The message's first line names the failure; Dynamo appends advice lines after it.
        return {"error": f"{type(e).__name__}: {lines[0] if lines else 'no message'}"}


if __name__ == "__main__":
    main()
