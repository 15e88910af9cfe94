#!/usr/bin/env bash
# Session 39, call 1: DSKC_ATTN_DQ=fused as the default: every GPU test, then the kernel sums.
. "$(dirname "$0")/common.sh"
build_gpu -j16
ctest_gpu 16 380 370
el "kernel sums"
ncu_step "" $L128 l128_default
ncu_step "" $L128 l128_all --attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint
el done
