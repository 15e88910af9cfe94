#!/usr/bin/env bash
# Prepared in session 63 (the device budget ran out before it could run): s63a.sh's one pair with
# all three memory flags (sync 1778.6, overlap 1795.8 seq/s) alternated twice in a fresh build;
# `bash exp/pack.sh 240 exp/s63b.sh`.
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
build_gpu -j16 dskc
D=/tmp/s63; avail=$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9)
[ "${avail:-0}" -ge 16 ] && D=/dev/shm/s63
large_train_data "$D"
mode() { local tag=$1 m=$2; shift 2; DSKC_OPTIMIZER_OVERLAP=$m large_train "$tag" "$@"; }
for r in 1 2; do mode syncf$r sync $FL_ALL; mode ovlf$r overlap $FL_ALL; done
for t in syncf2 ovlf2; do echo "== $t"; grep -h -A17 "^step profile" "$OUT/train_$t.log" | tail -15 | cut -c1-90; done
rm -rf "$D"
el done
