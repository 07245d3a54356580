#!/usr/bin/env bash
# Checks every tracked C++ source (.h .cpp .cu .cuh) against the committed .clang-format; fails
# listing the files that differ. `--fix` rewrites them instead. Needs clang-format (Debian's,
# version 14; scripts/install-deps.sh installs it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
fmt="${CLANG_FORMAT:-clang-format}"
command -v "$fmt" >/dev/null || { echo "check-format: $fmt not found (apt-get install clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files -- '*.h' '*.cpp' '*.cu' '*.cuh')
if [ "${1:-}" = "--fix" ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 50 "$fmt" -i --style=file
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  if ! "$fmt" --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [ "${#bad[@]}" -gt 0 ]; then
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ from .clang-format (scripts/check-format.sh --fix):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files match .clang-format"
