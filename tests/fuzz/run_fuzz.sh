#!/usr/bin/env bash
# Runs a fuzzer for a bounded time from a corpus seeded with the graph files under TESTS_DIR.
# usage: run_fuzz.sh FUZZER SECONDS TESTS_DIR CORPUS_DIR
set -euo pipefail
fuzzer=$1 seconds=$2 tests=$3 corpus=$4
mkdir -p "$corpus"
find "$tests" -name '*.disc' -exec cp {} "$corpus"/ \;
here=$(dirname "$0")
set +e
"$fuzzer" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -dict="$here/disc.dict" -print_final_stats=1 -artifact_prefix="$corpus/../" "$corpus" \
  > "$corpus/../fuzz.log" 2>&1
status=$?
set -e
# The progress lines are noise; show the verdict, the stats and any report.
grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==|SUMMARY|INFO: Running|.*ERROR)' \
  "$corpus/../fuzz.log" || true
if [ "$status" -ne 0 ]; then
  tail -40 "$corpus/../fuzz.log"
  echo "fuzzer failed (exit $status); reproduce with: $fuzzer $corpus/../crash-*"
fi
exit "$status"
