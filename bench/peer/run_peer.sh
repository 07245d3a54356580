#!/usr/bin/env bash
# Reproduces the parlab-vs-PyTorch figures: lab-mlp, global batch 1024 (microbatches of 64),
# AdamW, one thread per rank; fp32 and mixed, 1 and 2 workers; parlab and the PyTorch peer
# alternating, REPEATS repeats of (1 warm-up + STEPS measured steps) each. Prints the load average
# beside every run. Needs a built bench_peer (./scripts/build.sh bench_peer) and, for the peer,
# Debian's python3-torch for /usr/bin/python3.
# Runtime: about 10 minutes on an idle 2-core machine at the defaults (3 repeats x 2 steps: 24 runs
# of 3 lab-mlp steps at ~5 s each); REPEATS=2 STEPS=1 took 29 minutes at load 7-11.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${PARLAB_BUILD_DIR:-$root/build}"
repeats="${REPEATS:-3}"
steps="${STEPS:-2}"
echo "run_peer: $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$build/bench/bench_peer" --gbs 1024 --mb 64 --workers 1,2 \
  --precisions fp32,mixed --repeats "$repeats" --steps "$steps" --warmup 1 "$@"
