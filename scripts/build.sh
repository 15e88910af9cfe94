#!/usr/bin/env bash
# Configures and builds dskc into ./build (Release with debug info, Ninja).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUDAToolkit_ROOT=${CUDA_HOME:-/usr/local/cuda} > build-configure.log 2>&1 \
  || { cat build-configure.log; exit 1; }
cmake --build build -j "$(nproc)"
