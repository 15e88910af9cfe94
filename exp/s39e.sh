#!/usr/bin/env bash
# Session 39, call 5: the memory table's seq-128 dskc cells on the new default (no grad_scores
# workspace at seq <= 128 now), both caps; PyTorch eager's cells are unchanged (not re-run).
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc
SEQS=128 TORCH=0 DSKC_TIMEOUT=330 bash bench/memory_table.sh 2>&1 | tail -30
