#!/usr/bin/env bash
# Ran on a tree with exp/gemm_cluster.patch applied, at its state then (bench/NOTES.md v32); the
# DSKC_TMP_* hooks were throwaway code that neither the patch nor main keeps.
# Session 35: the cross-CTA stage release as a default-semantics (release.cta) remote arrival.
. "$(dirname "$0")/common.sh"
build_gpu dskc
for v in "DSKC_GEMM_CLUSTER=1" "DSKC_GEMM_CLUSTER=2"; do
  echo "$v: $(fwd_gemm_line "$v" $L128 10)"
done | tee "$OUT/profile_relcta.txt"
el done
