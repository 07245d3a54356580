#!/usr/bin/env bash
# The GPU check: one prepared run on a machine with an NVIDIA GPU (written for one H200 and 16
# cores; every step has its own time limit and together they stay under 8 minutes).
#   1. configure a FRESH build with the GPU backend required (-DPARLAB_CUDA=ON) for Hopper
#      (-DCMAKE_CUDA_ARCHITECTURES=90);
#   2. build what the checks need: parlab (and its GPU plugin libparlab_cuda.so), test_gpu,
#      test_gpu_train, test_cli_device, test_train_device, bench_gpu; then the plugin's proof:
#      `ldd parlab` names no CUDA library, the plugin links NCCL and cuBLAS, and `parlab --version`
#      and the worker program (parlab-worker) start in tens of ms (11 runs each, median and
#      range, wall and CPU);
#   3. the GPU tests (ctest -L gpu: every kernel against the CPU kernels, DeviceMlp against LabMlp,
#      NCCL on device buffers (uneven reduce-scatter/all-gather too), timeout + ncclCommAbort, the
#      GPU trainer against the CPU trainer, bit-identical GPU resume, device-independent
#      checkpoints, the device AdamW bit for bit against the CPU AdamW and against the host
#      update on the same GPU gradients; TP slices, pipeline stages and interleaved chunks on one
#      GPU against the whole CPU network; DDP, ZeRO-1/2/3, tp=2, pp=2 (GPipe, 1F1B, interleaved) on
#      two GPUs and tp=2,pp=2 and tp=2,dp=2,zero=2 on four against as many CPU ranks, which skip
#      saying how many GPUs they need on a smaller machine); device memory by the split on two GPUs
#      (ZeRO-0..3: parameters, gradients and optimizer state on each GPU's account equal to the
#      ledger, no cudaMalloc and no cudaMemGetInfo growth after the first step) beside the host
#      stand-in's proof (test_train_device); and test_cli_device (no CUDA library in the binary or
#      a CPU run, the plugin loaded by --device cuda, --help lists --device, the plan check),
#      verbose, so every difference is logged;
#   3b. the device-AdamW verdict and, with >= 2 GPUs, `parlab train --nproc 2 --device cuda` for
#      DDP, ZeRO-1/2/3, tp=2 (sp off and on), pp=2 (1F1B) and pp=2 interleaved against the CPU run
#      of the same seed (exported weights, tolerance 1e-4); TP and pipeline boundaries stay in GPU
#      memory and move over NCCL (the 4-GPU splits tp=2,pp=2 and tp=2,dp=2,zero=2 are in the tests);
#      with one GPU it says those need more GPUs (NCCL cannot put two ranks on one GPU);
#   4. equivalence: `parlab train --device cuda` on 1 GPU against `parlab train --device cpu` of
#      the same seed (lab-mlp, 8 AdamW steps at global batch 64), final weights exported and
#      compared tensor by tensor. Tolerance 1e-4 (max |gpu - cpu| / max |cpu| per tensor): both
#      sides are fp32 -- cuBLAS runs in its default math mode, NO TF32 -- so only the summation
#      order differs. (TF32 would round GEMM inputs to 10 mantissa bits: ~1e-3 after one step.)
#   5. kill-and-resume on the GPU: `parlab proof kill-resume --device cuda --nproc 1` (a rank
#      SIGKILLed at random, sometimes mid-checkpoint, restarted from the last good checkpoint):
#      the final parameters and optimizer state must be bit-identical to the uninterrupted run;
#   6. bench_gpu: the cuBLAS sgemm rate of this run, the lab-mlp forward+backward and the whole
#      `--device cuda` training step (AdamW on the device) as MFU against it (goal >= 50%), the
#      same step with AdamW on host copies as a ratio, memcpy rates; then the simulator's
#      prediction of that step on the h200 preset (`parlab simulate`), to set beside it.
# The figures belong in docs/validation.md (GPU section) with the date and commit of the run.
# Time: every step's limit is also cut to what is left of 470 s, so the whole run ends within
# 8 minutes even when a step hangs (a step cut short fails and says so).
# Figures go to $OUT when it is set: summary.txt (every figure), bench_gpu.json/.log,
# ctest_gpu.log (+ JUnit XML), equivalence.txt, kill_resume.json/.log, train_*.log, build.log,
# device.txt.
# Exit status: 0 everything passed; 1 a step failed; 3 no usable GPU (tests skipped).
# Environment: PARLAB_GPU_BUILD_DIR (default build-gpu-check, wiped first), CUDA_ARCH (90),
# PARLAB_TEST_JOBS (8).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${PARLAB_GPU_BUILD_DIR:-$root/build-gpu-check}"
out="${OUT:-}"
arch="${CUDA_ARCH:-90}"
jobs="$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 4)"
test_jobs="${PARLAB_TEST_JOBS:-8}"
logdir="${out:-$build/gpu-check}"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1  # the CPU references: one BLAS thread
export NCCL_DEBUG="${NCCL_DEBUG:-WARN}"            # NCCL's own words in the log when it fails

