#!/usr/bin/env bash
# The first README command: install what is missing, build, and run the lab's main job —
# calibrate this machine (once), then the quickstart experiments, then the simulated-vs-measured
# table. Results land in results/parlab.db (override with PARLAB_DB).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" parlab
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
parlab="${PARLAB_BUILD_DIR:-$root/build}/cli/parlab"
db="${PARLAB_DB:-results/parlab.db}"
cd "$root"
# parlab refuses a --db in a directory that does not exist (a typo must not create one).
mkdir -p "$(dirname "$db")"

echo
echo "== Calibrating this machine (cached after the first time) =="
"$parlab" calibrate --if-needed --db "$db"

echo
echo "== The quickstart experiments =="
"$parlab" experiment run seed_budget allreduce_lab scaling_1_2_4 equivalence kill_resume hang_fallback elastic_resume \
  --db "$db"

echo
echo "== Simulated vs measured =="
"$parlab" compare --experiment scaling_1_2_4 --db "$db"
echo
echo "Everything above is in $db: 'build/cli/parlab experiment list --db $db' lists it,"
echo "and 'build/cli/parlab grade --db $db' grades it against rubric/parallelism.toml."
