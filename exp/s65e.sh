#!/usr/bin/env bash
# Session 65, fifth call (`bash exp/pack.sh 280 exp/s65e.sh`): the word table's gradient assignment
# (t6) kernel by kernel: Nsight Compute over a one-layer BERT-Large's 3 training steps, the heads of
# the last step, this tree against 1efd317's dskc (the memset is not a kernel: only the accumulate's
# share shows).
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
old_dskc 1efd317
run_dir s65
large_train_data "$D"
for r in 1 2; do
  ncu_heads new$r > "$OUT/heads_new$r.txt"; grep -E "model_accumulate|sum" "$OUT/heads_new$r.txt" | head -3
  ncu_heads old$r /tmp/old/build-gpu/dskc > "$OUT/heads_old$r.txt"; grep -E "model_accumulate|sum" "$OUT/heads_old$r.txt" | head -3
done
rm -rf "$D"
el done
