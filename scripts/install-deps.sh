#!/usr/bin/env bash
# Installs the Debian 12 packages parlab builds against. Idempotent: when every package is
# already present it prints one line and touches nothing (no apt-get update, no network).
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config git
  libsimgrid-dev            # the simulator (SimGrid S4U)
  libgloo-dev               # CPU collectives (Gloo, TCP transport)
  qt6-base-dev qt6-charts-dev  # the desktop lab
  libqt6opengl6-dev         # find_package(Qt6 Charts) needs Qt6::OpenGL's CMake files on Debian 12
  libsqlite3-dev            # the results database
  libgtest-dev libgmock-dev # tests
  clang-format              # the format check (scripts/check-format.sh)
  libopenblas-dev           # CPU GEMM (pthread flavour; pinned to one thread per rank)
  libdnnl-dev               # oneDNN: the matmul backend (fp32 and bf16 mixed precision)
  libblis-dev               # BLIS: measured beside them by bench_gemm
  nlohmann-json3-dev libtomlplusplus-dev libcli11-dev
  libfmt-dev libspdlog-dev libxxhash-dev
  xvfb xauth                # headless GUI tests
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
