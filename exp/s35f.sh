#!/usr/bin/env bash
# Ran on a tree with exp/gemm_cluster.patch applied, at its state then (bench/NOTES.md v32); the
# DSKC_TMP_* hooks were throwaway code that neither the patch nor main keeps.
# Session 35 bisection 2: DSKC_TMP_NOMC=2 cross-CTA stage releases, each CTA loads its whole B;
# =3 multicast B with CTA-local releases (racy: timing only).
. "$(dirname "$0")/common.sh"
build_gpu dskc
for v in "DSKC_GEMM_CLUSTER=1" "DSKC_GEMM_CLUSTER=2 DSKC_TMP_NOMC=2" "DSKC_GEMM_CLUSTER=2 DSKC_TMP_NOMC=3" "DSKC_GEMM_CLUSTER=2"; do
  echo "$v: $(fwd_gemm_line "$v" $L128 10)"
done | tee "$OUT/profile_nomc2.txt"
el done
