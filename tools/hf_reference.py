#!/usr/bin/env python3
"""Writes tiny Hugging Face-format Llama checkpoints and PyTorch reference results for them.

Two models, each a folder as transformers 4.44's LlamaForCausalLM.save_pretrained writes it (config.json and
safetensors weights named and laid out as HF names them, nn.Linear weights [out, in]):
  tests/reference/hf_llama_gqa/   untied lm_head, 4 query heads sharing 2 kv heads, bf16, two shards and
                                  model.safetensors.index.json
  tests/reference/hf_llama_tied/  lm_head tied to embed_tokens (so not in the file), 4 query heads sharing 1 kv
                                  head, f16, one model.safetensors
Beside each folder, tests/reference/<model>.safetensors holds a batch (input.tokens, input.targets), and what HF's
modeling_llama computes on it in f32 from the stored weights upcast: logits, the mean cross-entropy loss over the
targets that are not -100 (targets are given as they are, with no label shift), grad.<HF name> for every parameter
in HF layout (tied: the embedding's gradient includes the head's) and grad_norm. The forward is HF's math written
out in plain torch; the script then reads everything back and checks it, and checks that the forward agrees with
torch_reference.llama (disc's own llama, [in, out] weights) on the same weights.

tests/formats/hf_llama_test.cc loads each folder through disc's Hugging Face loader, runs disc on the same batch and
compares logits, loss, gradients and gradient norm with these files. The tests do not need torch: run this script
only to regenerate:
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp /usr/bin/python3 tools/hf_reference.py
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as tr  # noqa: E402

BATCH, SEQ, PAD = 2, 9, 3  # the second sequence ends in PAD padding tokens
MODELS = {
    "hf_llama_gqa": {
        "dtype": torch.bfloat16,
        "first_shard": ("model.embed_tokens.", "model.layers.0."),  # the rest goes into the second shard
        "sizes": {"vocab_size": 48, "hidden_size": 32, "intermediate_size": 40, "num_attention_heads": 4,
                  "num_key_value_heads": 2, "num_hidden_layers": 2, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
                  "tie_word_embeddings": False, "max_position_embeddings": 64}},
    "hf_llama_tied": {
        "dtype": torch.float16,
        "first_shard": None,  # one model.safetensors
        "sizes": {"vocab_size": 40, "hidden_size": 24, "intermediate_size": 36, "num_attention_heads": 4,
                  "num_key_value_heads": 1, "num_hidden_layers": 2, "rms_norm_eps": 1e-6, "rope_theta": 500000.0,
                  "tie_word_embeddings": True, "max_position_embeddings": 64}},
}
TORCH_DTYPE_NAMES = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}


def hf_config(sizes, dtype):
    """config.json as transformers 4.44 writes it for LlamaForCausalLM."""
    c = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "attention_bias": False,
         "attention_dropout": 0.0, "mlp_bias": False, "rope_scaling": None, "bos_token_id": 1, "eos_token_id": 2,
         "torch_dtype": TORCH_DTYPE_NAMES[dtype], "initializer_range": 0.02, "pretraining_tp": 1, "use_cache": True,
         "transformers_version": "4.44.0"}
    c.update(sizes)
    return c


def hf_shapes(c):
    """Every parameter's shape by HF name, in modeling_llama's order."""
    d, f, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    hd = d // c["num_attention_heads"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    shapes = {"model.embed_tokens.weight": (v, d)}
    for l in range(c["num_hidden_layers"]):
        pre = f"model.layers.{l}."
        shapes.update({pre + "input_layernorm.weight": (d,), pre + "self_attn.q_proj.weight": (q, d),
                       pre + "self_attn.k_proj.weight": (kv, d), pre + "self_attn.v_proj.weight": (kv, d),
                       pre + "self_attn.o_proj.weight": (d, q), pre + "post_attention_layernorm.weight": (d,),
                       pre + "mlp.gate_proj.weight": (f, d), pre + "mlp.up_proj.weight": (f, d),
                       pre + "mlp.down_proj.weight": (d, f)})
    shapes["model.norm.weight"] = (d,)
    if not c["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (v, d)
    return shapes


def rms_norm(x, w, eps):  # LlamaRMSNorm
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotary(s, hd, theta):  # LlamaRotaryEmbedding: cos, sin [S, hd]
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    freqs = torch.outer(torch.arange(s).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x[..., :x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n_rep):  # [B, KV, S, hd] -> [B, KV * n_rep, S, hd], kv head j serving query heads j*n_rep...
    b, kv, s, hd = x.shape
    return x[:, :, None, :, :].expand(b, kv, n_rep, s, hd).reshape(b, kv * n_rep, s, hd)


def hf_llama(p, tokens, c):
    """LlamaForCausalLM's logits [B, S, V] (eager attention, no cache, positions 0..S-1), all in f32."""
    b, s = tokens.shape
    heads, kv_heads, eps = c["num_attention_heads"], c["num_key_value_heads"], c["rms_norm_eps"]
    hd = c["hidden_size"] // heads
    cos, sin = rotary(s, hd, c["rope_theta"])
    mask = torch.full((s, s), torch.finfo(torch.float32).min).triu(1)  # added to the scores, as HF does
    x = p["model.embed_tokens.weight"][tokens.long()]
    for l in range(c["num_hidden_layers"]):
        pre = f"model.layers.{l}."
        h = rms_norm(x, p[pre + "input_layernorm.weight"], eps)
        proj = lambda n, nh: F.linear(h, p[pre + f"self_attn.{n}_proj.weight"]).view(b, s, nh, hd).transpose(1, 2)
        q, k, v = proj("q", heads), proj("k", kv_heads), proj("v", kv_heads)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, heads // kv_heads), repeat_kv(v, heads // kv_heads)
        scores = q @ k.transpose(2, 3) / math.sqrt(hd) + mask
        ctx = (scores.softmax(-1, dtype=torch.float32) @ v).transpose(1, 2).reshape(b, s, heads * hd)
        x = x + F.linear(ctx, p[pre + "self_attn.o_proj.weight"])
        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"], eps)
        mlp = lambda n, y: F.linear(y, p[pre + f"mlp.{n}_proj.weight"])
        x = x + mlp("down", F.silu(mlp("gate", h)) * mlp("up", h))
    x = rms_norm(x, p["model.norm.weight"], eps)
    return F.linear(x, p["model.embed_tokens.weight" if c["tie_word_embeddings"] else "lm_head.weight"])


