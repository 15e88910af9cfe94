#!/usr/bin/env bash
# Session 50, call 4: the final code (v48: DSKC_FFN_GEMM=sm90 the default): SASS counts of both
# gemm_sm90 GELU GEMMs, the burst layer matrix (3 rounds, with the old default sm90_fwd as one more
# variant), compare_torch (warm-up 10), then ctest -L gpu. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
mkdir -p build-gpu/v50d
build-gpu/dskc compile $L128 --arch sm_90 -o build-gpu/v50d/new.cubin > /dev/null || exit 1
for k in gemm_inter_fwd gemm_output_dgrad; do sass_line build-gpu/v50d/new.cubin $k 128; done | tee $OUT/sass_counts.txt
el "layer matrix, 3 rounds"
timeout 200 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 \
  --env "ffn sm90_fwd:DSKC_FFN_GEMM=sm90_fwd" 2>&1 | tee $OUT/matrix.txt | tail -26
el "compare_torch, warm-up 10"
timeout 120 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup 10 2>&1 |
  tee "$OUT/compare_wu10.txt" | tail -6
ctest_gpu 16 $(( 588 - $(date +%s) + t0 )) 290
el done
