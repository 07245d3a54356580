#!/usr/bin/env bash
# The second README command: install what is missing, build everything, run every test.
# Output ends with ctest's summary line.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
cd "${PARLAB_BUILD_DIR:-$root/build}"
# BLAS must not spawn hidden threads: one thread per rank keeps runs deterministic and honest.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ctest --output-on-failure --no-label-summary --timeout 600 -j"${PARLAB_TEST_JOBS:-2}" "$@"
