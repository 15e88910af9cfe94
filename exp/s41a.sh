#!/usr/bin/env bash
# Session 41, call 1: every GPU test on HEAD (Pre-LN gelu_checkpoint's own attention-gradient scratch,
# DSKC_GELU_CKPT_SCRATCH=own, the new default); the two-stream timelines of all three flags with and
# without it at (64,128); a 3-round burst A/B of gelu_checkpoint and all three flags, own vs shared.
. "$(dirname "$0")/common.sh"
build_gpu -j16
ctest_gpu 16 300 290
FL="--attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint"
el timelines
for v in own shared; do
  DSKC_GELU_CKPT_SCRATCH=$v timeout 60 build-gpu/dskc bench $L128 $FL --warmup 20 --iters 20 --timeline \
    > $OUT/timeline_all_$v.txt 2>&1
  echo "== $v"; grep -iE "busy|wall|waits|idle" $OUT/timeline_all_$v.txt | head -8
done
el "A/B"
timeout 230 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 \
  --only "fp16 Pre-LN,gelu_checkpoint,all three flags" \
  --env "gelu shared@gelu_checkpoint:DSKC_GELU_CKPT_SCRATCH=shared" \
  --env "all shared@all three flags:DSKC_GELU_CKPT_SCRATCH=shared" 2>&1 | tee $OUT/ab_scratch.txt
el done
