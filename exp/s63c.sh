#!/usr/bin/env bash
# Prepared in session 63 as the first call on an H200 (`bash exp/pack.sh 590 exp/s63c.sh`): what the
# H200 still owes in one call. The BERT-Large seq 128 mb 64 fp16 acc 1 `dskc train` profile of the
# default (sessions 61-62's step; the last H200 profile is session 59's), alternated with the update
# overlapped with the next forward (t4: no gain on an H100; the H200 has more bandwidth per watt)
# and once with session 61's layer gradients (DSKC_LAYER_GRADS=accumulate); then compare_torch's
# side-by-side table (3 rounds) in the time left. `ctest -L gpu` and the graph matrix: exp/s62c.sh
# or exp/s62b.sh's last step in a second call.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
run_dir s63
large_train_data "$D"
mode() { local tag=$1 m=$2; shift 2; DSKC_OPTIMIZER_OVERLAP=$m large_train "$tag" "$@"; }
mode sync1 sync; mode ovl1 overlap
DSKC_LAYER_GRADS=accumulate large_train acc1
mode sync2 sync; mode ovl2 overlap
for t in sync2 ovl2 acc1; do echo "== $t"; profile_lines $t; done
rm -rf "$D"
compare_r3 585
el done
