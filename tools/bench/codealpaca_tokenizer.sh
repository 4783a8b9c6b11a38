#!/usr/bin/env bash
# A Llama-style sentencepiece tokenizer for CodeAlpaca, trained on its own text with spm_train
# (Debian's sentencepiece): bpe with byte fallback, up to 32000 pieces (the sample's text gives
# about 30,900). No Llama tokenizer can be downloaded here; this one splits the text about as
# finely (CodeAlpaca's examples: 397 bytes, 94 tokens on average). Writes OUT_DIR/sp.model
# unless it is there already, and prints its path.
#
#   tools/bench/codealpaca_tokenizer.sh [OUT_DIR] [CODEALPACA_JSON]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/build/codealpaca-tokenizer}"
data="$(realpath "${2:-$root/../shared/data/codealpaca/codealpaca.json}")"
mkdir -p "$out" && cd "$out"
if [ ! -f sp.model ]; then
  echo "== tokenizer: spm_train, up to 32000 pieces (bpe, byte fallback) on CodeAlpaca's text" >&2
  # Each example's fields, the empty ones too, joined by "\n", one example after another.
  /usr/bin/python3 -c "
import json, sys
rows = json.load(open(sys.argv[1]))
open('text.txt', 'w').write('\n'.join('\n'.join(r.get(k, '') for k in ('instruction', 'input', 'output')) for r in rows))
" "$data"
  spm_train --input=text.txt --model_prefix=sp --vocab_size=32000 --model_type=bpe \
    --byte_fallback=true --character_coverage=1.0 --hard_vocab_limit=false \
    --bos_id=1 --eos_id=2 --unk_id=0 --minloglevel=2
fi
echo "$out/sp.model"
