#!/usr/bin/env bash
# Prepared in session 59 (no device was lent that session), for the next session's first call
# (`bash exp/pack.sh 595 exp/s59a.sh`). Supersedes exp/s58e.sh (never run). Ran in session 59 itself on
# an H200 (`bash exp/pack.sh 300 exp/s59a.sh; bash exp/s59c.sh 150`) with these patches applied in
# this order; after that run they landed on main (commits a0246ba..0617989) and were removed from exp/:
#  - exp/layer_graphs.patch (session 58, bench/NOTES.md v51): layers launched as CUDA graphs in
#    training (LayerOptions::cuda_graphs, DSKC_LAYER_GRAPHS, `dskc train --cuda_graphs`).
#  - exp/step_profile.patch (session 59): `dskc train --profile_steps N`, the last N steps timed by
#    phase (events on the CUDA backend's stream between the trainer's and the backend's marks).
#  - exp/train_overlap.patch (session 59): the CUDA backend's index tables built on the trainer's
#    read-ahead thread (TrainBackend::prepare; main already reads the batches there), the tables and
#    mask uploaded through page-locked staging without a wait, one gradient pass for the overflow
#    check and the norm. DSKC_TRAIN_PREFETCH=0 puts the read and the tables back on the critical path
#    (the A/B below); prediction: -0.5 to -1 ms per micro-step (the tables' stable sorts, ~0.7 ms on
#    the 2-core machine) and -0.3 ms per step (the second pass over 1.3 GB of gradients): +2-3% seq/s.
#  - exp/multi_adam.patch (session 59): Adam / AdamW over every parameter tensor in one launch that
#    also writes the compute copies (~300 tensors: 600 launches before, most of them of 1024 elements).
#    DSKC_OPTIMIZER=per_tensor is the old form (the A/B below); prediction: the optimizer phase
#    -1 to -1.5 ms per step (launch-bound small tensors and one read of the masters less): +2% seq/s
#    at accumulation 1.
# Why the profile: at 1393-1430 seq/s a BERT-Large micro-batch of 64 x 128 takes ~45 ms, but 24 layers
# take ~31-32 ms (sustained layer 1.31 ms) and the heads, embeddings, gradient accumulation and (at
# accumulation 1) the optimizer ~4-6 ms by their bytes and flops: ~8-10 ms per micro-step are not
# accounted for. Prediction: the profile puts most of them in the encoder phases (layers slower
# inside training than in `dskc bench`) and in per-micro-step host gaps (the next batch's index
# tables, ~0.7 ms of std::stable_sort on the 2-core machine, with the GPU idle) and the optimizer's
# ~300 launches.
# Steps: the new GPU cases (stops on a failure); BERT-Large seq 128, micro-batch 64, fp16 `dskc
# train`, 40 steps, profile of steps 21-40, plain and --cuda_graphs (2 alternations), then all three
# memory flags plain / graphs; the layer alone (`dskc bench`, sustained). exp/s59b.sh runs the whole
# GPU suite (a separate call: a machine taken back mid-call loses the call's logs).
# Graph prediction: training +0.5-1% seq/s without flags, +2-3% with all three flags.
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
build_gpu -j16
el "new GPU cases"
gpu_test test_layer_graphs.log 200 gpu_test_layer_behaviour -tc="*CUDA graph*"
gpu_test test_bert_new.log 150 gpu_test_bert_cuda -tc="*cuda_graphs*,*phase marks*,*prepared ahead*,*multi-tensor*,*Adam and Lamb*"
el "train: profile, plain vs --cuda_graphs"
large_train_data /tmp/s59a
train() { large_train "$@"; }
nop() { DSKC_TRAIN_PREFETCH=0 train "$@"; }
pto() { DSKC_OPTIMIZER=per_tensor train "$@"; }
for r in 1 2; do train plain$r; train graphs$r --cuda_graphs; nop noprefetch$r; pto pertensor$r; done
train flags_plain $FL_ALL; train flags_graphs $FL_ALL --cuda_graphs
for t in plain1 graphs1 noprefetch1 pertensor1; do grep -h -A20 "^step profile" $OUT/train_$t.log | head -22; done
el "dskc bench, sustained (the layer alone, for the encoder phases: 24 x forward, 24 x backward)"
build-gpu/dskc bench $L128 --warmup 300 --iters 100 2>&1 | grep -E "^\||clock|host" | tail -3
el done
