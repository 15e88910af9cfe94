#!/usr/bin/env bash
# Session 47, call 2: v45 (b), the ring's hand-over point to point (st.async into the next block's slot,
# full / empty mbarriers per slot) instead of a cluster barrier per step (call 1: correct, but the dK/dV
# kernel 0.134 → 0.250 ms). (1) flash shard 12 (the ring's GPU case) and compute-sanitizer memcheck /
# racecheck; (2) Nsight Compute step lists at (16,512), 3 rounds: fused (the default: dSᵀ + the dQ GEMM),
# ring, and ring `noxchg` (exp/s47_variants.py: no hand-overs, timing only); (3) burst layer A/B, 3
# rounds. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
el "flash shard 12 (ring)"
flash_shard 12 ring 200
el "sanitizers"
for cs in "d64-m512-s100 memcheck" "d64-s509 memcheck" "d64-m512-s100 racecheck" "d64-s381 racecheck"; do FLASH_TC="fused dQ around a ring*" flash_sanitize $cs 120; done
el "ncu at (16,512)"
mkdir -p build-gpu/s47
DSKC_ATTN_DQ=ring build-gpu/dskc compile $L512 --arch sm_90 --emit cuda -o build-gpu/s47/ring_512.cu --manifest none > /dev/null
python3 exp/s47_variants.py build-gpu/s47/ring_512.cu build-gpu/s47
K="attn_flash_bwd_dot attn_flash_bwd_dkdv nvjet_sm90_hsh_64x256_64x5_1x2_h_bz_ptrBatch_NTN"
for r in 1 2 3; do
  env_ab 512 fused "" $r $K
  env_ab 512 ring "DSKC_ATTN_DQ=ring" $r $K
  env_ab 512 noxchg "DSKC_ATTN_DQ=ring DSKC_OVERRIDE_SOURCE=$PWD/build-gpu/s47/noxchg.cu" $r $K
done | tee $OUT/ncu_ab.txt
el "burst A/B, 3 rounds"
timeout 170 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 --only "fp16 Pre-LN,ring" \
  --env "ring:DSKC_ATTN_DQ=ring" 2>&1 | tee $OUT/ab.txt | tail -8
el done
