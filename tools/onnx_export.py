#!/usr/bin/env python3
"""Exports tools/torch_reference.py's llama and gpt2 to ONNX, as a user would: the forward pass
(tokens -> logits) through torch.onnx.export with dynamic batch and sequence axes, the weights as
initializers named as disc names them (l0.wq, ...). The weights are tests/reference/<family>
.safetensors' (the ones its logits and gradients were recorded with), so that
tests/formats/onnx_reference_test.cc can compare the imported model against PyTorch.

gpt2 ties its head to the embedding (logits = h @ wte.T): torch's constant folding would replace
wte.T by a transposed copy (a second initializer, untied), so gpt2 is exported without it, and its
graph keeps the shape arithmetic folding would have done (the importer folds it). llama is
exported with the default folding.

Writes tests/reference/<family>.onnx (opset 17) and gpt2_opset14.onnx (gpt2's LayerNorm
decomposed into ReduceMean, Sub, Pow, Sqrt, Div). With --bench FILE, writes bench_step's llama instead (seeded random weights), for
tools/bench/bench_onnx.

Needs Debian's python3-torch and python3-onnx:
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp /usr/bin/python3 tools/onnx_export.py
  ... tools/onnx_export.py --bench out/llama_bench.onnx
"""
import os
import sys

import onnx
import torch

import torch_reference as ref


class Forward(torch.nn.Module):
    """The family's forward with the weights as parameters ('.' in a name becomes '__': a module's
    parameter names cannot hold dots; the export renames them back)."""

    def __init__(self, family, params):
        super().__init__()
        self.forward_fn, _, _, self.config = ref.FAMILIES[family]
        self.names = list(params)
        for name, t in params.items():
            self.register_parameter(name.replace(".", "__"), torch.nn.Parameter(t.clone()))

    def forward(self, tokens):
        p = {n: getattr(self, n.replace(".", "__")) for n in self.names}
        return self.forward_fn(p, {"tokens": tokens, "targets": torch.zeros_like(tokens)}, self.config)[0]


def export(family, opset, path):
    tensors, _ = ref.read_safetensors(os.path.join(ref.OUT_DIR, family + ".safetensors"))
    params = {n[len("param."):]: t for n, t in tensors.items() if n.startswith("param.")}
    save(Forward(family, params), tensors["input.tokens"], params, opset, path,
         do_constant_folding=family != "gpt2")


def save(module, tokens, params, opset, path, do_constant_folding):
    torch.onnx.export(module, (tokens,), path, input_names=["tokens"], output_names=["logits"],
                      dynamic_axes={"tokens": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}},
                      opset_version=opset, do_constant_folding=do_constant_folding)
    model = onnx.load(path)
    renames = {n.replace(".", "__"): n for n in params}
    for t in model.graph.initializer:
        t.name = renames.get(t.name, t.name)
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            node.input[i] = renames.get(name, name)
    onnx.checker.check_model(model)
    onnx.save(model, path)
    print(f"opset {opset}, {len(model.graph.node)} nodes -> {os.path.relpath(path)}")


# tools/bench/bench_step.cc's llama, which tools/bench/bench_onnx.cc trains imported.
BENCH_LLAMA = {"vocab": 1000, "hidden": 256, "layers": 2, "heads": 4, "kv_heads": 4, "ffn": 688,
               "norm_eps": 1e-5, "rope_theta": 10000.0}


def export_bench(path):
    """bench_step's llama with seeded random weights (the bench trains from them)."""
    g = torch.Generator().manual_seed(1)
    params = ref.params_llama(BENCH_LLAMA, g)
    module = Forward("llama", params)
    module.config = BENCH_LLAMA
    tokens = torch.randint(0, BENCH_LLAMA["vocab"], (2, 7), generator=g, dtype=torch.int32)
    save(module, tokens, params, 17, path, do_constant_folding=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    if sys.argv[1:2] == ["--bench"]:
        export_bench(sys.argv[2])
        sys.exit(0)
    for family in sys.argv[1:] or ["llama", "gpt2"]:
        export(family, 17, os.path.join(ref.OUT_DIR, family + ".onnx"))
        if family == "gpt2":  # an older opset: LayerNormalization decomposed
            export(family, 14, os.path.join(ref.OUT_DIR, family + "_opset14.onnx"))
