// layernorm_fwd_bits: Pre-LN's first LayerNorm (layernorm_fwd) and the attention dropout keep bits
// (attn_dropout_bits) in one launch. The two need nothing of each other: the LayerNorm is
// memory-bound (a row per warp, four 16-byte loads per lane at BERT-Large width), the bits are
// ALU-bound (Philox), so each thread issues its row's loads, draws its share of the bit words while
// they are in flight, then normalizes. The words are the ones attn_dropout_bits writes, bit for bit.
// bits.bits == nullptr: the LayerNorm alone (normalize_invertible's re-run in backward without
// attn_dropout_checkpoint).
// Who draws the words: the threads of blocks [0, word_blocks) (attn_dropout_bits_strided over them).
// The runtime leaves out a last wave that fills less than half the GPU (runtime ln_bits_word_blocks,
// from the kernel's resident blocks per SM): at BERT-Large width the grid is ~2.2 waves of this
// kernel, and with the words spread over every block the last, partial wave (~0.2 of the SMs'
// capacity) ran a full share of Philox work at low occupancy after the others had finished; its
// blocks now only normalize their rows (bench/NOTES.md v46). word_blocks = the grid size gives every
// block a share (DSKC_LN_BITS_BLOCKS=all).
#pragma once
#include "dskc_config.cuh"
#include "attn_dropout_bits.cuh"
#include "layernorm_fwd.cuh"

namespace dskc {

struct LayerNormFwdBitsParams {
  LayerNormFwdParams ln;
  AttnDropoutBitsParams bits;
  int word_blocks;  // blocks [0, word_blocks) draw the words (1 <= word_blocks <= gridDim.x)
};

template <int kCols>
__device__ __forceinline__ void layernorm_fwd_bits_impl(const LayerNormFwdBitsParams& p) {
  layernorm_fwd_impl<kCols>(p.ln, [&] {
    if (p.bits.bits && blockIdx.x < static_cast<unsigned>(p.word_blocks))
      attn_dropout_bits_strided(p.bits, kHeads, blockIdx.x * blockDim.x + threadIdx.x, p.word_blocks * blockDim.x);
  });
}

}  // namespace dskc
