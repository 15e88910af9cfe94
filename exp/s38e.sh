#!/usr/bin/env bash
# Session 38, last call (device time nearly spent): every GPU test with the fused dQ as the default.
. "$(dirname "$0")/common.sh"
build_gpu -j16
ctest_gpu 16 250 240
el done
