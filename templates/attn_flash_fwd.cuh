// attn_flash_fwd: fused attention forward (FlashAttention-2 style) for one (batch, head, 64-query
// tile) per block: S = Q·Kᵀ/√d + mask, online softmax over key tiles, dropout applied to P in
// registers, O = dropout(P)·V written straight into the context [B·S, H] (head h at columns
// [h·d, (h+1)·d)), plus, in training, the row logsumexp L = max + log Σ exp(S − max) (fp32,
// [B·heads·S]) from which backward recomputes P = exp(S − L). Neither P nor dropout(P) is stored.
// Q, K, V are read in place from qkv [B·S, 3H] (Q columns [0,H), K [H,2H), V [2H,3H)).
// Dropout: element (query i, key j) of head (b, h) keeps iff the shared Philox rule keeps index
// ((b·heads + h)·S + i)·S + j of stream kStreamAttnProbs — the unfused kernels' and the CPU
// reference's mask, bit for bit. The softmax normalizer sums the undropped P (dropout follows
// softmax); the 1/(1−p) scale is applied to O at the end. The keep flags of each tile come from
// one of (compile-time, kAttnFwdStoresBits / kAttnFwdLoadsBits in the generated constants):
//   Philox in this kernel (flash::dropout_tile), and with kStoreBits (training, no
//     attn_dropout_checkpoint) also packed into attn_dropout_bits ([B·heads, S, ceil(S/32)] uint32,
//     flash::keep_bits_store), which the backward kernels read;
//   kLoadBits (DSKC_ATTN_MASK=kernel, the default): read from the bits attn_dropout_bits wrote just
//     before this kernel (flash::keep_words_load; each thread tests its flags in the words) — the
//     same flags, so the same output bit for bit.
#pragma once
#include "dskc_config.cuh"
#include "common/dropout.cuh"
#include "common/flash.cuh"

