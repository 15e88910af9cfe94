#!/usr/bin/env bash
# Session 43, call 1: exp/keep_words_cpasync.patch (the wgmma attention forward's keep words by cp.async,
# two tiles ahead, into a per-thread ring in shared memory, at every sequence length) on the GPU.
# Main's module sources first (v39_sources: build-gpu/v39/main_N.cu = main's register load-ahead at
# max_seq <= 128, base_N.cu = the template before v39), then the patch, the full build, Nsight Compute
# kernel times of one step (base / ahead / new, alternating, 2 rounds), then `ctest -L gpu`.
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc
v39_sources
git apply exp/keep_words_cpasync.patch || exit 1
build_gpu -j16
el "ncu A/B"
v39_ncu_ab 2
ctest_gpu 16 $(( 560 - ($(date +%s) - t0) )) 250
el done
