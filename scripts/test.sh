#!/usr/bin/env bash
# The second README command: install what is missing, build everything, run every test.
# GPU tests (label "gpu", built when CUDA is found) run first and skip, saying why, on a machine
# without a device; the rest follow, so the output ends with ctest's summary line.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
# The house's guardrails first: they take seconds and name what to fix (CONTRIBUTING.md).
"$root/scripts/check-format.sh"
python3 "$root/scripts/check-function-length.py"
"$root/scripts/build.sh"
cd "${PARLAB_BUILD_DIR:-$root/build}"
# BLAS must not spawn hidden threads: one thread per rank keeps runs deterministic and honest.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
jobs="${PARLAB_TEST_JOBS:-2}"
# The unit tests that need no processes or timing, under AddressSanitizer + UndefinedBehavior-
# Sanitizer (their own build, build-asan/; PARLAB_SANITIZE=0 skips them on a developer's machine).
if [ "${PARLAB_SANITIZE:-1}" != 0 ]; then "$root/scripts/sanitize.sh"; fi
if ctest -N -L gpu | grep -q "Total Tests: [1-9]"; then
  echo "== GPU tests =="
  gpu_log="$(mktemp)"
  ctest -L gpu --output-on-failure --no-label-summary --timeout 600 -j"$jobs" -V > "$gpu_log" 2>&1 || { cat "$gpu_log"; exit 1; }
  grep -E "tests passed" "$gpu_log" || true
  skipped="$(grep -c '(Skipped)' "$gpu_log" || true)"
  if [ "${skipped:-0}" -gt 0 ]; then
    echo "$skipped GPU tests skipped: $(grep -m1 -o 'no CUDA device[^"]*' "$gpu_log" || echo 'see ctest -L gpu -V')"
  fi
  rm -f "$gpu_log"
  echo "== All other tests =="
fi
ctest -LE gpu --output-on-failure --no-label-summary --timeout 600 -j"$jobs" "$@"
