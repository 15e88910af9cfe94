#!/usr/bin/env bash
# Session 48, call 7: the final HEAD (v46 + the runtime reading DSKC_LN_BITS_BLOCKS for every layer):
# the keep-bit GPU cases, a DSKC_LN_BITS_BLOCKS typo on a Post-LN layer (no LayerNorm draws the words
# there: still a config error, exit 3), and dskc bench of both layers. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
el "keep-bit GPU cases"
gpu_test bits_numerics.log 200 gpu_test_layer_numerics -tc="fused attention: keep-bit sources*"
gpu_test bits_behaviour.log 150 gpu_test_layer_behaviour -tc="fused attention keep bits*"
el "typo"
DSKC_LN_BITS_BLOCKS=wave timeout 60 build-gpu/dskc bench $L128 --post_layer_norm --iters 2 --warmup 1; echo "rc=$? (3 expected)"
for L in $L128 $L512; do timeout 60 build-gpu/dskc bench $L 2>&1 | grep -E "^\|  +[0-9]"; done
el done
