#!/usr/bin/env bash
# Session 41, call 1, on main (kernels as at 8f981eb): every GPU test on HEAD, then one step's kernels
# (Nsight Compute) at both shapes, default and all three flags, and the two-stream timeline at (64,128).
. "$(dirname "$0")/common.sh"
build_gpu -j16
ctest_gpu 16 320 300
el "kernel sums"
ncu_step "" $L128 d128
ncu_step "" $L128 a128 --attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint
ncu_step "" $L512 d512
for t in d128 a128 d512; do echo "== $t"; python3 exp/ncu_step.py $OUT/ncu_$t.csv; done
el timeline
timeout 60 build-gpu/dskc bench $L128 --warmup 20 --iters 20 --timeline > $OUT/timeline128.txt 2>&1; tail -60 $OUT/timeline128.txt
el done
