#!/usr/bin/env bash
# Session 64, second call (`bash exp/pack.sh 590 exp/s64b.sh`): the MLM heads with aligned decoder
# GEMMs (DSKC_HEAD_GEMMS), the one-pass-read cross-entropy and the row-wise head gradient scatter.
# S64_FORMS, S64_OLD_NCU=0 and S64_PLAIN_RUN=0 change what it runs (exp/s64c.sh).
# The CUDA backend's GPU tests; Nsight Compute over a one-layer BERT-Large's 3 training steps for each
# DSKC_HEAD_GEMMS form (the heads' kernels printed); then the BERT-Large seq 128 mb 64 fp16 acc 1
# profile, this build alternated with the previous commit's dskc (built from `git archive 03d8096`),
# and once with DSKC_HEAD_GEMMS=plain.
# (The DSKC_HEAD_GEMMS forms vocab / rows / aligned existed only in session 64's working tree; the landed
# options are padded, the old rows form, and plain: bench/NOTES.md t5.)
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc gpu_test_bert_cuda
old_dskc 03d8096
el "gpu_test_bert_cuda"
gpu_test bert_cuda.log 300 gpu_test_bert_cuda
run_dir s64
large_train_data "$D"
for f in ${S64_FORMS:-aligned vocab plain}; do DSKC_HEAD_GEMMS=$f ncu_heads $f; done
[ "${S64_OLD_NCU:-1}" = 1 ] && ncu_heads old /tmp/old/build-gpu/dskc
for r in 1 2; do large_train new$r; DSKC_BIN=/tmp/old/build-gpu/dskc large_train old$r; done
tags="new2 old2"
[ "${S64_PLAIN_RUN:-1}" = 1 ] && { DSKC_HEAD_GEMMS=plain large_train plain1; tags="$tags plain1"; }
for t in $tags; do echo "== $t"; profile_lines $t "heads|encoder|whole"; done
rm -rf "$D"
el done
