#!/usr/bin/env bash
# Session 63 (`bash exp/pack.sh 590 exp/s63a.sh`): the update overlapped with the next forward
# (bench/NOTES.md t4, BackendOptions::optimizer_overlap). The CUDA backend's GPU tests first (the new
# bitwise test among them), then the BERT-Large seq 128 mb 64 fp16 acc 1 `dskc train` profile A/B in
# one build, DSKC_OPTIMIZER_OVERLAP = sync / overlap / async / overlap_low alternated twice, then
# overlap with --cuda_graphs and with all three memory flags. Run folders in /dev/shm when it has
# room (the final 4 GB checkpoint is most of a run's time on disk).
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
git log --oneline -1; git status --short | head
build_gpu -j16
el "gpu_test_bert_cuda"
gpu_test bert_cuda.log 240 gpu_test_bert_cuda
D=/tmp/s63; avail=$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9)
[ "${avail:-0}" -ge 16 ] && D=/dev/shm/s63
el "runs in $D"
large_train_data "$D"
mode() { local tag=$1 m=$2; shift 2; DSKC_OPTIMIZER_OVERLAP=$m large_train "$tag" "$@"; }
for r in 1 2; do mode sync$r sync; mode ovl$r overlap; mode asy$r async; mode low$r overlap_low; done
mode ovlg overlap --cuda_graphs
mode ovlf overlap $FL_ALL
mode syncf sync $FL_ALL
for t in sync2 ovl2 asy2 low2 ovlg ovlf syncf; do echo "== $t"; grep -h -A17 "^step profile" "$OUT/train_$t.log" | tail -15 | cut -c1-90; done
rm -rf "$D"
el done
