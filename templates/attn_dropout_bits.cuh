// attn_dropout_bits: the fused attention's dropout keep mask as bits, straight from the keep rule
// (no attention math): attn_dropout_bits [B·heads, S, W] uint32, W = ceil(S/32), word for word what
// attn_flash_fwd packs with flash::keep_bits_store — bit j % 32 of word j / 32 of row i of head bh
// = keep(query i, key j) under the shared Philox rule (flash::keep_word / keep8), bits of keys >= S
// zero; the tensor has no rows >= S. It runs where Philox inside the mma-heavy flash kernels would
// cost more (registers, occupancy): in backward under attn_dropout_checkpoint (the bits are then
// not kept: this kernel rewrites them into the workspace for attn_flash_bwd_dkdv / _dq), and with
// DSKC_ATTN_MASK=kernel in forward right before attn_flash_fwd, which reads them.
// Grid (ceil(S / kRows), B·heads), like the flash kernels: a block owns kRows query rows of one
// head, a contiguous run of rows·W words, and its threads stride over that run one word (32 flags:
// 4 or 5 Philox calls) at a time. Consecutive lanes store consecutive words, so a warp writes 128
// contiguous bytes per step; one word per thread keeps the grid at B·heads·S·W threads (about 2^19
// at batch 64 / seq 128 and batch 16 / seq 512, two full waves on a 132-SM GPU), where 16-byte
// stores (four words per thread) would leave BERT-Large at seq 128 half a wave. The kernel is
// ALU-bound (Philox), the 2-8 MiB of stores are not the cost.
#pragma once
#include "dskc_config.cuh"
#include "common/dropout.cuh"
#include "common/flash.cuh"

namespace dskc {

struct AttnDropoutBitsTile {
  static constexpr int kThreads = 256;
  static constexpr int kRows = 64;  // query rows per block
};

struct AttnDropoutBitsParams {
  uint32_t* bits;  // [B*heads, S, ceil(S/32)] out: dropout keep bits
  int batch;
  int seq;
  DropoutArgs rng;
};

// The count words from the start of row row0 of the tensor, B·heads·S rows of W words (row r =
// bh·S + i, so word w of row r has its first key at element index r·S + 32·w): thread t of n writes
// the run's words t, t + n, ... Consecutive threads store consecutive words; the row and word
// advance by a fixed step per iteration (no integer division in the loop).
__device__ __forceinline__ void attn_dropout_bits_words(const AttnDropoutBitsParams& p, size_t row0, size_t count,
                                                        unsigned t, unsigned n) {
  const int seq = p.seq, words = flash::keep_words(seq);
  const dskc_rng::DropoutKey key{p.rng.seed, p.rng.layer, p.rng.step};
  const unsigned row_step = n / words, word_step = n % words;
  size_t r = row0 + t / words;
  unsigned w = t % words;
  const size_t first = row0 * words;
  for (size_t c = first + t; c < first + count; c += n) {
    const int j = 32 * static_cast<int>(w);  // the word's first key
    p.bits[c] = flash::keep_word(key, static_cast<uint64_t>(r) * seq + j, seq - j < 32 ? seq - j : 32);
    r += row_step;
    w += word_step;
    if (w >= static_cast<unsigned>(words)) {
      w -= words;
      ++r;
    }
  }
}

// The kernel: a block's kRows query rows of head bh, a contiguous run of rows·W words.
__device__ __forceinline__ void attn_dropout_bits_impl(const AttnDropoutBitsParams& p) {
  using A = AttnDropoutBitsTile;
  const int seq = p.seq, words = flash::keep_words(seq);
  const int i0 = blockIdx.x * A::kRows, bh = blockIdx.y;
  const int rows = seq - i0 < A::kRows ? seq - i0 : A::kRows;
  attn_dropout_bits_words(p, static_cast<size_t>(bh) * seq + i0, static_cast<size_t>(rows) * words, threadIdx.x,
                          A::kThreads);
}

// The same words spread over a grid shaped for other work (layernorm_fwd_bits.cuh,
// attn_flash_bwd_dot_bits.cuh): the whole tensor over thread t of n.
__device__ __forceinline__ void attn_dropout_bits_strided(const AttnDropoutBitsParams& p, int heads, unsigned t,
                                                          unsigned n) {
  const size_t total = static_cast<size_t>(p.batch) * heads * p.seq * flash::keep_words(p.seq);
  attn_dropout_bits_words(p, 0, total, t, n);
}

}  // namespace dskc
