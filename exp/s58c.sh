#!/usr/bin/env bash
# Session 58 (`bash exp/pack.sh 595 exp/s58c.sh`): with dskc's CUDA-graph form in the tools: the
# graph GPU test again, one `dskc bench` of each layer (host issue times), the side-by-side table
# (3 interleaved rounds, now with dskc replayed from graphs next to torch's graph columns), then the
# burst layer matrix with every variant replayed from graphs (3 rounds) in the time left.
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
build_gpu -j16 dskc gpu_test_layer_behaviour
gpu_test test_graph.log 200 gpu_test_layer_behaviour -tc="*CUDA graphs*"
for L in $L128 $L512; do
  for g in "" --graph; do build-gpu/dskc bench $L $g | tail -3 | tee -a "$OUT/bench_host.txt"; done
done
compare_r3 440
el "layer matrix --graph, 3 rounds"
timeout $(( 585 - $(date +%s) + t0 )) python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 --graph \
  2>&1 | tee $OUT/matrix_graph.txt | tail -22
el done
