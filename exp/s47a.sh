#!/usr/bin/env bash
# Session 47, call 1: v45, the fused dQ around a ring of cluster blocks above 128 keys
# (DSKC_ATTN_DQ=ring; templates/attn_flash_bwd_wgmma.cuh kRing) against the default (dSᵀ stores + the
# dQ GEMM at (16,512)). (1) the new GPU test case (flash shard 12: vs mma.sync, unfused, CPU reference,
# tma vs rows bitwise) and compute-sanitizer memcheck / racecheck on three of its cases; (2) Nsight
# Compute step lists fused / ring / ring with 4-byte stores at (16,512), 3 rounds (the attention
# backward's kernels and the sum); (3) burst layer A/B, 3 rounds. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
el "flash shard 12 (ring)"
flash_shard 12 ring 240
el "sanitizers"
for cs in "d64-m512-s100 memcheck" "d64-s509 memcheck" "d64-m192-s129-nodrop racecheck" "d64-m512-s100 racecheck"; do FLASH_TC="fused dQ around a ring*" flash_sanitize $cs 120; done
el "ncu: fused vs ring at (16,512)"
K="attn_flash_bwd_dot attn_flash_bwd_dkdv nvjet_sm90_hsh_64x256_64x5_1x2_h_bz_ptrBatch_NTN"
for r in 1 2 3; do
  env_ab 512 fused "" $r $K
  env_ab 512 ring "DSKC_ATTN_DQ=ring" $r $K
  env_ab 512 ringrows "DSKC_ATTN_DQ=ring DSKC_ATTN_STORE=rows" $r $K
done | tee $OUT/ncu_ab.txt
el "burst A/B, 3 rounds"
timeout 170 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 --only "fp16 Pre-LN,ring" \
  --env "ring:DSKC_ATTN_DQ=ring" 2>&1 | tee $OUT/ab.txt | tail -8
el done
