#!/usr/bin/env bash
# Session 41, call 1: every GPU test on HEAD (Pre-LN gelu_checkpoint's own attention-gradient scratch,
# DSKC_GELU_CKPT_SCRATCH=own, the new default); the two-stream timelines of all three flags with and
# without it at (64,128); a 3-round burst A/B of gelu_checkpoint and all three flags, own vs shared.
. "$(dirname "$0")/common.sh"
build_gpu -j16
ctest_gpu 16 300 290
el timelines
for v in own shared; do timeline_all DSKC_GELU_CKPT_SCRATCH=$v $L128 all_$v; done
el "A/B"
timeout 230 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 \
  --only "fp16 Pre-LN,gelu_checkpoint,all three flags" \
  --env "gelu shared@gelu_checkpoint:DSKC_GELU_CKPT_SCRATCH=shared" \
  --env "all shared@all three flags:DSKC_GELU_CKPT_SCRATCH=shared" 2>&1 | tee $OUT/ab_scratch.txt
el done
