#!/usr/bin/env bash
# Superseded by exp/s59a.sh (never run; its patch is on main since session 59). Prepared in session 58, for the next session's first call (`bash exp/pack.sh 595 exp/s58e.sh`):
# layers launched as CUDA graphs in training, exp/layer_graphs.patch (LayerOptions::cuda_graphs,
# DSKC_LAYER_GRAPHS, `dskc train --cuda_graphs`: each layer's forward and backward re-captured every
# call with that call's arguments and launched as one graph, the executable graph updated in place;
# bench/NOTES.md v51). Session 58 started this call once (without the patch step: the change was on
# its branch then) and the machine stopped answering before any output came back; then the device time
# ran out, so the patch has never run on a GPU. Here: the new GPU cases (stops on a failure), BERT-Large
# seq 128, micro-batch 64, fp16 `dskc train` with and without --cuda_graphs (40 steps, seq/s over steps
# 21-40; 2 alternations; then all three memory flags, one each), then the whole `ctest -L gpu`.
# Prediction: training +0.5-1% seq/s without flags (the backward's GPU-side launch and stream-wait
# costs, -0.008 ms of ~0.8 per layer in v51; the host already runs ahead), +2-3% with all three flags
# (-0.04 ms per layer backward in v51).
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
build_gpu -j16
el "new GPU cases"
gpu_test test_layer_graphs.log 200 gpu_test_layer_behaviour -tc="*CUDA graph*"
gpu_test test_bert_graphs.log 120 gpu_test_bert_cuda -tc="*cuda_graphs*"
el "train A/B"
large_train_data /tmp/s58e
train() { large_train "$@"; }
for r in 1 2; do train plain$r; train graphs$r --cuda_graphs; done
train flags_plain $FL_ALL; train flags_graphs $FL_ALL --cuda_graphs
ctest_gpu 16 $(( 590 - $(date +%s) + t0 )) 300
el done
