#!/usr/bin/env bash
# Configures (once) and builds parlab into build/ with Ninja. Extra arguments go to ninja.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${PARLAB_BUILD_DIR:-$root/build}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${PARLAB_BUILD_TYPE:-RelWithDebInfo}"
fi
# Two jobs by default: the lab targets small machines, and link steps are memory-hungry.
# The cores, not the OpenMP limit: coreutils' nproc honours OMP_NUM_THREADS, which scripts/test.sh
# sets to 1 for the ranks (it made this build run one job at a time, 773 s instead of ~400 in CI).
cmake --build "$build" -- -j"${PARLAB_JOBS:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)}" "$@"
