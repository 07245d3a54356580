#!/usr/bin/env bash
# Predict, then measure, on this machine from scratch: one fresh `parlab calibrate` into a
# scratch results directory, then the quickstart's scaling experiment and any further scaling
# experiments given as arguments (workloads calibration never ran), each followed by its
# simulated-vs-measured table. The machine's load is printed beside every stage: figures taken
# with a load average well above 1 (on 2 cores) are not the machine's.
#
#   scripts/fidelity-check.sh                      # calibrate + scaling_1_2_4
#   scripts/fidelity-check.sh my-workload.toml     # ... and a held-out scaling experiment
#   FIDELITY_SKIP_QUICKSTART=1 scripts/fidelity-check.sh a.toml b.toml
#
# PARLAB_BUILD_DIR picks the build (default build/); FIDELITY_DIR the scratch directory.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
parlab="${PARLAB_BUILD_DIR:-$root/build}/cli/parlab"
dir="${FIDELITY_DIR:-$(mktemp -d -t parlab-fidelity.XXXXXX)}"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PARLAB_RESULTS="$dir"
db="$dir/parlab.db"
mkdir -p "$dir"
cd "$root"
load() { echo "-- $(date -u +%H:%M:%S) load average: $(cut -d' ' -f1-3 /proc/loadavg)"; }

# The experiment name a scaling TOML declares (its first name = line).
name_of() { sed -n 's/^name *= *"\(.*\)".*/\1/p' "$1" | head -1; }

load
"$parlab" calibrate --db "$db"
load
# A trusted calibration is cached: a second --if-needed must find it and not measure again.
if grep -q '"trusted": true' "$dir/clusters/cpu-local.calibration.json"; then
  "$parlab" calibrate --if-needed --db "$db"
else
  echo "-- the calibration was FLAGGED (warnings above): the figures below are not the machine's"
fi
experiments=()
[ -z "${FIDELITY_SKIP_QUICKSTART:-}" ] && experiments+=(scaling_1_2_4)
experiments+=("$@")
for e in "${experiments[@]}"; do
  load
  "$parlab" experiment run "$e" --db "$db" 2>&1 | grep -v "step [0-9]*/"
  name="$e"
  [ -f "$e" ] && name="$(name_of "$e")"
  "$parlab" compare --experiment "$name" --db "$db"
done
# ---- every split on 2, 3 and 4 workers: docs/validation.md's CPU table ----
# DDP, ZeRO-1/2/3, tensor parallelism, 1F1B and interleaved pipelines (and tp x pp on 4) of a model the presets
# do not hold, each simulated and measured; `parlab validate --db` turns their rows into the
# CPU table (split x workers: predicted, measured +- spread, error, machine). Skip with
# FIDELITY_SKIP_SPLITS=1 (they train 22 plans: tens of minutes on 2 cores).
if [ -z "${FIDELITY_SKIP_SPLITS:-}" ]; then
  for e in fidelity_splits_2w fidelity_splits_3w fidelity_splits_4w; do
    load
    "$parlab" experiment run "$e" --db "$db" 2>&1 | grep -v "step [0-9]*/"
    "$parlab" compare --experiment "$e" --db "$db"
  done
  "$parlab" validate --db "$db" > "$dir/validation.md"
  sed -n '/<!-- cpu-validation: begin -->/,$p' "$dir/validation.md"
  echo "-- docs/validation.md with this machine's CPU table: $dir/validation.md (copy it over docs/validation.md to publish it)"
fi
# ---- end: every split ----

# The simulator's and the planner's own speed at datacenter scale, beside their targets
# (bench/sim_bench.cpp, section 4; docs/validation.md keeps the last recorded run). Minutes of
# CPU and a few GB: FIDELITY_SKIP_SIM_BENCH=1 leaves it out.
if [ -z "${FIDELITY_SKIP_SIM_BENCH:-}" ]; then
  load
  "$root/scripts/build.sh" bench_sim >/dev/null  # the benches are not in the default build
  "${PARLAB_BUILD_DIR:-$root/build}/bench/bench_sim" --table
fi

load
echo "Results in $db (PARLAB_RESULTS=$dir)."
