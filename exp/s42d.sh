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
v39_ncu_ab 3
el done
