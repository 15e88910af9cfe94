#!/usr/bin/env bash
# Session 34, call 4: every GPU test on the final code (ctest -L gpu), logs in $OUT.
. "$(dirname "$0")/common.sh"
build_gpu 
ctest_gpu
el done
