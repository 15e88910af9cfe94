// bias_gelu_bwd_bits: the GELU backward (bias_gelu_bwd) and, under attn_dropout_checkpoint, the
// attention dropout keep bits (attn_dropout_bits) in one launch (DSKC_ATTN_BITS_BWD=gelu). The GELU
// backward is memory-bound (it reads dg and h and writes dh, 192 MiB at BERT-Large's 8192 rows), the
// bits ALU-bound (Philox): each thread issues its first vector's loads, draws its share of the bit
// words while they are in flight (attn_dropout_bits_spread: whole warps, evenly over the grid), then
// does the GELU′ math. The words are the ones attn_dropout_bits writes, bit for bit. The kernel runs on
// the main stream well before the attention backward, which reads them.
#pragma once
#include "dskc_config.cuh"
#include "attn_dropout_bits.cuh"
#include "bias_gelu_bwd.cuh"

namespace dskc {

struct BiasGeluBwdBitsParams {
  BiasGeluBwdParams gelu;
  AttnDropoutBitsParams bits;
};

// The grid-stride form (inter_b gradient by cuBLASLt).
template <int kCols, bool kStoreGelu = false>
__device__ __forceinline__ void bias_gelu_bwd_elem_bits_impl(const BiasGeluBwdBitsParams& p) {
  bias_gelu_bwd_elem_impl<kCols, kStoreGelu>(p.gelu, [&] {
    attn_dropout_bits_spread(p.bits, kHeads, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
  });
}

// The row-tile form with the inter_b partial sums: the words first, then the block's rows.
template <int kCols, bool kPartials = true, bool kStoreGelu = false>
__device__ __forceinline__ void bias_gelu_bwd_bits_impl(const BiasGeluBwdBitsParams& p) {
  bias_gelu_bwd_impl<kCols, kPartials, kStoreGelu>(p.gelu, [&] {
    attn_dropout_bits_spread(p.bits, kHeads, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
  });
}

}  // namespace dskc
