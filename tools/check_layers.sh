#!/usr/bin/env bash
# Checks that each folder includes only the folders below it, as docs/architecture.md draws them:
# a quoted include "FOLDER/..." of one of ours that the folder's line below does not allow is an
# error (file:line and the rule). Run by ctest (Layers.NoFolderIncludesOneAboveIt). tools/ and
# tests/ may include anything.
#   tools/check_layers.sh [REPO]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

# Each folder (or sub-folder, whose stricter line applies too) and the paths it may include.
declare -A allowed=(
  [base]="base"
  [ir]="base ir"
  [devices]="base devices"
  [jit]="base ir devices jit"
  [memory]="base ir devices memory"
  [engine]="base ir devices jit memory engine"
  [formats]="base ir engine formats"
  [apps]="base ir engine formats apps"
  [apps/data]="base apps/data"
)
# apps/disc-train starts main with the OpenMP spin fix, before anything else runs.
exceptions="apps/disc-train/main.cc:devices/cpu/openmp_spin.h"
ours="base|ir|devices|jit|memory|engine|formats|apps|tools|tests"

bad=0
for folder in "${!allowed[@]}"; do
  if [[ ! -d $folder ]]; then
    echo "$folder/: no such folder: update tools/check_layers.sh with the layout"
    bad=1
    continue
  fi
  while IFS=: read -r file line text; do
    target=$(sed -E 's/.*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$text")
    ok=0
    for prefix in ${allowed[$folder]}; do [[ $target == "$prefix"/* ]] && ok=1; done
    [[ " $exceptions " == *" $file:$target "* ]] && ok=1
    [[ $ok == 1 ]] && continue
    echo "$file:$line: $folder/ includes $target, but $folder/ may include only: ${allowed[$folder]}"
    bad=1
  done < <(grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"($ours)/" "$folder" \
             --include='*.h' --include='*.cc' --include='*.cu' || true)
done
[[ $bad == 0 ]] && echo "layers: every folder includes only the folders below it"
exit $bad
