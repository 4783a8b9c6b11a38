#!/usr/bin/env python3
"""Writes a LoRA adapter with Hugging Face PEFT over tests/reference/hf_llama_gqa and records its logits.

  tests/reference/peft_lora_gqa/              adapter_config.json and adapter_model.safetensors as PEFT's
                                              save_pretrained writes them: r 4, lora_alpha 8, on q_proj, v_proj,
                                              gate_proj and down_proj, lora_B drawn at random (PEFT starts it at
                                              zero, which would make the adapter a no-op and the test blind)
  tests/reference/peft_lora_gqa.safetensors   input.tokens (hf_llama_gqa's batch) and the logits of
                                              PeftModel.from_pretrained(base, adapter) on it, in f32

tests/formats/lora_adapter_test.cc loads the base folder and the adapter into disc and compares its logits with
these within 1e-3, and writes the adapter back to check that disc's export is PEFT's layout. The tests need no
Python: run this only to regenerate (it needs torch, transformers and peft from PyPI):
  python3 tools/peft_reference.py

With --check DIR, it loads an adapter folder that disc wrote instead (disc-train export with export.lora: adapter,
over the same base), and prints the largest difference of PEFT's logits from the recorded ones:
  python3 tools/peft_reference.py --check /tmp/adapter
"""
import argparse
import json
import os

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file, save_file
from transformers import LlamaForCausalLM

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference")
BASE = os.path.join(ROOT, "hf_llama_gqa")
ADAPTER = os.path.join(ROOT, "peft_lora_gqa")
RECORD = os.path.join(ROOT, "peft_lora_gqa.safetensors")


def base_model():
    return LlamaForCausalLM.from_pretrained(BASE, torch_dtype=torch.float32).eval()


def logits_of(model, tokens):
    with torch.no_grad():
        return model(input_ids=tokens.long()).logits.float()


def write_adapter():
    torch.manual_seed(0)
    config = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                        target_modules=["q_proj", "v_proj", "gate_proj", "down_proj"])
    model = get_peft_model(base_model(), config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    model.save_pretrained(ADAPTER)
    # The recorded folder names its base as the sibling it sits beside, not this machine's path; the
    # model card PEFT writes is boilerplate.
    path = os.path.join(ADAPTER, "adapter_config.json")
    with open(path) as f:
        adapter_config = json.load(f)
    adapter_config["base_model_name_or_path"] = "hf_llama_gqa"
    with open(path, "w") as f:
        json.dump(adapter_config, f, indent=2, sort_keys=True)
        f.write("\n")
    os.remove(os.path.join(ADAPTER, "README.md"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", metavar="DIR", help="an adapter folder disc wrote, to compare")
    args = parser.parse_args()
    tokens = load_file(os.path.join(ROOT, "hf_llama_gqa.safetensors"))["input.tokens"]
    if args.check:
        recorded = load_file(RECORD)["logits"]
        got = logits_of(PeftModel.from_pretrained(base_model(), args.check).eval(), tokens)
        diff = (got - recorded).abs().max().item()
        print(f"PEFT's logits with {args.check}: max |difference| from the recorded {diff:.3g}")
        raise SystemExit(0 if diff <= 1e-3 else 1)
    write_adapter()
    logits = logits_of(PeftModel.from_pretrained(base_model(), ADAPTER).eval(), tokens)
    plain = logits_of(base_model(), tokens)
    assert (logits - plain).abs().max() > 1e-2, "the adapter changes nothing: the test would be blind"
    save_file({"input.tokens": tokens.contiguous(), "logits": logits.contiguous()}, RECORD)
    print(f"wrote {ADAPTER} and {RECORD}: logits {tuple(logits.shape)}, "
          f"max |adapter - base| {(logits - plain).abs().max().item():.3g}")


if __name__ == "__main__":
    main()
