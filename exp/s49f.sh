#!/usr/bin/env bash
# Session 49, call 6: the row-value copies of both attention-backward kernels in one helper
# (flash_wg_bwd::load_rows). The sm_90a code of attn_flash_bwd_dkdv is byte-identical to the GPU-tested
# build for the default, persistent-off, dQ-GEMM, wgmma2, reduce, attn_dropout_checkpoint, Post-LN and
# bf16 modules (checked on the CPU: the cubins' .text sections); the ring form's differs, so its GPU
# case runs here, then the persistent case. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16 gpu_test_flash_attention
el "ring"
gpu_test ring.log 110 gpu_test_flash_attention -tc="fused dQ around a ring of cluster blocks*"
el "persist"
gpu_test persist.log 60 gpu_test_flash_attention -tc="persistent clustered attention backward*"
el done
