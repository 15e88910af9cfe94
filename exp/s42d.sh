#!/usr/bin/env bash
# Prepared in session 42, not run (the device time was spent): attn_flash_fwd (wgmma) with each thread's
# keep words copied by cp.async two tiles ahead into a per-thread ring in shared memory
# (exp/keep_words_cpasync.patch) against the module sources of the template before v39 (base) and of
# main's register load-ahead at max_seq <= 128 (ahead), both from v39_sources (exp/common.sh) before the
# patch is applied: the wgmma forward's GPU cases (against the mma.sync kernel, the unfused path and the CPU reference, S = 1 ... 509, fp16 / bf16, dropout or not),
# then Nsight Compute kernel times of one step, alternating, as many rounds as the time allows.
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc
v39_sources
git apply exp/keep_words_cpasync.patch || exit 1  # the new form
build_gpu -j16 dskc gpu_test_flash_attention
el "flash forward cases"
gpu_test flash_fwd.log 120 gpu_test_flash_attention -tc="fused attention forward on warpgroup MMA*"
el "ncu A/B"
for r in 1 2 3; do
  for n in 128 512; do
    L=$L128; [ $n = 512 ] && L=$L512
    for v in base ahead new; do
      e=""; [ $v = base ] && e="DSKC_OVERRIDE_SOURCE=$PWD/build-gpu/v39/base_$n.cu"
      [ $v = ahead ] && e="DSKC_OVERRIDE_SOURCE=$PWD/build-gpu/v39/main_$n.cu"
      ncu_step "$e" $L ${v}_${n}_$r > /dev/null
      python3 exp/ncu_step.py "$OUT/ncu_${v}_${n}_$r.csv" > "$OUT/kernels_${v}_${n}_$r.txt" 2>&1
      echo "$n $v $r $(grep -E ' attn_flash_fwd$' "$OUT/kernels_${v}_${n}_$r.txt" | awk '{print "fwd", $1}') $(tail -1 "$OUT/kernels_${v}_${n}_$r.txt" | awk '{print "sum", $1}')"
      rm -f "$OUT/ncu_${v}_${n}_$r.csv"
    done
  done
done | tee "$OUT/ncu_ab.txt"
el done