namespace dskc {

struct AttnFlashFwdParams {
  const T* qkv;   // [B*S, 3H]
  const T* mask;  // [B, S] additive (0 keep, large negative drop)
  T* ctx;         // [B*S, H] out: dropout(softmax(Q·Kᵀ/√d + mask))·V
  float* lse;     // [B*heads*S] out: row logsumexp (training only; unused in inference)
  uint32_t* bits; // [B*heads, S, ceil(S/32)] dropout keep bits: out (kStoreBits), in (kLoadBits); else unused
  int batch;
  int seq;
  DropoutArgs rng;
};

// E is the storage type (the config's T); a parameter so nothing here is instantiated for fp32.
// kStages (kAttnFwdStages, the plan's choice): 1 (the default) copies each K/V tile (cp.async,
// unrolled: flash::tile_chunks) between two barriers and waits for it; 2 (DSKC_ATTN_FWD_STAGES=2,
// where it fits: not at head dim 128 nor with the byte flags of DSKC_ATTN_MASK=inline, under 48 KB
// of static shared memory) double-buffers them — the next tile's copies are in flight while the
// warps compute on the current one. Same arithmetic in the same order either way. Two buffers
// measured no faster on the H200 at BERT-Large (v11: 130 registers, 3 resident blocks per SM
// instead of 4, which hid the loads as well). The kernel is issue-bound (ncu: 55% of issue slots at
// (16,512)); straight-line loads cut its PTX by a third (2694 -> 1813 lines at BERT-Large) and its
// time by ~20% (v13). With one K/V buffer and the keep flags from the bits (or no attention
// dropout) it is built for FlashFwdTile::kMinBlocks resident blocks (the plan's launch bounds).
template <typename E, bool kDropout, bool kStoreBits, bool kLoadBits, int kStages = 1>
__device__ __forceinline__ void attn_flash_fwd_impl(const AttnFlashFwdParams& p) {
  static_assert(sizeof(E) == 2, "fused attention runs on fp16/bf16 only");
  static_assert(kHeadDim % 16 == 0 && kHeadDim <= 128, "fused attention needs head dim % 16 == 0, <= 128");
  static_assert(!(kStoreBits || kLoadBits) || kDropout, "keep bits exist only with attention dropout");
  static_assert(!(kStoreBits && kLoadBits), "the forward either draws the keep flags (and may store them) or reads them");
  using F = FlashFwdTile;
  constexpr int kKSteps = kHeadDim / 16;  // k-steps of Q·Kᵀ
  constexpr int kSTiles = F::kKeys / 8;   // n-tiles of S (keys)
  constexpr int kOTiles = kHeadDim / 8;   // n-tiles of O (head dim)
  static_assert(kStages == 1 || kStages == 2, "one or two K/V tile buffers");
  // Dropout flags of the tile: bytes [query][key] where this kernel draws them, else the bits as
  // words [query][key word] (kLoadBits: keep_words_load).
  constexpr bool kByteFlags = kDropout && !kLoadBits;
  static_assert(kStages == 1 || F::smem_bytes(kStages, kByteFlags, kLoadBits) <= 48 * 1024,
                "two K/V buffers need to fit in 48 KB of static shared memory (the plan checks the same)");
  __shared__ __align__(16) E q_s[F::kRows][kFlashStride];
  __shared__ __align__(16) E k_buf[kStages][F::kKeys][kFlashStride];
  __shared__ __align__(16) E v_buf[kStages][F::kKeys][kFlashStride];
  __shared__ float mask_s[F::kKeys];
  __shared__ __align__(16) unsigned char keep_s[kByteFlags ? F::kRows : 1][kByteFlags ? F::kKeys : 1];
  __shared__ uint32_t keep_w[kLoadBits ? F::kRows : 1][kLoadBits ? F::kKeys / 32 : 1];

  const int seq = p.seq;
  const int q0 = blockIdx.x * F::kRows;
  const int bh = blockIdx.y, b = bh / kHeads, h = bh % kHeads;
  const size_t ld = 3 * static_cast<size_t>(kHidden);
  const E* q_g = reinterpret_cast<const E*>(p.qkv) + static_cast<size_t>(b) * seq * ld + h * kHeadDim;
  const E* k_g = q_g + kHidden;
  const E* v_g = q_g + 2 * kHidden;
  const E* mask_row = reinterpret_cast<const E*>(p.mask) + static_cast<size_t>(b) * seq;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wrow = warp * 16;                            // the warp's first row in the tile
  const int rows[2] = {q0 + wrow + g, q0 + wrow + g + 8};  // this thread's two query rows
  // Scores in log2 units (S·log2(e), mask·log2(e) staged that way): P = 2^(S' − max') is one
  // subtraction and an ex2 per score instead of __expf's extra multiply.
  const float scale = flash::kLog2e / sqrtf(static_cast<float>(kHeadDim));

  // (Q's A fragments are re-read from shared memory per key tile rather than held in registers:
  // holding them pushed ptxas into spilling at d = 64.)
  if constexpr (kStages == 2) {  // Q and the first K/V tile: the first cp.async group
    flash::load_tile_async<E, F::kRows, F::kThreads>(q_s, q_g + static_cast<size_t>(q0) * ld, ld, seq - q0);
    flash::load_tile_async<E, F::kKeys, F::kThreads>(k_buf[0], k_g, ld, seq);
    flash::load_tile_async<E, F::kKeys, F::kThreads>(v_buf[0], v_g, ld, seq);
    cp_async_commit();
  } else {
    flash::load_tile<E, F::kRows, F::kThreads>(q_s, q_g + static_cast<size_t>(q0) * ld, ld, seq - q0);
  }

  float o[kOTiles][4];
#pragma unroll
  for (int n = 0; n < kOTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {neg_inf(), neg_inf()};  // running row max (of this quad's row)
  float l[2] = {0.f, 0.f};              // running Σ exp(s − m) over this thread's columns

  // One key tile; `cur` (flash::Buf<0> or <1>) names its K/V buffer at compile time, so the two
  // buffers' shared-memory addresses are constants (a run-time index: 135 registers instead of 130).
  auto key_tile = [&](const int k0, auto cur) {
    __syncthreads();  // every warp is done with the previous K/V tile (its buffer, mask and flags)
    constexpr int buf = decltype(cur)::value;
    const E (*k_s)[kFlashStride] = k_buf[buf];
    const E (*v_s)[kFlashStride] = v_buf[buf];
    if constexpr (kStages == 2) {
      // Prefetch the next tile into the other buffer (free since the barrier above); an empty
      // group at the last tile keeps "all but the newest group" meaning "this tile".
      const int k1 = k0 + F::kKeys;
      if (k1 < seq) {
        flash::load_tile_async<E, F::kKeys, F::kThreads>(k_buf[buf ^ 1], k_g + static_cast<size_t>(k1) * ld, ld, seq - k1);
        flash::load_tile_async<E, F::kKeys, F::kThreads>(v_buf[buf ^ 1], v_g + static_cast<size_t>(k1) * ld, ld, seq - k1);
      }
      cp_async_commit();
    } else {  // copied with cp.async (no register staging), waited for before the barrier below
      flash::load_tile_async<E, F::kKeys, F::kThreads>(k_buf[0], k_g + static_cast<size_t>(k0) * ld, ld, seq - k0);
      flash::load_tile_async<E, F::kKeys, F::kThreads>(v_buf[0], v_g + static_cast<size_t>(k0) * ld, ld, seq - k0);
      cp_async_commit();
    }
    flash::load_mask<E, F::kKeys, F::kThreads>(mask_s, mask_row, k0, seq, flash::kLog2e);
    // k0 is a multiple of kKeys (64 or 32): the tile's rows span whole words of the bits.
    if constexpr (kLoadBits)
      flash::keep_words_load<F::kRows, F::kKeys, F::kThreads>(keep_w, p.bits, bh, seq, q0, k0);
    else if constexpr (kDropout)
      flash::dropout_tile<F::kRows, F::kKeys, F::kThreads>(keep_s, p.rng, bh, seq, q0, k0);
    if constexpr (kStages == 2) cp_async_wait<1>();  // this thread's copies of tile k0 (and Q) landed
    else cp_async_wait<0>();
    __syncthreads();
    if constexpr (kStoreBits) flash::keep_bits_store<F::kRows, F::kKeys, F::kThreads>(p.bits, keep_s, bh, seq, q0, k0);

    // S = Q·Kᵀ for the warp's 16 rows x kKeys keys.
    float s[kSTiles][4];
#pragma unroll
    for (int n = 0; n < kSTiles; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      uint32_t qa[4];
      flash::load_a<E>(qa, q_s, wrow, ks);
#pragma unroll
      for (int n = 0; n < kSTiles; n += 2) {
        uint32_t kb[4];
        flash::load_b_nk<E>(kb, k_s, n * 8, ks);
        flash::mma16816<E>(s[n], qa, kb[0], kb[1]);
        flash::mma16816<E>(s[n + 1], qa, kb[2], kb[3]);
      }
    }

    // Scale + mask (keys >= seq are -inf through mask_s), tile row max over the quad.
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < kSTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = s[n][e] * scale + mask_s[n * 8 + 2 * t + (e & 1)];
        mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
      }
    float base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      base[r] = mx[r] == neg_inf() ? 0.f : mx[r];  // a row with no finite score yet: exp(-inf) = 0
      const float corr = flash::exp2_approx(m[r] - base[r]);  // rescales what was summed under the old max
      m[r] = mx[r];
      l[r] *= corr;
#pragma unroll
      for (int n = 0; n < kOTiles; ++n) {
        o[n][2 * r] *= corr;
        o[n][2 * r + 1] *= corr;
      }
    }
    // P = exp(S − max); l sums it before dropout; dropout zeroes dropped elements for P·V.
    // keys n·8 + 2t, + 1 of the tile are bits (n % 4)·8 + 2t, + 1 of word n / 4 of the row: each
    // word shifted by 2t once, the bit tests take compile-time masks.
    uint32_t kw[2][kLoadBits ? F::kKeys / 32 : 1];
    if constexpr (kLoadBits)
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int w = 0; w < F::kKeys / 32; ++w) kw[r][w] = keep_w[wrow + g + 8 * r][w] >> (2 * t);
#pragma unroll
    for (int n = 0; n < kSTiles; ++n)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float p0 = flash::exp2_approx(s[n][2 * r] - base[r]), p1 = flash::exp2_approx(s[n][2 * r + 1] - base[r]);
        l[r] += p0 + p1;
        if constexpr (kLoadBits) {
          const uint32_t w = kw[r][n / 4];
          p0 = (w & (1u << ((n % 4) * 8))) ? p0 : 0.f;
          p1 = (w & (2u << ((n % 4) * 8))) ? p1 : 0.f;
        } else if constexpr (kDropout) {
          const unsigned char* keep = &keep_s[wrow + g + 8 * r][n * 8 + 2 * t];
          p0 = keep[0] ? p0 : 0.f;
          p1 = keep[1] ? p1 : 0.f;
        }
        s[n][2 * r] = p0;
        s[n][2 * r + 1] = p1;
      }

    // O += dropout(P)·V: P's accumulator fragments are the A operand (keys = k dimension).
