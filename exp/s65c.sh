#!/usr/bin/env bash
# Session 65, third call (`bash exp/pack.sh 400 exp/s65c.sh`): two more forms of the gradient norm's
# layer share summed during the backward (a throwaway DSKC_GRAD_SUMSQ): `main` (each layer's share
# on the main stream right after its backward, while its last gradients may still be in L2) and
# `early8` (on the side stream, 8 blocks per range instead of 128), against `end`, alternated twice.
# DSKC_GRAD_SUMSQ was a working-tree switch, removed after this call (bench/NOTES.md t6): not in git.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
run_dir s65
large_train_data "$D"
for r in 1 2; do
  for m in end main early8; do DSKC_GRAD_SUMSQ=$m large_train $m$r; done
done
for t in end main early8; do echo "== $t"; profile_lines ${t}2 "encoder backward|overflow|whole"; done
rm -rf "$D"
el done
