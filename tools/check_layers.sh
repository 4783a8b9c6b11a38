#!/usr/bin/env bash
# Checks that each folder includes only the folders below it, as docs/architecture.md draws them:
# a quoted include "FOLDER/..." of one of ours that the folder's line below does not allow is an
# error (file:line and the rule). Run by ctest (Layers.NoFolderIncludesOneAboveIt).
#   tools/check_layers.sh [REPO]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

declare -A allowed=(
  [base]="base"
  [ir]="base ir"
  [devices]="base devices"
  [jit]="base ir devices jit"
  [memory]="base ir devices memory"
  [engine]="base ir devices jit memory engine"
  [formats]="base ir engine formats"
  [apps]="base ir engine formats apps"
)
# apps/disc-train starts main with the OpenMP spin fix, before anything else runs.
exceptions="apps:devices/cpu/openmp_spin.h"
ours="base|ir|devices|jit|memory|engine|formats|apps"

bad=0
for folder in "${!allowed[@]}"; do
  while IFS=: read -r file line text; do
    target=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$text")
    top=${target%%/*}
    [[ " ${allowed[$folder]} " == *" $top "* ]] && continue
    [[ " $exceptions " == *" $folder:$target "* ]] && continue
    echo "$file:$line: $folder/ includes $target, but $folder/ may include only: ${allowed[$folder]}"
    bad=1
  done < <(grep -rnE "^#include \"($ours)/" "$folder" --include='*.h' --include='*.cc' || true)
done
[[ $bad == 0 ]] && echo "layers: every folder includes only the folders below it"
exit $bad
