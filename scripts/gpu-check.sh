#!/usr/bin/env bash
# The GPU check: one prepared run on a machine with an NVIDIA GPU (written for one H200 and 16
# cores; it must finish well inside 10 minutes).
#   1. configure a FRESH build with the GPU backend required (-DPARLAB_CUDA=ON) for sm_90;
#   2. build only what the GPU tests and the bench need (test_gpu, bench_gpu);
#   3. run the GPU tests (ctest -L gpu: every kernel against the CPU kernels, the whole lab-mlp
#      against the CPU LabMlp, bit-identical reruns, NCCL on device buffers, the timeout+abort
#      path), verbose, so the log holds every printed max-difference;
#   4. run bench_gpu (lab-mlp step at microbatch 64 and 1024 vs fp32 peak, sgemm alone, memcpy).
# Figures go to $OUT when it is set: bench_gpu.json, bench_gpu.log, ctest_gpu.log (+ JUnit XML),
# build.log, device.txt and summary.txt. Each step has its own time limit, so a hang in one still
# leaves the logs of the others.
# Exit status: 0 all GPU tests passed; 1 a step failed; 3 no usable GPU (tests skipped).
# Environment: PARLAB_GPU_BUILD_DIR (default build-gpu-check, wiped first), CUDA_ARCH (90),
# PARLAB_TEST_JOBS (8).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${PARLAB_GPU_BUILD_DIR:-$root/build-gpu-check}"
out="${OUT:-}"
arch="${CUDA_ARCH:-90}"
jobs="$(nproc 2>/dev/null || echo 4)"
test_jobs="${PARLAB_TEST_JOBS:-8}"
logdir="${out:-$build/gpu-check}"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1  # the CPU references: one BLAS thread
export NCCL_DEBUG="${NCCL_DEBUG:-WARN}"            # NCCL's own words in the log when it fails

start=$(date +%s)
say() { printf '[gpu-check %4ds] %s\n' "$(( $(date +%s) - start ))" "$*" | tee -a "$logdir/summary.txt"; }
fail() { say "FAILED: $*"; exit 1; }

rm -rf "$build"
mkdir -p "$build" "$logdir"
: > "$logdir/summary.txt"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "host cores: $jobs"
  command -v nvidia-smi > /dev/null && nvidia-smi || echo "nvidia-smi: not found"
  command -v nvcc > /dev/null && nvcc --version || /usr/local/cuda/bin/nvcc --version 2>&1 || true
} > "$logdir/device.txt" 2>&1
say "device: $(command -v nvidia-smi > /dev/null && nvidia-smi -L 2>&1 | head -n 4 | tr '\n' ' ' || echo 'nvidia-smi not found')"

# 1. Configure: GPU backend required, the Qt lab left out (not needed here).
say "configure $build (CUDA arch $arch)"
timeout 120 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPARLAB_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DPARLAB_BUILD_GUI=OFF \
  > "$logdir/build.log" 2>&1 || { tail -n 30 "$logdir/build.log"; fail "configure (see build.log)"; }
grep -m1 "parlab: CUDA" "$logdir/build.log" | tee -a "$logdir/summary.txt"

# 2. Build only the GPU tests and the bench.
say "build test_gpu bench_gpu with $jobs jobs"
timeout 300 ninja -C "$build" -j "$jobs" test_gpu bench_gpu >> "$logdir/build.log" 2>&1 ||
  { tail -n 40 "$logdir/build.log"; fail "build (see build.log)"; }
say "built"

# 3. The GPU tests, one process per test (a test that poisons its CUDA context cannot hurt the
#    next), verbose so every printed difference lands in the log.
say "ctest -L gpu -j $test_jobs"
timeout 150 ctest --test-dir "$build" -L gpu -j "$test_jobs" --timeout 90 -V \
  --output-junit "$logdir/ctest_gpu.xml" > "$logdir/ctest_gpu.log" 2>&1
tests_rc=$?
grep -E "tests passed|tests failed|Total Test time" "$logdir/ctest_gpu.log" | tee -a "$logdir/summary.txt"
grep -E "max rel diff|bit-identical" "$logdir/ctest_gpu.log" | sed 's/^[0-9]*: //' | sort -u \
  >> "$logdir/summary.txt"
if grep -q "no CUDA device" "$logdir/ctest_gpu.log"; then
  say "$(grep -m1 -o 'no CUDA device: .*' "$logdir/ctest_gpu.log")"
fi

# 4. The bench (never fails on timing; prints its goals).
say "bench_gpu"
timeout 90 "$build/bench/bench_gpu" --json "$logdir/bench_gpu.json" > "$logdir/bench_gpu.log" 2>&1
bench_rc=$?
cat "$logdir/bench_gpu.log"
cat "$logdir/bench_gpu.log" >> "$logdir/summary.txt"

if grep -q "^no CUDA device" "$logdir/bench_gpu.log"; then
  say "no usable GPU on this machine: the GPU tests were skipped (exit 3)"
  exit 3
fi
[ "$tests_rc" -eq 0 ] || fail "GPU tests (ctest rc $tests_rc; see ctest_gpu.log)"
[ "$bench_rc" -eq 0 ] || fail "bench_gpu (rc $bench_rc; see bench_gpu.log)"
say "all GPU tests passed; figures in $logdir"
