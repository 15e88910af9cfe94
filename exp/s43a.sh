#!/usr/bin/env bash
# Session 43, call 1: exp/keep_words_cpasync.patch (the wgmma attention forward's keep words by cp.async,
# two tiles ahead, into a per-thread ring in shared memory, at every sequence length) on the GPU.
# Main's module sources first (v39_sources: build-gpu/v39/main_N.cu = main's register load-ahead at
# max_seq <= 128, base_N.cu = the template before v39), then the patch, the full build, Nsight Compute
# kernel times of one step (base / ahead / new, alternating, 2 rounds), then `ctest -L gpu`.
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc
v39_sources
git apply exp/keep_words_cpasync.patch || exit 1
build_gpu -j16
el "ncu A/B"
for r in 1 2; do
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
ctest_gpu 16 $(( 560 - ($(date +%s) - t0) )) 250
el done
