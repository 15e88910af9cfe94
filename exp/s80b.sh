#!/usr/bin/env bash
# Session 80, the follow-up call on the machine exp/s79c.sh warmed (build-gpu already there; on a
# fresh machine it builds first). Rows from an H100 are marked so.
# 1. `dskc bench --versus` (new in session 80, never run on a GPU before): its GPU case, then paired
#    A/Bs in one process, 60 pairs of 4-step blocks each, both shapes, launched and replayed from
#    CUDA graphs: a control (DSKC_LAYER_GRAPHS=0 is the default: B is A), all three memory flags,
#    stochastic_mode, `DSKC_DGRAD_GEMM=sm90` (the three linear data gradients on gemm_sm90, +2.1% /
#    +1.5% in v31 with the weight transposes v54 removed), Post-LN, bf16.
# 2. The owed 9-round layer matrix replayed from graphs (separate processes, as in earlier sessions)
#    of all three flags, stochastic_mode and dgrad sm90 against the default.
# 3. Nsight Compute step lists (default / all flags, both shapes) if the time allows.
# bash exp/pack.sh 590 exp/s80b.sh [MATRIX_END]
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc gpu_test_layer_behaviour
el "bench --versus GPU case"
( gpu_test versus_test.log 240 gpu_test_layer_behaviour -tc="dskc bench --versus*" )
el "paired A/Bs"
for L in $L128 $L512; do
  for form in "" --graph; do
    for spec in DSKC_LAYER_GRAPHS=0 all_memory_flags stochastic_mode DSKC_DGRAD_GEMM=sm90 post_layer_norm bf16; do
      printf '%-40s %-8s %-22s %s\n' "$L" "${form:-launched}" "$spec" \
        "$(timeout 120 build-gpu/dskc bench $L $form --pairs 60 --versus $spec 2>&1 | grep -E 'B vs A|rror' | head -2)"
    done
  done
done | tee "$OUT/versus.txt"
E=(--env "dgrad sm90@fp16 Pre-LN:DSKC_DGRAD_GEMM=sm90")
graph_matrix 9 "${1:-470}" flags_stoch_graph_r9.txt \
  --only "fp16 Pre-LN,all three flags,stochastic_mode,dgrad sm90" --no-control "${E[@]}"
ncu_lists
el done
