#!/usr/bin/env bash
# Session 64, fourth call (`bash exp/pack.sh 590 exp/s64d.sh`): the landed form of the MLM heads
# (decoder GEMMs over the padded vocabulary, two-pass 16-byte cross-entropy, row-wise head gradient
# scatter). Nsight Compute over a one-layer BERT-Large's 3 training steps (the heads' kernels printed);
# the BERT-Large seq 128 mb 64 fp16 acc 1 profile, this build then the previous commit's dskc (built
# from `git archive 03d8096`); then `ctest -L gpu` in the time left.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16
old_dskc 03d8096
run_dir s64
large_train_data "$D"
ncu_train1 padded
sed -n '/(8192, 1, 1)  model_layernorm_fwd/,/model_layernorm_bwd/p' "$OUT/ncu_step_padded.txt" |
  grep -E "xent|nvjet_sm90_hsh_1|cutlass|scatter|accumulate \(|splitK" | head -8 | cut -c1-100
tail -1 "$OUT/ncu_step_padded.txt"
large_train new1; DSKC_BIN=/tmp/old/build-gpu/dskc large_train old1
for t in new1 old1; do echo "== $t"; profile_lines $t "heads|encoder|whole"; done
rm -rf "$D"
ctest_gpu 8 $(( 575 - $(date +%s) + t0 ))
el done
