#!/usr/bin/env bash
# Runs one golden test: the `// RUN:` line of FILE names a disc-opt command (`%s` is FILE; a
# leading `not` expects failure and checks stderr too), and FileCheck matches its output against
# FILE's CHECK lines.
# usage: run_golden.sh DISC_OPT FILECHECK FILE
set -euo pipefail
disc_opt=$1 filecheck=$2 file=$3
run=$(grep -m1 '^// RUN: ' "$file" | sed 's|^// RUN: ||') || { echo "$file has no // RUN: line" >&2; exit 1; }
expect_fail=0
if [[ $run == not\ * ]]; then expect_fail=1; run=${run#not }; fi
[[ $run == disc-opt\ * ]] || { echo "$file: RUN must start with disc-opt" >&2; exit 1; }
args=${run#disc-opt }
args=${args//%s/$file}
set +e
# shellcheck disable=SC2086  # the RUN line is split into words like a shell would
output=$("$disc_opt" $args 2>&1)
status=$?
set -e
if [[ $expect_fail == 1 && $status == 0 ]]; then echo "expected disc-opt to fail" >&2; exit 1; fi
if [[ $expect_fail == 0 && $status != 0 ]]; then echo "$output" >&2; exit 1; fi
printf '%s\n' "$output" | "$filecheck" --dump-input=fail "$file"
