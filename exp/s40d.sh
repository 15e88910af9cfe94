#!/usr/bin/env bash
# Session 40, call 4, on main: where the all-flags cost goes at (16,512), kernel by kernel (Nsight Compute,
# one step, one stream): the default against all three flags (session 39 has only the sums).
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc
el "kernel sums"
ncu_step "" $L512 d512
ncu_step "" $L512 a512 --attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint
for t in d512 a512; do echo "== $t"; python3 exp/ncu_step.py $OUT/ncu_$t.csv; done
el done
