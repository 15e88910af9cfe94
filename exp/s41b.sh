#!/usr/bin/env bash
# Session 41, call 2: the A/B s41a meant to run (its --only left the --env variants out): gelu_checkpoint
# and all three flags with their own attention-gradient scratch (default) vs DSKC_GELU_CKPT_SCRATCH=shared,
# 5 interleaved burst rounds; timelines of all three flags at (16,512).
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc
for v in own shared; do timeline_all DSKC_GELU_CKPT_SCRATCH=$v $L512 512_all_$v; done
el "A/B"
timeout 420 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 5 \
  --only "fp16 Pre-LN,gelu_checkpoint,gelu shared,all three flags,all shared" \
  --env "gelu shared@gelu_checkpoint:DSKC_GELU_CKPT_SCRATCH=shared" \
  --env "all shared@all three flags:DSKC_GELU_CKPT_SCRATCH=shared" 2>&1 | tee $OUT/ab_scratch.txt
el done