def loss_of(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1), targets.long().flatten(), ignore_index=-100)


def token_batch(vocab, g):
    """targets[b, t] is the token after tokens[b, t]; the second sequence's last PAD positions are padding."""
    seq = torch.randint(0, vocab, (BATCH, SEQ + 1), generator=g, dtype=torch.int32)
    tokens, targets = seq[:, :-1].clone(), seq[:, 1:].clone()
    tokens[1, SEQ - PAD:] = 0
    targets[1, SEQ - PAD:] = -100
    return tokens, targets


def shard_files(names, first_shard):
    """HF file of each tensor name."""
    if first_shard is None:
        return {n: "model.safetensors" for n in names}
    return {n: f"model-0000{1 if n.startswith(first_shard) else 2}-of-00002.safetensors" for n in names}


def write_json(path, obj):  # as transformers writes config.json and the index
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def save_hf_folder(folder, stored, config, first_shard):
    os.makedirs(folder, exist_ok=True)
    write_json(os.path.join(folder, "config.json"), config)
    files = shard_files(stored, first_shard)
    for file in sorted(set(files.values())):  # the safetensors library orders a file's tensors by name
        tr.write_safetensors(os.path.join(folder, file), {n: stored[n] for n in sorted(stored) if files[n] == file},
                             {"format": "pt"}, compact=True)
    if first_shard is not None:
        total = sum(t.numel() * t.element_size() for t in stored.values())
        write_json(os.path.join(folder, "model.safetensors.index.json"),
                   {"metadata": {"total_size": total}, "weight_map": dict(sorted(files.items()))})


def record(model):
    spec = MODELS[model]
    config = hf_config(spec["sizes"], spec["dtype"])
    g = torch.Generator().manual_seed(1234)
    stored = {n: t.detach().to(spec["dtype"]) for n, t in tr.random_params(hf_shapes(config), g).items()}
    tokens, targets = token_batch(config["vocab_size"], g)
    save_hf_folder(os.path.join(tr.OUT_DIR, model), stored, config, spec["first_shard"])

    params = {n: t.float().requires_grad_(True) for n, t in stored.items()}
    logits = hf_llama(params, tokens, config)
    loss = loss_of(logits, targets)
    loss.backward()
    out = {"input.tokens": tokens, "input.targets": targets, "logits": logits, "loss": loss.reshape(())}
    out.update({"grad." + n: p.grad.clone() for n, p in params.items()})
    out["grad_norm"] = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params.values())).float()
    meta = {"config": json.dumps(spec["sizes"], sort_keys=True), "torch": torch.__version__}
    path = os.path.join(tr.OUT_DIR, model + ".safetensors")
    tr.write_safetensors(path, out, meta)
    print(f"{model}: loss {loss.item():.6f}, grad norm {out['grad_norm'].item():.6f} -> {os.path.relpath(path)}")


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        raw = f.read(n)
        size = 8 + n + len(f.read())
    return n, json.loads(raw), size


