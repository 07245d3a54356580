#!/usr/bin/env bash
# The first README command: install what is missing, build, and run the lab's main job.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" parlab
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
parlab="${PARLAB_BUILD_DIR:-$root/build}/cli/parlab"
cd "$root"

echo
echo "== 1. The seed's memory ledger: what cannot fit? =="
"$parlab" plan --ledger-gb params=28,grads=28,optimizer=56,activations=18,largest-layer=6 --device-gb 80

echo
echo "== 2. A realistic model: GPT-3 175B on 1024 A100s, global batch 1536 =="
"$parlab" plan --model gpt-175b --cluster dgx-a100 --world 1024 --gbs 1536

echo
echo "== 3. The all-reduce scaling lab =="
"$parlab" scaling
