// attn_flash_bwd_dot_bits: the fused attention backward's D = rowsum(dO ⊙ O) (attn_flash_bwd_dot)
// and, under attn_dropout_checkpoint, the attention dropout keep bits (attn_dropout_bits) in one
// launch right before attn_flash_bwd_dkdv, which reads both. The dot is memory-bound (two 16-byte
// row pieces per thread), the bits ALU-bound (Philox): each thread issues its loads, draws its share
// of the bit words (attn_dropout_bits_strided over the whole grid) while they are in flight, then
// sums. The words are the ones attn_dropout_bits writes, bit for bit.
#pragma once
#include "dskc_config.cuh"
#include "attn_dropout_bits.cuh"
#include "attn_flash_bwd_dot.cuh"

namespace dskc {

struct AttnFlashDotBitsParams {
  AttnFlashDotParams dot;
  AttnDropoutBitsParams bits;
};

// kDq = kDqReduce (stochastic_mode's TMA-reduced dQ): also zeroes the dQ accumulator.
template <typename E, FlashDq kDq = kDqPerQueryTile>
__device__ __forceinline__ void attn_flash_bwd_dot_bits_impl(const AttnFlashDotBitsParams& p) {
  attn_flash_bwd_dot_impl<E, kDq>(p.dot, [&] {
    const unsigned block = blockIdx.y * gridDim.x + blockIdx.x;
    attn_dropout_bits_strided(p.bits, kHeads, block * blockDim.x + threadIdx.x, gridDim.x * gridDim.y * blockDim.x);
  });
}

}  // namespace dskc
