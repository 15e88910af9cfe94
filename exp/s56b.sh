#!/usr/bin/env bash
# Session 56 (never ran: the H100 call was refused too): the whole GPU suite on the landed HEAD (ad5f7c6's review commit had not run on a GPU),
# on whichever card the device tool gives (exp/s56a.sh's H200 calls were refused). Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
build_gpu -j16
ctest_gpu 16 330 320
el done
