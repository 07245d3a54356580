#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of the unit tests that need no real
# processes and assert no timing: the strategy layer, the simulator, the results database, the
# communicator with threads as ranks (Gloo over an in-process store, and the shared-memory
# backend) and the layer rules. Built in build-asan/ (PARLAB_ASAN_BUILD_DIR) without the GUI and
# the GPU backend, at -O0 without debug info to stay inside CI's budget; every finding fails the
# run (-fno-sanitize-recover). scripts/test.sh runs it before the suite.
#
# CI's budget (30 minutes on 2 cores, build included): this build cost 830 s of CI's 2653 s at
# -O1 with the rubric. -O0 compiles each unit ~37% faster (sim/result.cpp: 31 s -> 19 s) and the
# six suites still run in about a minute. The rubric's tests are left out: its library links
# the launcher (verify.cpp runs the kill-and-resume proof), which pulled the trainer, checkpoints
# and the hang analysis into this build, about half of its compile time, for 8 ms of tests.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${PARLAB_ASAN_BUILD_DIR:-$root/build-asan}"
flags="-O0 -g0 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
if [ ! -f "$build/build.ninja" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # -Werror stays with the main build: GCC 12 at -O1 with the sanitizers' instrumentation warns
  # falsely inside libstdc++ (maybe-uninitialized in <regex>).
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DPARLAB_CUDA=OFF -DPARLAB_BUILD_GUI=OFF \
    -DPARLAB_WERROR=OFF \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" "${launcher[@]}" >/dev/null
fi
# name: test binary (relative to the build) and the gtest filter that leaves out real processes.
suites=(
  "tests/strategy/test_strategy:*"
  "tests/sim/test_sim:*"
  "tests/db/test_db:-*Concurren*:*Process*"
  "tests/runtime/comm/test_comm:-*MultiProcess*:*Multiprocess*:*TcpStore*:*Timeout*:*Desync*"
  "tests/runtime/comm/test_comm_shm:-*MultiProcess*:*Multiprocess*:*Timeout*:*Desync*:*Process*"
  "tests/layers/test_layers:*"
)
targets=()
for s in "${suites[@]}"; do targets+=("$(basename "${s%%:*}")"); done
echo "== sanitizers (ASan + UBSan): building ${targets[*]} =="
# The cores, not the OpenMP limit: coreutils' nproc honours OMP_NUM_THREADS, which scripts/test.sh
# sets to 1 for the ranks (it made this build run one job at a time, 773 s instead of ~400 in CI).
cmake --build "$build" -- -j"${PARLAB_JOBS:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)}" "${targets[@]}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
failed=0
for s in "${suites[@]}"; do
  bin="$build/${s%%:*}"
  filter="${s#*:}"
  if ! (cd "$(dirname "$bin")" && "$bin" --gtest_filter="$filter" --gtest_brief=1 > "$bin.log" 2>&1); then
    echo "FAILED under sanitizers: $(basename "$bin") (filter $filter)"; tail -40 "$bin.log"; failed=1
  else
    echo "passed under sanitizers: $(basename "$bin") ($(grep -m1 -oE '[0-9]+ tests? from [0-9]+ test suites? ran' "$bin.log" || echo '?'))"
  fi
done
exit "$failed"
