#!/usr/bin/env bash
# Session 68, call 3 (`bash exp/pack.sh 250 exp/s68c.sh`): the guide's seq-512 Lamb phase (as
# exp/s66d.sh: BERT-Large, micro-batch 16, fp16, accumulation 1) on the landed fp32 Lamb.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
lamb512_phase s67
el done
