#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test dskc: compilers and build tools,
# fmt, nlohmann-json, doctest, HDF5, LLVM's FileCheck. The CUDA 13 toolkit (nvcc, NVRTC,
# cuBLAS/cuBLASLt headers and libraries) is expected at /usr/local/cuda (or $CUDA_HOME).
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config libfmt-dev nlohmann-json3-dev doctest-dev libhdf5-dev llvm-14-tools python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" > /dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get > /dev/null; then
    echo "setup: missing packages ${missing[*]} and no apt-get here; install them by hand" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda/include/nvrtc.h" ]; then
  echo "setup: the CUDA toolkit was not found at $cuda (need NVRTC and cuBLAS; set CUDA_HOME)" >&2
  exit 1
fi
echo "setup: ok (CUDA toolkit at $cuda)"