start=$(date +%s)
budget_end=470
# limit N: N seconds, or what is left of the budget when that is less (at least 1).
limit() { local left=$(( budget_end - ($(date +%s) - start) )); [ "$left" -lt 1 ] && left=1; [ "$1" -lt "$left" ] && echo "$1" || echo "$left"; }
say() { printf '[gpu-check %4ds] %s\n' "$(( $(date +%s) - start ))" "$*" | tee -a "$logdir/summary.txt"; }
fail() { say "FAILED: $*"; failed=1; }
failed=0

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
timeout "$(limit 60)" cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPARLAB_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DPARLAB_BUILD_GUI=OFF \
  > "$logdir/build.log" 2>&1 || { tail -n 30 "$logdir/build.log"; fail "configure (see build.log)"; exit 1; }
grep -m1 "parlab: CUDA" "$logdir/build.log" | tee -a "$logdir/summary.txt"

# 2. Build only what the checks need.
say "build parlab test_gpu test_gpu_train test_cli_device test_train_device bench_gpu with $jobs jobs"
timeout "$(limit 210)" ninja -C "$build" -j "$jobs" parlab test_gpu test_gpu_train test_cli_device test_train_device \
  bench_gpu >> "$logdir/build.log" 2>&1 || { tail -n 40 "$logdir/build.log"; fail "build (see build.log)"; exit 1; }
say "built"
parlab="$build/cli/parlab"
# The backend is a plugin: the binary needs no CUDA library, the plugin needs them all.
if ldd "$parlab" | grep -qE "libnccl|libcublas|libcudart|libcuda\.so"; then
  fail "parlab links a CUDA library: $(ldd "$parlab" | grep -E 'libnccl|libcublas|libcudart|libcuda\.so' | tr -s ' \n' ' ')"
else
  say "parlab links no CUDA library (the GPU backend is $build/cli/libparlab_cuda.so)"
fi
ldd "$build/cli/libparlab_cuda.so" | grep -E "libnccl|libcublas\.|libcudart" | sed 's/^\s*/  plugin links /' | tee -a "$logdir/summary.txt"
# Start-up: 11 runs each of `parlab --version` and of the worker program with nothing to do, wall
# and CPU (user + sys) in ms, median and range (goal: under 50 ms of wall).
if command -v python3 > /dev/null; then
  python3 - "$parlab" <<'PY' | tee -a "$logdir/summary.txt"
import os, resource, statistics, subprocess, sys, time
for argv in ([sys.argv[1], "--version"], [os.path.join(os.path.dirname(sys.argv[1]), "parlab-worker"), "--help"]):
    walls, cpus = [], []
    for _ in range(11):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls.append(1e3 * (time.perf_counter() - t))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(1e3 * (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime))
    print("  %s: wall median %.1f ms (%.1f..%.1f), CPU median %.1f ms (%.1f..%.1f), 11 runs (goal < 50 ms)"
          % (" ".join(os.path.basename(a) for a in argv), statistics.median(walls), min(walls), max(walls),
             statistics.median(cpus), min(cpus), max(cpus)))
PY
fi

# 3. The GPU tests, one process per test (a test that poisons its CUDA context cannot hurt the
#    next), verbose so every printed difference lands in the log; the CLI device tests beside.
say "ctest -L gpu -j $test_jobs, then ctest -R 'DeviceCli|DeviceModelTest'"
timeout "$(limit 75)" ctest --test-dir "$build" -L gpu -j "$test_jobs" --timeout "$(limit 60)" -V \
  --output-junit "$logdir/ctest_gpu.xml" > "$logdir/ctest_gpu.log" 2>&1
tests_rc=$?
timeout "$(limit 45)" ctest --test-dir "$build" -R "DeviceCli|DeviceModelTest" -j "$test_jobs" --timeout "$(limit 40)" -V \
  >> "$logdir/ctest_gpu.log" 2>&1 || tests_rc=1
grep -E "tests passed|tests failed|Total Test time" "$logdir/ctest_gpu.log" | tee -a "$logdir/summary.txt"
grep -E "max diff|max rel diff|bit-identical" "$logdir/ctest_gpu.log" | sed 's/^[0-9]*: //' | sort -u \
  >> "$logdir/summary.txt"