def decode(path, name, e):
    """A tensor's values decoded with numpy alone (bf16: the high half of an f32), to check torch's reading."""
    n, _, _ = read_header(path)
    with open(path, "rb") as f:
        f.seek(8 + n + e["data_offsets"][0])
        raw = f.read(e["data_offsets"][1] - e["data_offsets"][0])
    if e["dtype"] == "BF16":
        v = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        v = np.frombuffer(raw, dtype={"F16": "<f2", "F32": "<f4", "I32": "<i4"}[e["dtype"]]).astype(np.float64)
    return torch.from_numpy(v.astype(np.float32)).reshape(e["shape"])


def check(model):
    """Reads the folder and the reference back, recomputes from the files, and compares with torch_reference."""
    spec = MODELS[model]
    folder = os.path.join(tr.OUT_DIR, model)
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    assert config == hf_config(spec["sizes"], spec["dtype"])
    shapes = hf_shapes(config)
    files = shard_files(shapes, spec["first_shard"])
    if spec["first_shard"] is not None:
        with open(os.path.join(folder, "model.safetensors.index.json")) as f:
            index = json.load(f)
        assert index["weight_map"] == files and list(index) == ["metadata", "weight_map"]
    weights, data_bytes = {}, 0
    dtype = {t: name for name, t in tr.SAFETENSORS_DTYPES.items()}[spec["dtype"]]
    itemsize = torch.empty((), dtype=spec["dtype"]).element_size()
    for file in sorted(set(files.values())):
        path = os.path.join(folder, file)
        n, header, size = read_header(path)
        assert n % 8 == 0 and header.pop("__metadata__") == {"format": "pt"}
        assert list(header) == sorted(header) and all(files[name] == file for name in header)
        end = 0
        for name, e in header.items():  # entries tile the data section in order
            assert list(e) == ["dtype", "shape", "data_offsets"] and e["data_offsets"][0] == end
            assert tuple(e["shape"]) == shapes[name] and e["dtype"] == dtype
            end = e["data_offsets"][1]
            assert end - e["data_offsets"][0] == math.prod(e["shape"]) * itemsize
        assert 8 + n + end == size
        data_bytes += end
        tensors, _ = tr.read_safetensors(path)
        for name, t in tensors.items():
            assert torch.equal(t.float(), decode(path, name, header[name]))
            assert torch.equal(t.float().to(spec["dtype"]), t)  # the f32 values round-trip to the stored bits
        weights.update(tensors)
    assert set(weights) == set(shapes)
    if spec["first_shard"] is not None:
        assert index["metadata"]["total_size"] == data_bytes
    ref_path = os.path.join(tr.OUT_DIR, model + ".safetensors")
    ref, meta = tr.read_safetensors(ref_path)
    _, ref_header, _ = read_header(ref_path)
    for name, e in ref_header.items():
        if name != "__metadata__":
            assert torch.equal(ref[name].float(), decode(ref_path, name, e))
    assert json.loads(meta["config"]) == spec["sizes"]

    # Recomputed from the files: the same bits.
    params = {n: t.float().requires_grad_(True) for n, t in weights.items()}
    logits = hf_llama(params, ref["input.tokens"], config)
    loss = loss_of(logits, ref["input.targets"])
    loss.backward()
    assert torch.equal(logits.detach(), ref["logits"]) and torch.equal(loss.detach(), ref["loss"])
    assert all(torch.equal(p.grad, ref["grad." + n]) for n, p in params.items())
    assert set(ref) == {"input.tokens", "input.targets", "logits", "loss", "grad_norm"} | {"grad." + n for n in shapes}

    # torch_reference.llama on the same weights, transposed to [in, out]: the same model up to rounding.
    tp, tc = to_torch_reference(params, config)
    t_logits, t_loss = tr.llama(tp, {"tokens": ref["input.tokens"], "targets": ref["input.targets"]}, tc)
    t_loss.backward()
    grads = reference_grads(tp, config)
    errs = {"logits": rel_err(t_logits, logits), "loss": rel_err(t_loss, loss),
            "grads": max(rel_err(grads[n], ref["grad." + n]) for n in shapes)}
    print(f"{model}: files read back and recomputed bit for bit; vs torch_reference.llama, max rel err "
          + ", ".join(f"{k} {v:.1e}" for k, v in errs.items()))
    assert max(errs.values()) < 1e-5


