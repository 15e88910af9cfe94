#!/usr/bin/env bash
# Prepared in session 42, not run (the device time was spent): attn_flash_fwd (wgmma) with each thread's
# keep words copied by cp.async two tiles ahead into a per-thread ring in shared memory
# (exp/keep_words_cpasync.patch, applied first) against the module sources of the previous template
# (exp/s42/base_*.cu) and of main's register load-ahead at max_seq <= 128 (exp/s42/ahead_*.cu, 31cfb37):
# the wgmma forward's GPU cases (against
# the mma.sync kernel, the unfused path and the CPU reference, S = 1 ... 509, fp16 / bf16, dropout or not),
# then Nsight Compute kernel times of one step, alternating, as many rounds as the time allows.
. "$(dirname "$0")/common.sh"
git apply --check exp/keep_words_cpasync.patch 2>/dev/null && git apply exp/keep_words_cpasync.patch  # the new form
build_gpu -j16 dskc gpu_test_flash_attention
el "flash forward cases"
gpu_test flash_fwd.log 120 gpu_test_flash_attention -tc="fused attention forward on warpgroup MMA*"
el "ncu A/B"
for r in 1 2 3; do
  for n in 128 512; do
    L=$L128; [ $n = 512 ] && L=$L512
    for v in base ahead new; do
      e=""; [ $v != new ] && e="DSKC_OVERRIDE_SOURCE=$PWD/exp/s42/${v}_$n.cu"
      ncu_step "$e" $L ${v}_${n}_$r > /dev/null
      python3 exp/ncu_step.py "$OUT/ncu_${v}_${n}_$r.csv" > "$OUT/kernels_${v}_${n}_$r.txt" 2>&1
      echo "$n $v $r $(grep -E ' attn_flash_fwd$' "$OUT/kernels_${v}_${n}_$r.txt" | awk '{print "fwd", $1}') $(tail -1 "$OUT/kernels_${v}_${n}_$r.txt" | awk '{print "sum", $1}')"
      rm -f "$OUT/ncu_${v}_${n}_$r.csv"
    done
  done
done | tee "$OUT/ncu_ab.txt"
el done
