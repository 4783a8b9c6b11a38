"""bench_all's report: merges the benchmarks' JSON files of a folder into results.json, prints one
table (also written to table.txt) and draws cap_curve.svg. Needs only the standard library.

  from bench_report import render
  render("bench-results", meta)   # meta: run.json's content, or None to read it from the folder
"""
import json
import os

GIB = float(1 << 30)
MIB = float(1 << 20)


def load(folder, name):
    path = os.path.join(folder, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def mib(b):
    return "-" if not b else f"{b / MIB:.0f}"


def size(b):
    return "none" if not b else (f"{b / GIB:.2f} GiB" if b >= GIB else f"{b / MIB:.0f} MiB")


def row(workload, system, **kw):
    r = {"workload": workload, "system": system}
    r.update(kw)
    return r


# ----- the training step: disc against PyTorch -----

def step_rows(step):
    w = step["workload"]
    workload = (f"llama {w['layers']}x{w['hidden']}, vocab {w['vocab']}, B={w['batch']}, "
                f"S {w['min_len']}..{w['max_len']}, {len(w['seqs'])} batches")
    rows = []
    for key, name in (("disc_fused", "disc fused (JIT, attention, head ops)"), ("disc_unfused", "disc unfused (reference kernels)"),
                      ("disc_bf16", "disc fused bf16 (precision bf16)")):
        if key not in step:
            continue
        s = step[key]
        rows.append(row(workload, name, tokens_per_s=s["tokens_per_s"], step_ms_median=s["step_ms_median"],
                        step_ms_p10=s["step_ms_p10"], step_ms_p90=s["step_ms_p90"],
                        tracked_peak_bytes=s.get("tracked_peak_bytes", 0), peak_rss_bytes=s.get("peak_rss_bytes", 0),
                        compiles=f"{s['warmup_compiles']} warm-up / {s['timed_compiles']} timed"))
    variants = []
    t = step.get("torch")
    if t:
        variants += [("unpadded", f"PyTorch {t['version']} eager", t),
                     ("padded", f"PyTorch eager, padded to buckets <= {t['padded_to']}", t)]
        if "checkpointed" in t:
            variants += [("unpadded", "PyTorch eager, checkpointed per layer", t["checkpointed"]),
                         ("padded", f"PyTorch eager, checkpointed, padded to buckets <= {t['padded_to']}",
                          t["checkpointed"])]
        if "autocast" in t:
            variants += [("unpadded", "PyTorch eager, bf16 autocast", t["autocast"])]
    t2 = step.get("torch2")
    if t2:  # a torch.compile that failed holds {"error": why} and no row; bench_step's text says why
        variants += [("unpadded", f"PyTorch {t2['version']} {name}", t2.get(key, {}) if key else t2)
                     for key, name in (("", "eager f32"), ("autocast", "eager bf16 autocast"),
                                       ("compile_f32", "torch.compile f32"), ("compile_bf16", "torch.compile bf16"))]
    for key, name, src in variants:
        if key in src:
            v = src[key]
            spread = {k: v[k] for k in ("step_ms_p10", "step_ms_p90") if k in v}
            rows.append(row(workload, name, tokens_per_s=v["tokens_per_s"], step_ms_median=v["step_ms_median"],
                            peak_rss_bytes=v.get("peak_rss_bytes", 0), compiles="-", **spread))
    base = next((r["tokens_per_s"] for r in rows if r["system"].endswith(" eager")), None)
    for r in rows:
        r["vs_pytorch_eager"] = r["tokens_per_s"] / base if base else None
    return rows


def print_step(rows, out):
    out.append(f"Training step: {rows[0]['workload']} (bench_step)")
    out.append(f"  {'system':<54} {'tokens/s':>9} {'vs eager':>8}  {'step ms (p10..p90)':<22} "
               f"{'tracked MiB':>11} {'RSS MiB':>8}  compiles")
    for r in rows:
        spread = f" ({r['step_ms_p10']:.0f}..{r['step_ms_p90']:.0f})" if "step_ms_p10" in r else ""
        ratio = f"{r['vs_pytorch_eager']:.2f}x" if r.get("vs_pytorch_eager") else "-"
        out.append(f"  {r['system']:<54} {r['tokens_per_s']:>9.0f} {ratio:>8}  "
                   f"{r['step_ms_median']:.1f}{spread:<16} {mib(r.get('tracked_peak_bytes')):>11} "
                   f"{mib(r.get('peak_rss_bytes')):>8}  {r['compiles']}")


# ----- BladeDISC++'s table: the three systems at one cap per batch size -----

def comparison_cap(b):
    """The half-peak cap when static and disc both ran there, else the smallest cap both fit."""
    at = lambda cap, sys: next((r for r in b["runs"] if r["cap_bytes"] == cap and r["system"].startswith(sys)), None)
    half = b["half_cap_bytes"]
    if half and all(at(half, s) and at(half, s)["ran"] for s in ("static", "disc")):
        return half, at
    return b["equal_cap_bytes"] or half, at


def compiles(run):
    if "warmup_compiles" not in run:
        return "-"
    return f"{run['warmup_compiles']} warm-up / {run['timed_compiles']} timed"


def memory_rows(memory):
    w = memory["workload"]
    rows = []
    for b in memory["batches"]:
        workload = f"llama {w['layers']}x{w['hidden']}, vocab {w['vocab']}, CodeAlpaca, B={b['batch']}"
        cap, at = comparison_cap(b)
        # Without a governor a run needs at least its live peak (its uncapped reservation adds the
        # allocator's cache, which a cap would give back).
        dynamic = at(0, "dynamic")
        fits = dynamic["ran"] and dynamic["live_peak_bytes"] <= cap
        entries = [("dynamic, no memory optimisation", dynamic, fits,
                    f"exceeds the cap: its live peak is {size(dynamic.get('live_peak_bytes'))}" if dynamic["ran"] else
                    dynamic.get("refused", ""))]
        for sys, name in (("static", "static (padded to buckets), schedule + remat"),
                          ("disc", "disc (dynamic), schedule + remat")):
            r = at(cap, sys) or {"ran": False, "refused": "not run"}
            entries.append((name, r, r["ran"], "exceeds the cap: " + r.get("refused", "")))
        for name, r, ok, why in entries:
            if ok:
                rows.append(row(workload, name, cap_bytes=cap, tokens_per_s=r["tokens_per_s"],
                                step_ms_median=r["step_ms_median"], step_ms_p10=r["step_ms_p10"],
                                step_ms_p90=r["step_ms_p90"], tracked_peak_bytes=r["reserved_peak_bytes"],
                                peak_rss_bytes=r["peak_rss_bytes"], evictions_per_step=r["evictions_per_step"],
                                recompute_share=r["recompute_share"], compiles=compiles(r)))
            else:
                rows.append(row(workload, name, cap_bytes=cap, exceeds_cap=why))
    return rows


def print_memory(rows, out):
    out.append("BladeDISC++'s table: the same cap for the three systems (bench_memory; tracked = bytes "
               "reserved, RSS = process)")
    out.append(f"  {'workload':<40} {'system':<46} {'cap':>9} {'tokens/s':>9}  {'step ms (p10..p90)':<22} "
               f"{'tracked MiB':>11} {'RSS MiB':>8} {'evict':>6} {'recompute':>9}  compiles")
    for r in rows:
        head = f"  {r['workload']:<40} {r['system']:<46} {size(r['cap_bytes']):>9}"
        if "exceeds_cap" in r:
            out.append(f"{head} {r['exceeds_cap']}")
            continue
        spread = f"{r['step_ms_median']:.0f} ({r['step_ms_p10']:.0f}..{r['step_ms_p90']:.0f})"
        out.append(f"{head} {r['tokens_per_s']:>9.0f}  {spread:<22} {mib(r['tracked_peak_bytes']):>11} "
                   f"{mib(r['peak_rss_bytes']):>8} {r['evictions_per_step']:>6.1f} {100 * r['recompute_share']:>8.1f}%"
                   f"  {r['compiles']}")


# ----- tokens/s against the cap -----

def curve_series(memory):
    """{system: [(bytes, tokens/s)]}: each capped run at its cap, the uncapped run at its reserved peak."""
    c = memory["curve"]
    series = {}
    for p in c["points"]:
        if p["ran"]:
            x = p["cap_bytes"] or p["reserved_peak_bytes"]
            series.setdefault(p["system"], []).append((x, p["tokens_per_s"]))
    batch = next(b for b in memory["batches"] if b["batch"] == c["batch"])
    dynamic = next(r for r in batch["runs"] if r["system"].startswith("dynamic"))
    if dynamic["ran"]:
        series["dynamic, no memory optimisation"] = [(dynamic["reserved_peak_bytes"], dynamic["tokens_per_s"])]
    return {k: sorted(v) for k, v in series.items()}


def print_curve(memory, series, out):
    out.append(f"tokens/s against the memory cap, B={memory['curve']['batch']} (bench_memory; the uncapped run "
               "at the bytes it reserved)")
    for system, points in series.items():
        out.append(f"  {system:<46} " + "  ".join(f"{size(x)}: {t:.0f}" for x, t in points))


def svg_curve(series, title):
    """A line per system: x = memory cap (GiB), y = tokens/s."""
    w, h, left, right, top, bottom = 960, 440, 70, 340, 40, 50
    xs = [x / GIB for pts in series.values() for x, _ in pts]
    ys = [y for pts in series.values() for _, y in pts]
    x0, x1 = 0.0, max(xs) * 1.05
    y1 = max(ys) * 1.1
    px = lambda x: left + (x - x0) / (x1 - x0) * (w - left - right)  # noqa: E731
    py = lambda y: h - bottom - y / y1 * (h - top - bottom)  # noqa: E731
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
             f'font-size="12">', f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{left}" y="20" font-size="14">{title}</text>',
             f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
             f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle">memory cap (GiB)</text>',
             f'<text x="16" y="{(top + h - bottom) / 2}" transform="rotate(-90 16 {(top + h - bottom) / 2})" '
             f'text-anchor="middle">real tokens/s</text>']
    for i in range(6):
        xv, yv = x0 + (x1 - x0) * i / 5, y1 * i / 5
        parts.append(f'<text x="{px(xv):.1f}" y="{h - bottom + 16}" text-anchor="middle">{xv:.2f}</text>')
        parts.append(f'<text x="{left - 6}" y="{py(yv) + 4:.1f}" text-anchor="end">{yv:.0f}</text>')
        parts.append(f'<line x1="{left}" y1="{py(yv):.1f}" x2="{w - right}" y2="{py(yv):.1f}" stroke="#ddd"/>')
    for i, (system, points) in enumerate(series.items()):
        color = colors[i % len(colors)]
        path = " ".join(f"{px(x / GIB):.1f},{py(y):.1f}" for x, y in points)
        if len(points) > 1:
            parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y in points:
            parts.append(f'<circle cx="{px(x / GIB):.1f}" cy="{py(y):.1f}" r="3.5" fill="{color}"/>')
        ly = top + 20 + 20 * i
        parts.append(f'<rect x="{w - right + 15}" y="{ly - 9}" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text x="{w - right + 32}" y="{ly + 1}">{system}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


# ----- kernels and GEMMs -----

def print_kernels(kernels, out):
    out.append(f"Memory-bound kernels against a STREAM triad (bench_kernels; goal >= 70%: "
               f"{'met' if kernels['goal_met'] else 'NOT MET'})")
    for k in kernels["kernels"]:
        out.append(f"  {k['kernel']:<32} triad {k['triad_gbs']:5.1f} GB/s  reference {k['reference_gbs']:5.1f}  "
                   f"fused {k['fused_gbs']:5.1f}  {100 * k['share_of_triad']:4.0f}% of triad")


def print_matmul(matmul, out):
    out.append(f"GEMM against the FMA peak of {matmul['peak_gflops']:.0f} GFLOP/s (bench_matmul, "
               f"{matmul['threads']} threads)")
    for g in matmul["gemms"]:
        out.append(f"  {g['gemm']:<36} {g['gflops']:7.1f} GFLOP/s  {100 * g['share_of_peak']:5.1f}% of peak")


def render(folder, meta):
    meta = meta or load(folder, "run") or {}
    step, memory = load(folder, "step"), load(folder, "memory")
    kernels, matmul = load(folder, "kernels"), load(folder, "matmul")
    out, rows = [], []
    m = meta.get("machine", {})
    if m:
        out.append(f"bench_all ({meta.get('mode')}): {m.get('cpu')}, {m.get('cores')} cores, "
                   f"{m.get('memory_bytes', 0) / GIB:.0f} GiB; {m.get('date')}; git {m.get('git')}; "
                   f"{meta.get('threads')} threads; {meta.get('seconds')} s")
        out.append(f"command: {meta.get('command')}")
        out.append("")
    if step:
        r = step_rows(step)
        print_step(r, out)
        rows += r
        out.append(f"  {step['machine_load']}")
        out.append("")
    if memory:
        r = memory_rows(memory)
        print_memory(r, out)
        rows += r
        series = curve_series(memory)
        out.append("")
        print_curve(memory, series, out)
        for goal in memory["goals"]:
            out.append(f"  goal {goal}")
        out.append(f"  {memory['machine_load']}")
        out.append("")
        with open(os.path.join(folder, "cap_curve.svg"), "w") as f:
            w = memory["workload"]
            f.write(svg_curve(series, f"llama {w['layers']}x{w['hidden']}, CodeAlpaca, B={memory['curve']['batch']}: "
                                      "tokens/s against the memory cap"))
    if kernels:
        print_kernels(kernels, out)
        out.append("")
    if matmul:
        print_matmul(matmul, out)
    text = "\n".join(out) + "\n"
    print(text, end="")
    with open(os.path.join(folder, "table.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(folder, "results.json"), "w") as f:
        json.dump({"run": meta, "rows": rows, "step": step, "memory": memory, "kernels": kernels,
                   "matmul": matmul}, f, indent=2)
