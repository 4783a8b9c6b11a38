#!/usr/bin/env bash
# Runs a fuzzer for a bounded time from a corpus seeded with the files named PATTERN under the seed
# folders; flags after `--` go to libFuzzer (e.g. -dict=..., -max_len=...).
# usage: run_fuzz.sh FUZZER SECONDS WORK_DIR PATTERN SEED_DIR... [-- FLAGS...]
set -euo pipefail
fuzzer=$1 seconds=$2 work=$3 pattern=$4
shift 4
seeds=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do seeds+=("$1"); shift; done
[ $# -gt 0 ] && shift
corpus=$work/corpus
mkdir -p "$corpus"
for dir in "${seeds[@]}"; do find "$dir" -type f -name "$pattern" -exec cp {} "$corpus"/ \; ; done
set +e
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "$@" "$corpus" > "$work/fuzz.log" 2>&1
status=$?
set -e
# The progress lines are noise; show the verdict, the stats and any report.
grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==|SUMMARY|INFO: Running|.*ERROR)' \
  "$work/fuzz.log" || true
if [ "$status" -ne 0 ]; then
  tail -40 "$work/fuzz.log"
  echo "fuzzer failed (exit $status); reproduce with: $fuzzer $work/crash-*"
fi
exit "$status"
