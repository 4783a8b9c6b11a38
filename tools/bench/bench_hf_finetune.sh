#!/usr/bin/env bash
# The BladeDISC++ setting on the CPU: fine-tune a Llama with TinyLlama-1.1B's shapes (hidden 2048,
# 22 layers, 32 heads, 4 KV heads, ffn 5632, vocab 32000) on CodeAlpaca with a 32000-piece
# sentencepiece tokenizer, from a Hugging Face folder. No weights can be downloaded here, so the
# folder holds random bf16 weights that `disc-train export` writes; the tokenizer is trained on the
# data with spm_train. For each optimizer state dtype (f32, bf16, int8) and B = 1 and 2 it reports
# the memory plan (`disc-train plan --json`: the lower bound and the smallest cap the planner
# reaches for every batch), then times a few steps without a cap and with that smallest cap, with
# /usr/bin/time -v for the process's peak RSS.
#
#   tools/bench/bench_hf_finetune.sh [BUILD_DIR] [CODEALPACA_JSON] [WORK_DIR]
#   STATES="f32 int8" BATCHES=2 STEPS=3 tools/bench/bench_hf_finetune.sh   # fewer runs
#   STATES=int8 EXTRA=optimizer.clip_norm=0 tools/bench/bench_hf_finetune.sh  # keys for every run
#   STATES="f32 int8" BATCHES=2 EXTRA=optimizer.clip_passes=2 tools/bench/bench_hf_finetune.sh
#
# Needs about 20 GiB of RAM and 3 GiB of disk in WORK_DIR (default /tmp/disc-hf-bench).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(realpath "${1:-$root/build}")"
data="$(realpath "${2:-$root/../shared/data/codealpaca/codealpaca.json}")"
work="${3:-/tmp/disc-hf-bench}"
train="$build/apps/disc-train/disc-train"
steps="${STEPS:-3}"
mkdir -p "$work" && cd "$work"

"$root/tools/bench/codealpaca_tokenizer.sh" . "$data" >/dev/null
shapes="model.vocab=32000 model.hidden=2048 model.layers=22 model.heads=32 model.kv_heads=4 \
model.ffn=5632 model.norm_eps=1e-5 data.synthetic.vocab=32000 data.synthetic.max_len=2048"
if [ ! -f tinyllama/config.json ]; then
  echo "== model: random TinyLlama-shaped llama in Hugging Face layout (bf16)"
  rm -rf tinyllama
  /usr/bin/time -f "   %e s, peak RSS %M KiB" "$train" export --to tinyllama $shapes export.dtype=bf16
  cp sp.model tinyllama/tokenizer.model
fi

cat > finetune.yaml <<EOF
model:
  hf: tinyllama
data:
  source: json
  path: $data
  max_len: 512
  template:
    prompt: "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n"
    response: "{output}"
  train_on: response
schedule:
  lr: 2e-5
  min_lr: 2e-6
  warmup_steps: 1
train:
  steps: $steps
logging:
  progress: lines
  every: 1
jit:
  cache_dir: $work/kernels
EOF

for state in ${STATES:-f32 bf16 int8}; do
for b in ${BATCHES:-1 2}; do
  echo "== optimizer.state_dtype=$state, B=$b ${EXTRA:-}"
  # A cap (any) makes the planner list what it may evict, and so the smallest cap it reaches.
  "$train" plan --config finetune.yaml --json data.batch_size=$b memory.cap=1TiB \
    optimizer.state_dtype=$state ${EXTRA:-} > plan-b$b.json
  /usr/bin/python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
g = lambda k: j[k] / 2**30
print(f'   plan: {j[\"worst_shapes\"]} worst shape(s); parameters and optimizer state {j[\"held_before_step_bytes\"] / 2**30:.2f} GiB; '
      f'lower bound {g(\"every_shape_lower_bound_bytes\"):.2f} GiB, smallest cap {g(\"every_shape_smallest_cap_bytes\"):.2f} GiB '
      f'({j[\"every_shape_smallest_cap_bytes\"] / j[\"every_shape_lower_bound_bytes\"]:.3f}x the bound)')
" plan-b$b.json
  cap=$(/usr/bin/python3 -c "import json; print(json.load(open('plan-b$b.json'))['every_shape_smallest_cap_bytes'])")
  for run in "nocap memory.cap=0" "cap memory.cap=$cap"; do
    set -- $run
    /usr/bin/time -v "$train" run --config finetune.yaml data.batch_size=$b "$2" \
      optimizer.state_dtype=$state ${EXTRA:-} logging.metrics="$work/m-b$b-$1.jsonl" \
      > "run-b$b-$1.log" 2>&1
    /usr/bin/python3 -c "
import json, re, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '\"step\"' in l]
log = open(sys.argv[2]).read()
rss = int(re.search(r'Maximum resident set size \(kbytes\): (\d+)', log).group(1)) / 2**20
later = steps[1:] or steps
secs = sum(s['step_ms'] for s in later) / 1e3
print(f'   {sys.argv[3]:>24}: {len(steps)} steps, {secs / len(later):.1f} s/step after the first '
      f'({sum(s[\"batch\"] * s[\"seq\"] for s in later) / secs:.1f} positions/s, '
      f'{sum(s[\"tokens\"] for s in later) / secs:.1f} response tokens/s), '
      f'live peak {max(s[\"live_peak_bytes\"] for s in steps) / 2**30:.2f} GiB, process RSS {rss:.2f} GiB, '
      f'evictions {sum(s[\"evictions\"] for s in steps)}, losses ' + ' '.join(f'{s[\"loss\"]:.4f}' for s in steps))
" "m-b$b-$1.jsonl" "run-b$b-$1.log" "$2"
  done
done
done

# What the plan holds at B=2 when the embeddings are frozen (no gradient, no AdamW moments),
# without clipping by global norm (each gradient can go as soon as its update is done), and with
# clipping in two passes (the same, for a second forward and backward).
for variant in 'train.freeze=[model.embed_tokens.*]' 'optimizer.clip_norm=0' \
  'optimizer.clip_norm=0 optimizer.state_dtype=int8' 'optimizer.clip_passes=2' \
  'optimizer.clip_passes=2 optimizer.state_dtype=int8'; do
  # shellcheck disable=SC2086  # a variant is one or more key=value words
  "$train" plan --config finetune.yaml --json data.batch_size=2 memory.cap=1TiB $variant > plan-variant.json
  /usr/bin/python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
print(f'== B=2, {sys.argv[2]}: parameters and optimizer state {j[\"held_before_step_bytes\"] / 2**30:.2f} GiB, '
      f'lower bound {j[\"every_shape_lower_bound_bytes\"] / 2**30:.2f} GiB, smallest cap {j[\"every_shape_smallest_cap_bytes\"] / 2**30:.2f} GiB')
" plan-variant.json "$variant"
done
