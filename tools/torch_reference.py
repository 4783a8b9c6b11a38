#!/usr/bin/env python3
"""Records PyTorch reference results for disc's model families (llama, gpt2, mlp).

For each family at a small size: random weights and a batch (seeded), the loss, the logits, the
gradient of every parameter, the global gradient norm, and the parameters after three AdamW steps
(with clipping by global norm) on that batch. Everything goes into
tests/reference/<family>.safetensors; tests/engine/torch_reference_test.cc runs disc on the same
weights and batch and compares. The tests do not need torch: run this script only to regenerate.

Needs Debian's python3-torch and libopenblas0-openmp:
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp /usr/bin/python3 tools/torch_reference.py

The model, parameter and safetensors functions are importable without running anything
(tools/bench/torch_llama_step.py times llama with them).

The models mirror ir/models/*.cc exactly: weights are [in, out] (y = x @ W), parameter names
match, attention uses rotate-half RoPE and repeats each kv head for consecutive query heads.

llama also has bf16 references, tests/reference/llama_bf16.safetensors: llama.safetensors' weights
and batch (the same seed), the forward run under torch.autocast("cpu", dtype=torch.bfloat16), with
the loss, every parameter's gradient (f32, as autocast gives them) and the global gradient norm.
It runs disc's precision policy (ir/passes/autocast.cc) on the step disc's Trainer compiles:
engine/pipeline.cc makes attention one op and the head with the cross-entropy another
(linear_cross_entropy) before the precision stage, and fuses memory-bound ops into kernels that
compute in f32 and round each bf16 value they make, stored or not, as its op alone would. In bf16:
  * the matmuls x @ wq, wk, wv, wo, w_gate, w_up, w_down: bf16 operands (the weights cast from f32
    each step), f32 sums, the result rounded to bf16 once; their gradients are such matmuls too
  * RoPE of q and k (computed in f32 from the bf16 projections, rounded once; the backward the
    same) and the kv heads' repeat (its gradient: the two heads' sum, rounded once)
  * SwiGLU: silu(gate) and its product with up, each rounded to bf16; the gradients by the same
    steps as disc's gradient rules, each rounded (_Bf16SwiGLU)
In f32: the embedding, every rms_norm (each matmul casts the norm's output to bf16 itself, so
the gradients reaching it from its matmuls add in f32, as in disc's fused kernel), the residual
adds (f32 + bf16 -> f32), attention (q, k, v cast to f32 after RoPE: scores, mask, softmax,
probs @ v) and the final norm.
The head: disc's linear_cross_entropy reads the bf16 norm output and the bf16 lm_head, sums the
logits in f32 and keeps them f32 (they never exist whole), computes the cross-entropy in f32 and
rounds dh and dw to bf16 once (_Bf16Head); autocast would round the logits to bf16 first.
tests/reference/llama_bf16_dot.safetensors is the same on a CPU with bf16 dot products
(TrainerOptions::bf16_dot), where attention rounds P and dS to bf16 for their products
(_Bf16DotAttention) and the head rounds the logits' gradient to bf16 for its own.
Where PyTorch 1.13 on the CPU does otherwise, the bf16 path says so itself:
  * autocast would run the attention products in bf16 (f32_region)
  * its bf16 GEMM on a CPU without AVX512 sums in bf16, rounding after every product and addition
    (2% error at K=172 against 0.3% for one rounding; oneDNN's, taken on AVX512 CPUs, sums in f32),
    so the bf16 matmuls here are f32 GEMMs of the bf16 operands rounded once (bf16_matmul): what
    disc computes, and the same recording on every CPU
  * its bf16 silu is not silu rounded once (here 97 of 336 values are one bf16 step off that), and
    its silu gradient is one kernel, so SwiGLU is written out in f32 steps, each rounded
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F
import torch.utils.checkpoint

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference")
OPTIM = {"lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.1, "clip_norm": 0.5}
STEPS = 3


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, theta):  # x [B, S, H, D], positions along dim 1
    d = x.shape[-1]
    half = d // 2
    pos = torch.arange(x.shape[1], dtype=torch.float64, device=x.device)
    inv = theta ** (-2.0 * torch.arange(half, dtype=torch.float64, device=x.device) / d)
    ang = (pos[:, None] * inv[None, :]).to(x.dtype)  # [S, D/2]
    cos, sin = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def repeat_kv(x, heads):
    """x [B, S, KV, D] -> [B, S, heads, D], each kv head repeated for consecutive query heads. The same
    values as x.repeat_interleave(heads // KV, dim=2), written as expand and reshape so that it exports
    to ONNX without a Loop (tools/onnx_export.py)."""
    b, s, kv, d = x.shape
    return x[:, :, :, None, :].expand(b, s, kv, heads // kv, d).reshape(b, s, heads, d)


def attention(x, p, pre, heads, kv_heads, theta, bias):
    b, s, d = x.shape
    hd = d // heads

    def lin(name):
        y = x @ p[pre + "w" + name]
        return y + p[pre + "b" + name] if bias else y

    q = lin("q").view(b, s, heads, hd)
    k = lin("k").view(b, s, kv_heads, hd)
    v = lin("v").view(b, s, kv_heads, hd)
    if theta is not None:
        q, k = rope(q, theta), rope(k, theta)
    k, v = repeat_kv(k, heads), repeat_kv(v, heads)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
    mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
    probs = scores.masked_fill(mask, float("-inf")).softmax(-1)
    ctx = (probs @ v).transpose(1, 2).reshape(b, s, heads * hd)
    y = ctx @ p[pre + "wo"]
    return y + p[pre + "bo"] if bias else y


def llama_layer(x, p, pre, c):
    x = x + attention(rms_norm(x, p[pre + "attn_norm"], c["norm_eps"]), p, pre, c["heads"],
                      c["kv_heads"], c["rope_theta"], False)
    h = rms_norm(x, p[pre + "mlp_norm"], c["norm_eps"])
    return x + (F.silu(h @ p[pre + "w_gate"]) * (h @ p[pre + "w_up"])) @ p[pre + "w_down"]


def llama(p, batch, c, checkpoint=False):
    """With checkpoint, each layer keeps only its input for the backward pass and recomputes the
    rest there (activation checkpointing per layer)."""
    x = p["embed"][batch["tokens"].long()]
    for l in range(c["layers"]):
        if checkpoint:
            x = torch.utils.checkpoint.checkpoint(llama_layer, x, p, f"l{l}.", c, use_reentrant=False)
        else:
            x = llama_layer(x, p, f"l{l}.", c)
    logits = rms_norm(x, p["final_norm"], c["norm_eps"]) @ p["lm_head"]
    return logits, F.cross_entropy(logits.flatten(0, 1), batch["targets"].long().flatten(), ignore_index=-100)


class _Bf16Matmul(torch.autograd.Function):
    """a @ b for bf16 a [..., K] and b [K, N]: f32 sums, the result rounded to bf16 once. Its
    gradients are the same kind of matmul: dA = dY @ b^T, dB = a^T @ dY summed over the rows."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        with torch.autocast("cpu", enabled=False):
            return (a.float() @ b.float()).bfloat16()

    @staticmethod
    def backward(ctx, dy):
        a, b = ctx.saved_tensors
        with torch.autocast("cpu", enabled=False):
            dy = dy.float()
            da = (dy @ b.float().t()).bfloat16()
            db = (a.float().flatten(0, -2).t() @ dy.flatten(0, -2)).bfloat16()
        return da, db


class _Bf16Head(torch.autograd.Function):
    """disc's linear_cross_entropy on bf16 h [B, S, D] and w [D, V]: f32 logits (f32 sums, not
    rounded), the cross-entropy in f32; dh and dw summed in f32 and rounded to bf16 once. With
    `dot` (on bf16 dot products) the logits' gradient G is rounded to bf16 before its products."""

    @staticmethod
    def forward(ctx, h, w, targets, dot):
        with torch.autocast("cpu", enabled=False):
            h32 = h.float().flatten(0, -2)
            logits = h32 @ w.float()
            loss = F.cross_entropy(logits, targets, ignore_index=-100)
            counted = (targets != -100).sum()
            g = logits.softmax(-1)
            g[torch.arange(len(targets)), targets.clamp(min=0)] -= 1
            g = g * (targets != -100).unsqueeze(1) / counted
            g = _bf16(g) if dot else g
        ctx.save_for_backward(h32, w, g)
        ctx.shape = h.shape
        return loss

    @staticmethod
    def backward(ctx, dloss):
        h32, w, g = ctx.saved_tensors
        with torch.autocast("cpu", enabled=False):
            dh = (g @ w.float().t()).bfloat16().view(ctx.shape)
            dw = (h32.t() @ g).bfloat16()
            dloss = dloss.float()
            return (dh.float() * dloss).bfloat16(), (dw.float() * dloss).bfloat16(), None, None


def _bf16(x):
    """x (f32) rounded to bf16 and back: the value a bf16 op of disc's holds."""
    return x.bfloat16().float()


class _Bf16SwiGLU(torch.autograd.Function):
    """silu(gate) * up for bf16 gate and up as disc's ops compute it: each op in f32 from bf16
    operands, its result rounded to bf16; the backward by disc's gradient rules (ir/ops/
    elementwise_ops.cc: silu' = s * (1 + x * (1 - s)) with s = sigmoid(x)), each step rounded."""

    @staticmethod
    def forward(ctx, gate, up):
        ctx.save_for_backward(gate, up)
        with torch.autocast("cpu", enabled=False):
            g = gate.float()
            return _bf16(_bf16(g * torch.sigmoid(g)) * up.float()).bfloat16()

    @staticmethod
    def backward(ctx, da):
        gate, up = ctx.saved_tensors
        with torch.autocast("cpu", enabled=False):
            g, u, da = gate.float(), up.float(), da.float()
            s = _bf16(g * torch.sigmoid(g))
            dup, ds = _bf16(da * s), _bf16(da * u)
            sig = _bf16(torch.sigmoid(g))
            deriv = _bf16(sig * _bf16(1 + _bf16(g * _bf16(1 - sig))))
            return _bf16(ds * deriv).bfloat16(), dup.bfloat16()


def bf16_matmul(a, w):
    """A bf16 matmul as disc runs it: the operands cast to bf16 (an f32 activation by each matmul that
    reads it, as autocast does), f32 sums, a bf16 result."""
    return _Bf16Matmul.apply(a.bfloat16(), w.bfloat16())


def _causal_probs(q, k, scale):
    """softmax(scale q k^T) under the causal mask, in f32 from bf16 q, k [B, H, S, D]."""
    s = q.shape[-2]
    scores = (q.float() @ k.float().transpose(-1, -2)) * scale
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    return scores.masked_fill(mask, float("-inf")).softmax(-1)


class _Bf16DotAttention(torch.autograd.Function):
    """disc's causal attention on bf16 dot products (devices/cpu/block_attention.h) for bf16 q, k,
    v [B, H, S, D]: scores and softmax in f32, P rounded to bf16 for P v (f32 sums, the output
    rounded once); backward: dP = dO v^T and dS = scale P (dP - rowsum(P dP)) in f32, dS rounded
    to bf16 for dq = dS k and dk = dS^T q, dv = P^T dO with P in bf16, each rounded once."""

    @staticmethod
    def forward(ctx, q, k, v, scale):
        ctx.save_for_backward(q, k, v)
        ctx.scale = scale
        with torch.autocast("cpu", enabled=False):
            return (_bf16(_causal_probs(q, k, scale)) @ v.float()).bfloat16()

    @staticmethod
    def backward(ctx, dout):
        q, k, v = ctx.saved_tensors
        with torch.autocast("cpu", enabled=False):
            p, do = _causal_probs(q, k, ctx.scale), dout.float()
            dp = do @ v.float().transpose(-1, -2)
            ds = _bf16(ctx.scale * p * (dp - (p * dp).sum(-1, keepdim=True)))
            dq, dk = (ds @ k.float()).bfloat16(), (ds.transpose(-1, -2) @ q.float()).bfloat16()
            dv = (_bf16(p).transpose(-1, -2) @ do).bfloat16()
        return dq, dk, dv, None


def f32_region():
    """Code that runs in f32 under disc's policy, where autocast would pick bf16."""
    return torch.autocast("cpu", enabled=False)


def attention_bf16(h, p, pre, heads, kv_heads, theta, dot):
    """attention() under disc's policy: bf16 projections, f32 attention (with `dot`, on bf16 dot
    products: _Bf16DotAttention)."""
    b, s, d = h.shape
    hd = d // heads
    q = bf16_matmul(h, p[pre + "wq"]).view(b, s, heads, hd)
    k = bf16_matmul(h, p[pre + "wk"]).view(b, s, kv_heads, hd)
    v = bf16_matmul(h, p[pre + "wv"]).view(b, s, kv_heads, hd)
    with f32_region():
        q, k = rope(q.float(), theta).bfloat16(), rope(k.float(), theta).bfloat16()
    rep = heads // kv_heads
    k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
    if dot:
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        ctx = _Bf16DotAttention.apply(q, k, v, 1.0 / math.sqrt(hd)).transpose(1, 2).reshape(b, s, heads * hd)
        return bf16_matmul(ctx, p[pre + "wo"])
    with f32_region():  # disc's attention op: f32 q, k, v
        q, k, v = (t.transpose(1, 2).float() for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
        mask = torch.ones(s, s, dtype=torch.bool, device=h.device).triu(1)
        probs = scores.masked_fill(mask, float("-inf")).softmax(-1)
        ctx = (probs @ v).transpose(1, 2).reshape(b, s, heads * hd)
    return bf16_matmul(ctx, p[pre + "wo"])


def llama_bf16(p, batch, c, dot=False):
    """llama() under torch.autocast("cpu", dtype=torch.bfloat16) with disc's precision policy (see the
    docstring at the top): returns the loss (f32). `dot`: attention and head as on a CPU with bf16
    dot products."""
    eps = c["norm_eps"]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x = p["embed"][batch["tokens"].long()]
        for l in range(c["layers"]):
            pre = f"l{l}."
            with f32_region():  # f32 h: the matmuls' gradients reaching it add in f32
                h = rms_norm(x, p[pre + "attn_norm"], eps)
            x = x + attention_bf16(h, p, pre, c["heads"], c["kv_heads"], c["rope_theta"], dot)
            with f32_region():
                h = rms_norm(x, p[pre + "mlp_norm"], eps)
            gate, up = bf16_matmul(h, p[pre + "w_gate"]), bf16_matmul(h, p[pre + "w_up"])
            x = x + bf16_matmul(_Bf16SwiGLU.apply(gate, up), p[pre + "w_down"])
        with f32_region():
            h = rms_norm(x, p["final_norm"], eps)
        return _Bf16Head.apply(h.bfloat16(), p["lm_head"].bfloat16(), batch["targets"].long().flatten(), dot)


def gpt2(p, batch, c):
    s = batch["tokens"].shape[1]
    x = p["wte"][batch["tokens"].long()] + p["wpe"][torch.arange(s, device=p["wpe"].device)]
    ln = lambda v, n: F.layer_norm(v, (c["hidden"],), p[n + ".w"], p[n + ".b"], c["norm_eps"])
    for l in range(c["layers"]):
        pre = f"h{l}."
        x = x + attention(ln(x, pre + "ln1"), p, pre, c["heads"], c["heads"], None, True)
        h = F.gelu(ln(x, pre + "ln2") @ p[pre + "fc"] + p[pre + "fc.b"], approximate="tanh")
        x = x + h @ p[pre + "proj"] + p[pre + "proj.b"]
    logits = ln(x, "ln_f") @ p["wte"].t()
    return logits, F.cross_entropy(logits.flatten(0, 1), batch["targets"].long().flatten(), ignore_index=-100)


def mlp(p, batch, c):
    x = batch["x"]
    n = len(c["hidden"])
    for i in range(n + 1):
        x = x @ p[f"fc{i}.w"] + p[f"fc{i}.b"]
        if i < n:
            x = F.relu(x)
    return x, F.cross_entropy(x, batch["labels"].long())


def llama_shapes(c):
    """Every llama parameter's shape by name, in disc's order (ir/models/llama.cc)."""
    d, f, kv = c["hidden"], c["ffn"], c["kv_heads"] * (c["hidden"] // c["heads"])
    shapes = {"embed": (c["vocab"], d)}
    for l in range(c["layers"]):
        pre = f"l{l}."
        shapes.update({pre + "attn_norm": (d,), pre + "wq": (d, d), pre + "wk": (d, kv), pre + "wv": (d, kv),
                       pre + "wo": (d, d), pre + "mlp_norm": (d,), pre + "w_gate": (d, f), pre + "w_up": (d, f),
                       pre + "w_down": (f, d)})
    shapes.update({"final_norm": (d,), "lm_head": (d, c["vocab"])})
    return shapes


def params_llama(c, g):
    return random_params(llama_shapes(c), g)


def params_gpt2(c, g):
    d, f = c["hidden"], c["ffn"]
    shapes = {"wte": (c["vocab"], d), "wpe": (c["max_seq"], d)}
    for l in range(c["layers"]):
        pre = f"h{l}."
        for n in ("ln1", "ln2"):
            shapes.update({pre + n + ".w": (d,), pre + n + ".b": (d,)})
        for n in ("q", "k", "v", "o"):
            shapes.update({pre + "w" + n: (d, d), pre + "b" + n: (d,)})
        shapes.update({pre + "fc": (d, f), pre + "fc.b": (f,), pre + "proj": (f, d), pre + "proj.b": (d,)})
    shapes.update({"ln_f.w": (d,), "ln_f.b": (d,)})
    return random_params(shapes, g)


def params_mlp(c, g):
    shapes, width = {}, c["in"]
    for i, out in enumerate(c["hidden"] + [c["classes"]]):
        shapes.update({f"fc{i}.w": (width, out), f"fc{i}.b": (out,)})
        width = out
    return random_params(shapes, g)


def random_params(shapes, g):
    """Matrices N(0, 0.3^2); vectors 1 + N(0, 0.1^2) for norm weights, N(0, 0.1^2) otherwise."""
    out = {}
    for name, shape in shapes.items():
        if len(shape) == 2:
            t = torch.randn(shape, generator=g) * 0.3
        elif "norm" in name or name.endswith(".w"):
            t = 1 + torch.randn(shape, generator=g) * 0.1
        else:
            t = torch.randn(shape, generator=g) * 0.1
        out[name] = t.float().requires_grad_(True)
    return out


def token_batch(c, g, b=2, s=7):
    tokens = torch.randint(0, c["vocab"], (b, s), generator=g, dtype=torch.int32)
    targets = torch.randint(0, c["vocab"], (b, s), generator=g, dtype=torch.int32)
    targets[1, 4:] = -100  # the second sequence is 4 tokens long: its padding must not count
    return {"tokens": tokens, "targets": targets}


FAMILIES = {
    "llama": (llama, params_llama, token_batch,
              {"vocab": 32, "hidden": 16, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 24,
               "norm_eps": 1e-5, "rope_theta": 10000.0}),
    "gpt2": (gpt2, params_gpt2, token_batch,
             {"vocab": 32, "hidden": 16, "layers": 2, "heads": 2, "ffn": 32, "max_seq": 16, "norm_eps": 1e-5}),
    "mlp": (mlp, params_mlp,
            lambda c, g: {"x": torch.randn(5, c["in"], generator=g),
                          "labels": torch.randint(0, c["classes"], (5,), generator=g, dtype=torch.int32)},
            {"in": 12, "hidden": [16, 8], "classes": 5}),
}


SAFETENSORS_DTYPES = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32, "I64": torch.int64,
                      "BF16": torch.bfloat16, "F16": torch.float16}


def write_safetensors(path, tensors, metadata, compact=False):
    """Writes the tensors (F32, I32, BF16 or F16) in the order given. The header is sorted JSON, or with compact
    laid out as the safetensors library writes it (Hugging Face checkpoints): no spaces, entries in data order,
    each as dtype, shape, data_offsets."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        dtype = {torch.float32: "F32", torch.int32: "I32", torch.bfloat16: "BF16", torch.float16: "F16"}[t.dtype]
        data = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()  # numpy has no bf16
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = (json.dumps(header, separators=(",", ":")) if compact else json.dumps(header, sort_keys=True)).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def read_safetensors(path):
    """The tensors of a safetensors file by name (disc's checkpoints and data), and its metadata."""
    dtypes = SAFETENSORS_DTYPES
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    tensors = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if e["dtype"] not in dtypes:
            raise ValueError(f"{path}: tensor {name} has dtype {e['dtype']}; this reader knows {sorted(dtypes)}")
        begin, end = e["data_offsets"]
        if begin == end:  # torch.frombuffer refuses an empty buffer
            tensors[name] = torch.empty(e["shape"], dtype=dtypes[e["dtype"]])
        else:
            tensors[name] = torch.frombuffer(bytearray(data[begin:end]), dtype=dtypes[e["dtype"]]).reshape(e["shape"])
    return tensors, header.get("__metadata__", {})


def record(family):
    forward, make_params, make_batch, config = FAMILIES[family]
    g = torch.Generator().manual_seed(1234)
    params = make_params(config, g)
    batch = make_batch(config, g)
    out = {"param." + n: p.detach().clone() for n, p in params.items()}
    out.update({"input." + n: t for n, t in batch.items()})
    logits, loss = forward(params, batch, config)
    loss.backward()
    out["logits"], out["loss"] = logits, loss.reshape(())
    out.update({"grad." + n: p.grad.clone() for n, p in params.items()})
    out["grad_norm"] = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params.values())).float()
    opt = torch.optim.AdamW(params.values(), lr=OPTIM["lr"], betas=(OPTIM["beta1"], OPTIM["beta2"]),
                            eps=OPTIM["eps"], weight_decay=OPTIM["weight_decay"])
    for step in range(STEPS):
        if step > 0:
            opt.zero_grad()
            forward(params, batch, config)[1].backward()
        torch.nn.utils.clip_grad_norm_(params.values(), OPTIM["clip_norm"])
        opt.step()
    out.update({f"after{STEPS}." + n: p.detach().clone() for n, p in params.items()})
    meta = {"family": family, "config": json.dumps(config), "optimizer": json.dumps(OPTIM), "steps": str(STEPS),
            "torch": torch.__version__}
    path = os.path.join(OUT_DIR, family + ".safetensors")
    write_safetensors(path, out, meta)
    print(f"{family}: loss {loss.item():.6f}, grad norm {out['grad_norm'].item():.6f} -> {os.path.relpath(path)}")


def record_llama_bf16(dot=False):
    """llama_bf16.safetensors (llama_bf16_dot with `dot`): llama.safetensors' weights and batch, the loss,
    gradients and gradient norm of llama_bf16 (no optimizer steps)."""
    _, make_params, make_batch, config = FAMILIES["llama"]
    g = torch.Generator().manual_seed(1234)  # record()'s seed: the same weights and batch
    params = make_params(config, g)
    batch = make_batch(config, g)
    out = {"param." + n: p.detach().clone() for n, p in params.items()}
    out.update({"input." + n: t for n, t in batch.items()})
    loss = llama_bf16(params, batch, config, dot)
    loss.backward()
    out["loss"] = loss.reshape(())
    out.update({"grad." + n: p.grad.clone() for n, p in params.items()})
    out["grad_norm"] = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params.values())).float()
    meta = {"family": "llama", "config": json.dumps(config), "precision": "bf16", "torch": torch.__version__}
    name = "llama_bf16_dot" if dot else "llama_bf16"
    path = os.path.join(OUT_DIR, name + ".safetensors")
    write_safetensors(path, out, meta)
    print(f"{name}: loss {loss.item():.6f}, grad norm {out['grad_norm'].item():.6f} -> {os.path.relpath(path)}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    os.makedirs(OUT_DIR, exist_ok=True)
    for name in sys.argv[1:] or [*FAMILIES, "llama_bf16", "llama_bf16_dot"]:
        if name.startswith("llama_bf16"):
            record_llama_bf16(dot=name == "llama_bf16_dot")
        else:
            record(name)
