#!/usr/bin/env bash
# Session 69, for the device time left (~290 s): only on an H200, which memory flag costs the
# all-flags layer its +12% at (16,512) there (bench/NOTES.md t10): the graph-replayed layer matrix,
# the default and each flag alone and together, 2 rounds. On any other card it stops after the
# card's name. `bash exp/pack.sh 200 exp/s69d.sh`
. "$(dirname "$0")/common.sh"
gpu_head
grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: nothing run"; exit 0; }
build_gpu -j16 dskc
el "layer matrix --graph, (16,512), 2 rounds"
timeout $(( 195 - $(date +%s) + t0 )) python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 2 --graph \
  --shapes 16x512 --no-control \
  --only "fp16 Pre-LN,attn_dropout_checkpoint,normalize_invertible,gelu_checkpoint,all three flags" \
  2>&1 | tee "$OUT/matrix_graph.txt" | tail -10
el done
