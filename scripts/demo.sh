#!/usr/bin/env bash
# The main job on the bundled example: build, compile the guide's BERT-Large layer (Pre-LN,
# hidden 1024, 16 heads, seq 128, batch 64, fp16) to a cubin with its manifest, and print its
# inspection (kernels, activation memory per flag, registers). With a GPU, also time it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
mkdir -p out
build/dskc compile examples/bert_large_layer.json -o out/bert_large_layer.cubin
build/dskc inspect examples/bert_large_layer.json --kernels --memory --resources
if build/dskc bench examples/bert_large_layer.json --iters 20 2> /dev/null; then :; else
  echo "(no GPU here: skipped dskc bench)"
fi
