#!/usr/bin/env bash
# Shared by demo.sh and test.sh: install missing Debian packages (as root,
# non-interactively), then configure and build the given CMake preset.
set -euo pipefail

DCT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DCT_PACKAGES=(cmake g++ make pkg-config openmpi-bin libopenmpi-dev libhwloc-dev doctest-dev gnuplot-nox
              python3-mpi4py python3-numpy python3-torch python3-pip python3-venv python3-setuptools zlib1g-dev
              libopenblas-dev dataset-fashion-mnist fortunes)

dct_install_packages() {
  local missing=()
  for p in "${DCT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

dct_build() {
  local preset="$1"
  cd "$DCT_ROOT"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$(nproc)"
}

# Open MPI refuses to run as root without these.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