# Device memory by the split: each GPU's account beside the ledger, and cudaMemGetInfo over the steps.
grep -E "GPU zero=[0-9] rank [0-9] " "$logdir/ctest_gpu.log" | sed 's/^[0-9]*: //' >> "$logdir/summary.txt"
grep -E "\*\*\*Failed|SKIPPED" "$logdir/ctest_gpu.log" | sed 's/^[0-9]*: //' | sort -u | head -n 20 >> "$logdir/summary.txt"
if grep -q "no CUDA device" "$logdir/ctest_gpu.log"; then
  say "$(grep -m1 -o 'no CUDA device: .*' "$logdir/ctest_gpu.log")"
fi
[ "$tests_rc" -eq 0 ] || fail "GPU tests (ctest rc $tests_rc; see ctest_gpu.log)"

# 3b. The device AdamW (its verdict from the test log) and the multi-GPU splits.
if grep -qE "CudaOptimizer.DeviceAdamWMatchesTheCpuAdamWBitForBitOnRandomData \.+ *Passed" "$logdir/ctest_gpu.log" &&
   grep -qE "CudaTrain.TheDeviceOptimizerIsBitIdenticalToTheHostOptimizerOnTheSameGpuGradients \.+ *Passed" "$logdir/ctest_gpu.log"; then
  say "device AdamW: bit-identical to the CPU AdamW on random data and to the host update on the same GPU gradients"
else
  say "device AdamW: not confirmed (failed or skipped; see ctest_gpu.log)"
fi
gpus=0
command -v nvidia-smi > /dev/null && gpus=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU")

# No device: nothing below can run; say so (the bench prints the reason) and stop.
if timeout "$(limit 20)" "$build/bench/bench_gpu" --batch 64 --reps 1 --train-steps 1 2>&1 | grep -q "^no CUDA device"; then
  say "no usable GPU on this machine: the GPU tests were skipped (exit 3)"
  exit 3
fi

# 4. One GPU against the CPU, same seed: final weights exported and compared per tensor.
say "equivalence: parlab train --device cuda vs --device cpu (lab-mlp, 8 steps, gbs 64, seed 3)"
train_args=(train --model lab-mlp --plan gbs=64 --steps 8 --seed 3 --fresh)
timeout "$(limit 40)" "$parlab" "${train_args[@]}" --device cuda --run-dir "$build/runs/gpu" \
  --export "$build/runs/gpu.safetensors" > "$logdir/train_gpu.log" 2>&1 || fail "GPU training (see train_gpu.log)"
timeout "$(limit 60)" "$parlab" "${train_args[@]}" --device cpu --run-dir "$build/runs/cpu" \
  --export "$build/runs/cpu.safetensors" > "$logdir/train_cpu.log" 2>&1 || fail "CPU training (see train_cpu.log)"
for side in gpu cpu; do
  grep -E "^step [0-9]+/" "$logdir/train_$side.log" | tail -n 1 | sed "s/^/  $side: /" | tee -a "$logdir/summary.txt"
done
if command -v python3 > /dev/null; then
  cat > "$logdir/compare_safetensors.py" <<'PY'
