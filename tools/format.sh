#!/usr/bin/env bash
# Formats every C++ file of the project as .clang-format says (clang-format 19, as tools/setup.sh
# installs it); with --check, changes nothing and fails naming the files that differ.
#   tools/format.sh            # format in place
#   tools/format.sh --check    # CI: exit 1 when a file is not formatted
set -euo pipefail
cd "$(dirname "$0")/.."
format=clang-format-19
command -v "$format" >/dev/null || { echo "format.sh: $format not found: run tools/setup.sh" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cc' '*.h')
case "${1:-}" in
  --check)
    bad=()
    for f in "${files[@]}"; do
      "$format" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
    done
    if [ ${#bad[@]} -gt 0 ]; then
      printf 'format.sh: not formatted: %s\n' "${bad[@]}" >&2
      echo "format.sh: run tools/format.sh to format them" >&2
      exit 1
    fi
    echo "format.sh: ${#files[@]} files formatted" ;;
  "") "$format" -i "${files[@]}" ;;
  *) echo "usage: tools/format.sh [--check]" >&2; exit 2 ;;
esac