#pragma unroll
    for (int kk = 0; kk < F::kKeys / 16; ++kk) {
      uint32_t a[4];
      flash::c_to_a<E, kSTiles>(a, s, kk);
#pragma unroll
      for (int n = 0; n < kOTiles; n += 2) {
        uint32_t vb[4];
        flash::load_b_kn<E>(vb, v_s, n * 8, kk);
        flash::mma16816<E>(o[n], a, vb[0], vb[1]);
        flash::mma16816<E>(o[n + 1], a, vb[2], vb[3]);
      }
    }
  };
  if constexpr (kStages == 2) {
    for (int k0 = 0; k0 < seq; k0 += 2 * F::kKeys) {
      key_tile(k0, flash::Buf<0>{});
      if (k0 + F::kKeys < seq) key_tile(k0 + F::kKeys, flash::Buf<1>{});
    }
  } else {
    for (int k0 = 0; k0 < seq; k0 += F::kKeys) key_tile(k0, flash::Buf<0>{});
  }

  // Normalize, write O and the logsumexp.
  flash::store_rows<E, kDropout, kOTiles>(reinterpret_cast<E*>(p.ctx), p.lse, l, m, rows, seq, b, h, bh, t,
                                          [&](int n, int r) { return make_float2(o[n][2 * r], o[n][2 * r + 1]); });
}

}  // namespace dskc