# max |gpu - cpu| / max |cpu| per tensor of two safetensors files (F32 only, standard library).
import json, struct, sys
def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in head.items():
        if name == "__metadata__": continue
        a, b = t["data_offsets"]
        out[name] = struct.unpack("<%df" % ((b - a) // 4), data[a:b])
    return out
gpu, cpu, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
worst, worst_name = 0.0, ""
assert gpu.keys() == cpu.keys(), "different tensors"
for name in sorted(cpu):
    ref = cpu[name]
    scale = max(abs(x) for x in ref) or 1.0
    d = max(abs(x - y) for x, y in zip(gpu[name], ref)) / scale
    if d > worst: worst, worst_name = d, name
    print("%-28s max|gpu-cpu|/max|cpu| %.3e" % (name, d))
print("worst %s: %.3e (tolerance %.0e, fp32 both sides, no TF32): %s" % (worst_name, worst, tol, "PASS" if worst <= tol else "FAIL"))
sys.exit(0 if worst <= tol else 1)
PY
  python3 "$logdir/compare_safetensors.py" "$build/runs/gpu.safetensors" "$build/runs/cpu.safetensors" 1e-4 \
    > "$logdir/equivalence.txt" 2>&1
  eq_rc=$?
  tail -n 1 "$logdir/equivalence.txt" | sed 's/^/  equivalence: /' | tee -a "$logdir/summary.txt"
  [ "$eq_rc" -eq 0 ] || fail "GPU weights differ from the CPU run beyond the tolerance (see equivalence.txt)"
else
  say "python3 not found: the exported weights are in $build/runs/*.safetensors, not compared"
fi

# 4b. Two GPUs: DDP, ZeRO-1/2/3, tensor parallelism (with and without sequence parallelism) and
# two pipeline stages through the launcher against the CPU run of the same seed.
if [ "$gpus" -ge 2 ] && command -v python3 > /dev/null; then
  for split in "gbs=64" "gbs=64,zero=1" "gbs=64,zero=2" "gbs=64,zero=3" "gbs=64,tp=2" "gbs=64,tp=2,sp=on" \
    "gbs=64,pp=2" "gbs=64,pp=2,v=2,schedule=interleaved"; do
    tag="${split//[=,]/_}"
    say "2 GPUs: parlab train --nproc 2 --device cuda --plan $split vs --device cpu"
    split_args=(train --model lab-mlp --plan "$split" --nproc 2 --steps 4 --seed 3 --fresh)
    timeout "$(limit 40)" "$parlab" "${split_args[@]}" --device cuda --run-dir "$build/runs/gpu2_$tag" \
      --export "$build/runs/gpu2_$tag.safetensors" > "$logdir/train_gpu2_$tag.log" 2>&1 || fail "2-GPU $split (see train_gpu2_$tag.log)"
    timeout "$(limit 60)" "$parlab" "${split_args[@]}" --device cpu --run-dir "$build/runs/cpu2_$tag" \
      --export "$build/runs/cpu2_$tag.safetensors" > "$logdir/train_cpu2_$tag.log" 2>&1 || fail "2-rank CPU $split (see train_cpu2_$tag.log)"
    python3 "$logdir/compare_safetensors.py" "$build/runs/gpu2_$tag.safetensors" "$build/runs/cpu2_$tag.safetensors" 1e-4 \
      > "$logdir/equivalence_2gpu_$tag.txt" 2>&1 || fail "2-GPU $split differs from the CPU run (see equivalence_2gpu_$tag.txt)"
    tail -n 1 "$logdir/equivalence_2gpu_$tag.txt" | sed "s/^/  $split on 2 GPUs: /" | tee -a "$logdir/summary.txt"
    # The run's own memory table (each GPU's measured peak per category beside the ledger).
    case "$split" in *zero=3*|gbs=64) sed -n '/^Per-rank peak memory/,/^Ledger/p' "$logdir/train_gpu2_$tag.log" \
      | sed "s/^/  [$split] /" >> "$logdir/summary.txt" ;; esac
  done
else
  say "multi-GPU split checks (DDP, ZeRO-1/2/3, tp=2, pp=2 on 2 GPUs vs the CPU run) skipped:" \
    "they need >= 2 GPUs, this machine has $gpus"
fi

# 5. Kill and resume on the GPU: bit-identical to the uninterrupted run.
say "kill-and-resume on the GPU (lab-mlp-small, 12 steps, checkpoint every 4, 2 trials)"
timeout "$(limit 90)" "$parlab" proof kill-resume --device cuda --nproc 1 --model "$root/experiments/models/lab-mlp-small.toml" \
  --steps 12 --checkpoint-every 4 --trials 2 --seed 5 --work-dir "$build/runs/proof" --json \
  > "$logdir/kill_resume.json" 2> "$logdir/kill_resume.log"
kr_rc=$?
grep -o '"headline": *"[^"]*"' "$logdir/kill_resume.json" | sed 's/"headline": */  /' | tee -a "$logdir/summary.txt"
[ "$kr_rc" -eq 0 ] || fail "kill-and-resume on the GPU (rc $kr_rc; see kill_resume.json/.log)"

# 6. The bench (never fails on timing; prints its goals).
say "bench_gpu"
timeout "$(limit 75)" "$build/bench/bench_gpu" --json "$logdir/bench_gpu.json" > "$logdir/bench_gpu.log" 2>&1
bench_rc=$?
cat "$logdir/bench_gpu.log"
cat "$logdir/bench_gpu.log" >> "$logdir/summary.txt"
[ "$bench_rc" -eq 0 ] || fail "bench_gpu (rc $bench_rc; see bench_gpu.log)"

# 7. The simulator's prediction of the same lab-mlp step on the h200 preset, beside the bench.
say "parlab simulate: lab-mlp, gbs 64, one GPU of the h200 preset"
timeout "$(limit 30)" "$parlab" simulate --model lab-mlp --cluster h200 --world 1 --plan gbs=64 \
  > "$logdir/simulate_h200.log" 2>&1 || fail "simulate (see simulate_h200.log)"
sed 's/^/  sim: /' "$logdir/simulate_h200.log" | head -n 30 >> "$logdir/summary.txt"

if [ "$failed" -ne 0 ]; then
  say "some checks FAILED (above); figures in $logdir"
  exit 1
fi
say "all GPU checks passed; figures in $logdir"
