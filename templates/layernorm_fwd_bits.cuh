// layernorm_fwd_bits: Pre-LN's first LayerNorm (layernorm_fwd) and the attention dropout keep bits
// (attn_dropout_bits) in one launch. The two need nothing of each other: the LayerNorm is
// memory-bound (a row per warp, four 16-byte loads per lane at BERT-Large width), the bits are
// ALU-bound (Philox), so each thread issues its row's loads, draws its share of the bit words while
// they are in flight (attn_dropout_bits_strided over the whole LayerNorm grid), then normalizes.
// The words are the ones attn_dropout_bits writes, bit for bit. bits.bits == nullptr: the LayerNorm
// alone (normalize_invertible's re-run in backward without attn_dropout_checkpoint).
#pragma once
#include "dskc_config.cuh"
#include "attn_dropout_bits.cuh"
#include "layernorm_fwd.cuh"

namespace dskc {

struct LayerNormFwdBitsParams {
  LayerNormFwdParams ln;
  AttnDropoutBitsParams bits;
};

template <int kCols>
__device__ __forceinline__ void layernorm_fwd_bits_impl(const LayerNormFwdBitsParams& p) {
  layernorm_fwd_impl<kCols>(p.ln, [&] {
    if (p.bits.bits)
      attn_dropout_bits_strided(p.bits, kHeads, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
  });
}

}  // namespace dskc