def rel_err(a, b):
    return ((a.detach().double() - b.detach().double()).abs().max() / b.detach().double().abs().max()).item()


def reference_names(c):
    """HF name -> torch_reference's name ([in, out] for matrices), as pairs (tr name, transposed)."""
    m = {"model.embed_tokens.weight": ("embed", False), "model.norm.weight": ("final_norm", False),
         "lm_head.weight": ("lm_head", True)}
    for l in range(c["num_hidden_layers"]):
        hf, t = f"model.layers.{l}.", f"l{l}."
        m.update({hf + "input_layernorm.weight": (t + "attn_norm", False),
                  hf + "post_attention_layernorm.weight": (t + "mlp_norm", False)})
        m.update({hf + f"self_attn.{n}_proj.weight": (t + "w" + n, True) for n in "qkvo"})
        m.update({hf + f"mlp.{n}_proj.weight": (t + "w_" + n, True) for n in ("gate", "up", "down")})
    return m


def to_torch_reference(params, c):
    """Leaf copies of params in torch_reference's layout (tied: its lm_head is a view of embed), and its config."""
    out = {}
    for hf, (name, transpose) in reference_names(c).items():
        if hf in params:
            t = params[hf].detach().clone()
            out[name] = (t.t().contiguous() if transpose else t).requires_grad_(True)
    if c["tie_word_embeddings"]:
        out["lm_head"] = out["embed"].t()
    tc = {"vocab": c["vocab_size"], "hidden": c["hidden_size"], "layers": c["num_hidden_layers"],
          "heads": c["num_attention_heads"], "kv_heads": c["num_key_value_heads"], "ffn": c["intermediate_size"],
          "norm_eps": c["rms_norm_eps"], "rope_theta": c["rope_theta"]}
    return out, tc


def reference_grads(tp, c):
    """The gradients of torch_reference's leaf parameters by HF name, in HF layout."""
    grads = {n: p.grad for n, p in tp.items() if p.is_leaf}
    return {hf: (grads[name].t() if transpose else grads[name])
            for hf, (name, transpose) in reference_names(c).items() if name in grads}


def check_math():
    """HF's RoPE (cat(freqs, freqs), rotate_half) against torch_reference.rope, and the whole forward and backward
    against torch_reference.llama with as many kv heads as query heads (the folders check grouped kv heads)."""
    g = torch.Generator().manual_seed(99)
    q = torch.randn(BATCH, SEQ, 4, 8, generator=g)  # [B, S, H, hd], torch_reference's layout
    cos, sin = rotary(SEQ, 8, 10000.0)
    hf = (q.transpose(1, 2) * cos + rotate_half(q.transpose(1, 2)) * sin).transpose(1, 2)
    print(f"rope: max rel err vs torch_reference.rope {rel_err(hf, tr.rope(q, 10000.0)):.1e}")
    assert rel_err(hf, tr.rope(q, 10000.0)) < 1e-6
    c = hf_config(dict(MODELS["hf_llama_gqa"]["sizes"], num_key_value_heads=4), torch.float32)
    params = tr.random_params(hf_shapes(c), g)
    tokens, targets = token_batch(c["vocab_size"], g)
    logits = hf_llama(params, tokens, c)
    loss = loss_of(logits, targets)
    loss.backward()
    tp, tc = to_torch_reference(params, c)
    t_logits, t_loss = tr.llama(tp, {"tokens": tokens, "targets": targets}, tc)
    t_loss.backward()
    grads = reference_grads(tp, c)
    errs = [rel_err(t_logits, logits), rel_err(t_loss, loss), max(rel_err(grads[n], params[n].grad) for n in params)]
    print("kv heads = heads: max rel err vs torch_reference.llama, logits {:.1e}, loss {:.1e}, grads {:.1e}"
          .format(*errs))
    assert max(errs) < 1e-5


if __name__ == "__main__":
    torch.set_num_threads(1)
    os.makedirs(tr.OUT_DIR, exist_ok=True)
    for name in sys.argv[1:] or MODELS:
        record(name)
        check(name)
    check_math()
