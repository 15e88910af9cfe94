#!/usr/bin/env bash
# Ran on a tree with exp/gemm_cluster.patch applied, at its state then (bench/NOTES.md v32); the
# DSKC_TMP_* hooks were throwaway code that neither the patch nor main keeps.
# Session 35: the cross-CTA stage release as a default-semantics (release.cta) remote arrival.
. "$(dirname "$0")/common.sh"
build_gpu dskc
for v in "DSKC_GEMM_CLUSTER=1" "DSKC_GEMM_CLUSTER=2"; do
  echo "$v: $(env $v timeout 30 build-gpu/dskc bench $L128 --iters 20 --warmup 10 --profile 2>&1 | grep -E "gemm_[a-z_]+_fwd|  sum|rror" | awk '{printf "%s %s  ", $1, $2}')"
done | tee "$OUT/profile_relcta.txt"
el done
