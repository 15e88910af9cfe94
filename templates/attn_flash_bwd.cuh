// attn_flash_bwd_dkdv / attn_flash_bwd_dq: fused attention backward without atomics (every output
// element is written by exactly one thread, in a fixed summation order, so reruns are bitwise
// identical). Both recompute P = exp(S/… + mask − L) from Q, K and the forward's logsumexp L,
// take the dropout mask Z from the keep bits attn_dropout_bits (one 32-bit load per 32 flags; no
// Philox here): saved by the forward, or with attn_dropout_checkpoint rewritten into the workspace
// by the standalone attn_dropout_bits kernel just before these kernels (the same words either way),
// and use D = rowsum(dO ⊙ O) (attn_flash_bwd_dot):
//   dP_drop = dO·Vᵀ,  dP = dP_drop ⊙ Z/(1−p),  dS = P ⊙ (dP − D)   (gradient of the masked,
//   scaled scores), dV = (P ⊙ Z)ᵀ·dO / (1−p),  dK = dSᵀ·Q /√d,  dQ = dS·K /√d.
// attn_flash_bwd_dkdv: a block owns 16·kWarps keys of one (batch, head) and loops over query
// tiles, computing the transposed scores Sᵀ = K·Qᵀ so that dK and dV accumulate in registers.
// attn_flash_bwd_dq: a block owns 16·kWarps queries and loops over key tiles (DSKC_ATTN_DQ=kernel).
// Default (FlashDq kDqGemm): attn_flash_bwd_dkdv also stores dSᵀ (rounded to E, the operand
// attn_flash_bwd_dq would feed its mma) into grad_scores, and the runtime's batched GEMM
// gemm_attn_dq computes dQ = dS·K/√d from it: P and dS once, no atomics, bitwise reproducible.
// stochastic_mode's attn_flash_bwd_dkdvdq (FlashDq kDqAtomic): attn_flash_bwd_dkdv's body, which per
// query tile also stores dSᵀ (rounded to E, as attn_flash_bwd_dq rounds dS) in shared memory and
// adds the tile's dQ share dS·K over the block's keys, fp32, into the accumulator dq_acc [B·S, H]
// (zeroed by attn_flash_bwd_dot) with vector reductions: one kernel computes P and dS once instead
// of twice. The order in which the key tiles' shares meet in dq_acc varies run to run (dK and dV
// are still bitwise those of attn_flash_bwd_dkdv). The last key tile of a head to finish (a ticket
// per head, also zeroed by attn_flash_bwd_dot) writes the head's dQ = acc/√d into grad_qkv.
// Results go straight into grad_qkv [B·S, 3H] (dQ columns [0,H), dK [H,2H), dV [2H,3H), head h
// at [h·d, (h+1)·d) of each), overwriting (as the unfused GEMMs with beta = 0 do).
// Out-of-range rows of partial tiles: K/V/Q/dO rows >= S are zero-filled in shared memory, keys
// >= S get mask -inf (P = 0) and queries >= S get L = +inf (P = 0) and D = 0; nothing >= S is
// read from or written to global memory.
#pragma once
#include "dskc_config.cuh"
#include "common/flash.cuh"

namespace dskc {

struct AttnFlashBwdParams {
  const T* qkv;      // [B*S, 3H] Q, K, V
  const T* mask;     // [B, S] additive
  const T* dctx;     // [B*S, H] dO
  const float* lse;  // [B*heads*S] forward logsumexp L
  const float* dot;  // [B*heads*S] D = rowsum(dO ⊙ O)
  const uint32_t* bits;  // [B*heads, S, ceil(S/32)] dropout keep bits (kDropout only; else unused)
  T* dqkv;           // [B*S, 3H] out: dQ | dK | dV
  float* dq_acc;         // [B*S, H] fp32 dQ·√d accumulator, zeroed by attn_flash_bwd_dot (kDqAtomic only)
  uint32_t* dq_tickets;  // [B*heads] key tiles done per head, zeroed by attn_flash_bwd_dot (kDqAtomic only)
  T* ds;                 // [B*heads, S, kSeqPad-padded S] out: dSᵀ, row = key, column = query (kDqGemm only)
  int batch;
  int seq;
};

// attn_flash_bwd_dkdvdq's last step, run by the last key tile of head (b, h) to finish: the head's
// dQ = acc/√d from the fp32 accumulator (read from L2: __ldcg) into grad_qkv, 4 columns per step.
// Out of line on purpose: inlined, ptxas (NVRTC 13.0, sm_90, fp16, d = 64) gave the whole kernel 243
// registers instead of 165, i.e. 2 resident blocks per SM instead of 3.
template <typename E>
__device__ __noinline__ void attn_flash_bwd_dq_write(const float* acc, E* dqkv, int seq, int b, int h) {
  constexpr int kQuads = kHeadDim / 4;  // 16-byte loads, 8-byte stores
  const size_t ld = 3 * static_cast<size_t>(kHidden);
  const float scale = 1.f / sqrtf(static_cast<float>(kHeadDim));
  const float* src = acc + static_cast<size_t>(b) * seq * kHidden + h * kHeadDim;
  E* dst = dqkv + static_cast<size_t>(b) * seq * ld + h * kHeadDim;
  for (int c = threadIdx.x; c < seq * kQuads; c += FlashBwdTile::kThreads) {
    const int i = c / kQuads, k = (c % kQuads) * 4;
    const float4 v = __ldcg(reinterpret_cast<const float4*>(src + static_cast<size_t>(i) * kHidden + k));
    *reinterpret_cast<uint2*>(dst + static_cast<size_t>(i) * ld + k) =
        make_uint2(flash::pack2<E>(v.x * scale, v.y * scale), flash::pack2<E>(v.z * scale, v.w * scale));
  }
}

template <typename E, bool kDropout, FlashDq kDq = kDqPerQueryTile>
__device__ __forceinline__ void attn_flash_bwd_dkdv_impl(const AttnFlashBwdParams& p) {
  static_assert(sizeof(E) == 2, "fused attention runs on fp16/bf16 only");
  static_assert(kHeadDim % 16 == 0 && kHeadDim <= 128, "fused attention needs head dim % 16 == 0, <= 128");
  using F = FlashBwdTile;
  constexpr int kQTiles = F::kInner / 8;  // n-tiles of Sᵀ (queries)
  // Straight-line tile loads (flash::block_for / tile_chunks unrolled): with the tiles copied by
  // cp.async (no staging registers) they fit the 168-register cap without spilling; with run-time
  // loops the kernel ran ~6% slower at BERT-Large (v15).
  constexpr bool kUnrollLoads = true;
  constexpr int kDTiles = kHeadDim / 8;   // n-tiles of dK, dV (head dim)
  __shared__ __align__(16) E k_s[F::kRows][kFlashStride];
  __shared__ __align__(16) E v_s[F::kRows][kFlashStride];
  __shared__ __align__(16) E q_s[F::kInner][kFlashStride];
  __shared__ __align__(16) E do_s[F::kInner][kFlashStride];
  __shared__ float mask_s[F::kRows];
  __shared__ float lse_s[F::kInner];
  __shared__ float dot_s[F::kInner];
  // Dropout keep bits of the tile, [query][key word] (keep_words_load); with kDqAtomic the same
  // bytes then hold dSᵀ [key][query] for dQ (a barrier separates them).
  constexpr int kDsStride = F::kInner + 8;  // +8: 16-byte aligned ldmatrix rows on distinct banks
  constexpr int kKeyWords = F::kRows / 32;
  constexpr int kKeepBytes = kDropout ? F::kInner * kKeyWords * 4 : 4;
  constexpr int kDsBytes = kDq == kDqAtomic ? F::kRows * kDsStride * static_cast<int>(sizeof(E)) : 0;
  __shared__ __align__(16) unsigned char keep_ds_s[kKeepBytes > kDsBytes ? kKeepBytes : kDsBytes];
  const auto keep_w = reinterpret_cast<uint32_t (*)[kKeyWords]>(keep_ds_s);
  const auto ds_s = reinterpret_cast<E (*)[kDsStride]>(keep_ds_s);

  const int seq = p.seq;
  const int j0 = blockIdx.x * F::kRows;
  const int bh = blockIdx.y, b = bh / kHeads, h = bh % kHeads;
  const size_t ld = 3 * static_cast<size_t>(kHidden);
  const E* q_g = reinterpret_cast<const E*>(p.qkv) + static_cast<size_t>(b) * seq * ld + h * kHeadDim;
  const E* k_g = q_g + kHidden;
  const E* v_g = q_g + 2 * kHidden;
  const E* do_g = reinterpret_cast<const E*>(p.dctx) + static_cast<size_t>(b) * seq * kHidden + h * kHeadDim;
  const float* lse_g = p.lse + static_cast<size_t>(bh) * seq;
  const float* dot_g = p.dot + static_cast<size_t>(bh) * seq;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wrow = warp * 16;
  const float scale = 1.f / sqrtf(static_cast<float>(kHeadDim));
  // P = 2^(Sᵀ·scale·log2(e) + mask·log2(e) − L·log2(e)): mask_s and lse_s are staged in log2 units,
  // one multiply per score fewer than __expf.
  const float scale2 = scale * flash::kLog2e;

  // Tiles by cp.async (no register staging): every chunk of K and V (and below of Q and dO) in
  // flight at once, completed by the cp_async_wait before each tile's barrier.
  using flash::load_tile_async;
  load_tile_async<E, F::kRows, F::kThreads, kUnrollLoads>(k_s, k_g + static_cast<size_t>(j0) * ld, ld, seq - j0);
  load_tile_async<E, F::kRows, F::kThreads, kUnrollLoads>(v_s, v_g + static_cast<size_t>(j0) * ld, ld, seq - j0);
  flash::load_mask<E, F::kRows, F::kThreads, kUnrollLoads>(mask_s, reinterpret_cast<const E*>(p.mask) + static_cast<size_t>(b) * seq,
                                             j0, seq, flash::kLog2e);

  float dk[kDTiles][4], dv[kDTiles][4];
#pragma unroll
  for (int n = 0; n < kDTiles; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.f;

  for (int i0 = 0; i0 < seq; i0 += F::kInner) {
    __syncthreads();  // previous Q/dO tile consumed (and, first time, K/V/mask visible below)
    load_tile_async<E, F::kInner, F::kThreads, kUnrollLoads>(q_s, q_g + static_cast<size_t>(i0) * ld, ld, seq - i0);
    load_tile_async<E, F::kInner, F::kThreads, kUnrollLoads>(do_s, do_g + static_cast<size_t>(i0) * kHidden, kHidden,
                                                             seq - i0);
    cp_async_commit();
    for (int r = threadIdx.x; r < F::kInner; r += F::kThreads) {
      const bool in = i0 + r < seq;
      lse_s[r] = in ? lse_g[i0 + r] * flash::kLog2e : __int_as_float(0x7f800000);  // +inf: P = 0, missing queries
      dot_s[r] = in ? dot_g[i0 + r] : 0.f;
    }
    // j0 is a multiple of kRows (64 or 32): the key range spans whole words of the bits.
    if constexpr (kDropout) flash::keep_words_load<F::kInner, F::kRows, F::kThreads, kUnrollLoads>(keep_w, p.bits, bh, seq, i0, j0);
    cp_async_wait<0>();
    __syncthreads();

    // Sᵀ = K·Qᵀ and dPᵀ_drop = V·dOᵀ for the warp's 16 keys x F::kInner queries.
    float st[kQTiles][4], dpt[kQTiles][4];
    flash::mma_pair_nt<E, kQTiles>(st, dpt, k_s, v_s, q_s, do_s, wrow);

    // Element (key row jr, query column ic): P, the mask Z, dS. st <- P ⊙ Z (unscaled), dpt <- dS.
    // The warp's 16 keys lie in one word of each query row: bits (wrow % 32) + g and + 8.
#pragma unroll
    for (int n = 0; n < kQTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int jr = wrow + g + 8 * (e >> 1), ic = n * 8 + 2 * t + (e & 1);
        const float pv = flash::exp2_approx(st[n][e] * scale2 + mask_s[jr] - lse_s[ic]);
        float dp = dpt[n][e];
        float pz = pv;
        if constexpr (kDropout) {
          const bool keep = (keep_w[ic][wrow / 32] >> (wrow % 32 + g + 8 * (e >> 1))) & 1u;
          pz = keep ? pv : 0.f;
          dp = keep ? dp * kAttnDropoutScale : 0.f;
        }
        st[n][e] = pz;
        dpt[n][e] = pv * (dp - dot_s[ic]);
      }
    if constexpr (kDq == kDqAtomic) {
      if constexpr (kDropout) __syncthreads();  // every warp is done with keep_w, which ds_s overwrites
      flash::store_c<E, kQTiles, kDsStride>(ds_s, dpt, wrow);
    }

    // kDqGemm: dS rounded to E once, packed as c_to_a packs it ([n][r]: row g + 8r, columns 2t, 2t + 1),
    // for both the dK product and the dSᵀ stores after it (16 registers instead of 32 floats kept live).
    uint32_t ds_pk[kDq == kDqGemm ? kQTiles : 1][2];
    if constexpr (kDq == kDqGemm) {
#pragma unroll
      for (int n = 0; n < kQTiles; ++n) {
        ds_pk[n][0] = flash::pack2<E>(dpt[n][0], dpt[n][1]);
        ds_pk[n][1] = flash::pack2<E>(dpt[n][2], dpt[n][3]);
      }
    }

    // dV += (P ⊙ Z)ᵀ·dO and dK += dSᵀ·Q: queries are the k dimension; dO and Q are stored [k][n].
#pragma unroll
    for (int kk = 0; kk < F::kInner / 16; ++kk) {
      uint32_t pa[4], sa[4];
      flash::c_to_a<E, kQTiles>(pa, st, kk);
      if constexpr (kDq == kDqGemm) {
        sa[0] = ds_pk[2 * kk][0];
        sa[1] = ds_pk[2 * kk][1];
        sa[2] = ds_pk[2 * kk + 1][0];
        sa[3] = ds_pk[2 * kk + 1][1];
      } else {
        flash::c_to_a<E, kQTiles>(sa, dpt, kk);
      }
#pragma unroll
      for (int n = 0; n < kDTiles; n += 2) {
        uint32_t ob[4], qb[4];
        flash::load_b_kn<E>(ob, do_s, n * 8, kk);
        flash::mma16816<E>(dv[n], pa, ob[0], ob[1]);
        flash::mma16816<E>(dv[n + 1], pa, ob[2], ob[3]);
        flash::load_b_kn<E>(qb, q_s, n * 8, kk);
        flash::mma16816<E>(dk[n], sa, qb[0], qb[1]);
        flash::mma16816<E>(dk[n + 1], sa, qb[2], qb[3]);
      }
    }


    if constexpr (kDq == kDqGemm) {
      // dSᵀ rows j (keys) of this warp, columns i0.. (queries): pairs of queries (i, i + 1), i even,
      // written when i < S (i + 1 = S, for odd S, lands in the row's padding, which no GEMM reads).
      // After the dK/dV products (P ⊙ Z no longer live), one 4-byte store per pair: staging them
      // through shared memory for 16-byte stores cost more registers than the cap allows.
      const int sp = (seq + kSeqPad - 1) / kSeqPad * kSeqPad;
      E* ds_bh = reinterpret_cast<E*>(p.ds) + static_cast<size_t>(bh) * seq * sp;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int j = j0 + wrow + g + 8 * r;
        if (j >= seq) continue;
        E* row = ds_bh + static_cast<size_t>(j) * sp + i0 + 2 * t;
#pragma unroll
        for (int n = 0; n < kQTiles; ++n)
          if (i0 + n * 8 + 2 * t < seq) *reinterpret_cast<uint32_t*>(row + n * 8) = ds_pk[n][r];
      }
    }

    if constexpr (kDq == kDqAtomic) {
      __syncthreads();  // dSᵀ of all the block's keys in ds_s
      // dq_acc[queries i0 + wrow .. + 16) += dS·K over the block's keys (F::kInner = 16·kWarps: warp w
      // takes the tile's queries 16w..), 16 columns at a time, into fp32 vector reductions.
      static_assert(F::kInner == 16 * F::kWarps, "a warp's dQ share is 16 queries of the tile");
      uint32_t sa[F::kRows / 16][4];
#pragma unroll
      for (int ks = 0; ks < F::kRows / 16; ++ks) flash::load_a_km<E, kDsStride>(sa[ks], ds_s, wrow, ks);
      const int i = i0 + wrow + g;
      float* dq_row = p.dq_acc + (static_cast<size_t>(b) * seq + i) * kHidden + h * kHeadDim + 2 * t;
#pragma unroll
      for (int n = 0; n < kDTiles; n += 2) {
        float acc[2][4] = {};
#pragma unroll
        for (int ks = 0; ks < F::kRows / 16; ++ks) {
          uint32_t kb[4];
          flash::load_b_kn<E>(kb, k_s, n * 8, ks);
          flash::mma16816<E>(acc[0], sa[ks], kb[0], kb[1]);
          flash::mma16816<E>(acc[1], sa[ks], kb[2], kb[3]);
        }
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          if (i < seq) flash::red_add2(dq_row + (n + u) * 8, acc[u][0], acc[u][1]);
          if (i + 8 < seq) flash::red_add2(dq_row + 8 * kHidden + (n + u) * 8, acc[u][2], acc[u][3]);
        }
      }
    }
  }

  // dK = scale·dSᵀ·Q, dV = (1/(1−p))·(P ⊙ Z)ᵀ·dO into grad_qkv.
  const float v_scale = kDropout ? kAttnDropoutScale : 1.f;
  E* dk_g = reinterpret_cast<E*>(p.dqkv) + static_cast<size_t>(b) * seq * ld + kHidden + h * kHeadDim + 2 * t;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int j = j0 + wrow + g + 8 * r;
    if (j >= seq) continue;
    E* row = dk_g + static_cast<size_t>(j) * ld;
#pragma unroll
    for (int n = 0; n < kDTiles; ++n) {
      flash::store2<E>(row + n * 8, dk[n][2 * r] * scale, dk[n][2 * r + 1] * scale);
      flash::store2<E>(row + kHidden + n * 8, dv[n][2 * r] * v_scale, dv[n][2 * r + 1] * v_scale);
    }
  }

  if constexpr (kDq == kDqAtomic) {
    // The last key tile of head bh to finish writes the head's dQ = acc/√d into grad_qkv. The
    // programming guide's last-block pattern: every thread fences its reductions before thread 0
    // takes a ticket; the last block fences again and reads the sums from L2 (__ldcg, not L1).
    __shared__ bool last_s;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last_s = atomicAdd(p.dq_tickets + bh, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last_s) return;
    __threadfence();
    attn_flash_bwd_dq_write<E>(p.dq_acc, reinterpret_cast<E*>(p.dqkv), seq, b, h);
  }
}

template <typename E, bool kDropout>
__device__ __forceinline__ void attn_flash_bwd_dq_impl(const AttnFlashBwdParams& p) {
  static_assert(sizeof(E) == 2, "fused attention runs on fp16/bf16 only");
  static_assert(kHeadDim % 16 == 0 && kHeadDim <= 128, "fused attention needs head dim % 16 == 0, <= 128");
  using F = FlashBwdTile;
  constexpr int kKTiles = F::kInner / 8;  // n-tiles of S (keys)
  constexpr int kDTiles = kHeadDim / 8;   // n-tiles of dQ
  __shared__ __align__(16) E q_s[F::kRows][kFlashStride];
  __shared__ __align__(16) E do_s[F::kRows][kFlashStride];
  __shared__ __align__(16) E k_s[F::kInner][kFlashStride];
  __shared__ __align__(16) E v_s[F::kInner][kFlashStride];
  __shared__ float mask_s[F::kInner];
  __shared__ uint32_t keep_w[kDropout ? F::kRows : 1][kDropout ? F::kInner / 32 : 1];  // [query][key word] keep bits

  const int seq = p.seq;
  const int i0 = blockIdx.x * F::kRows;
  const int bh = blockIdx.y, b = bh / kHeads, h = bh % kHeads;
  const size_t ld = 3 * static_cast<size_t>(kHidden);
  const E* q_g = reinterpret_cast<const E*>(p.qkv) + static_cast<size_t>(b) * seq * ld + h * kHeadDim;
  const E* k_g = q_g + kHidden;
  const E* v_g = q_g + 2 * kHidden;
  const E* do_g = reinterpret_cast<const E*>(p.dctx) + static_cast<size_t>(b) * seq * kHidden + h * kHeadDim;
  const E* mask_row = reinterpret_cast<const E*>(p.mask) + static_cast<size_t>(b) * seq;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wrow = warp * 16;
  const int rows[2] = {i0 + wrow + g, i0 + wrow + g + 8};
  const float scale = 1.f / sqrtf(static_cast<float>(kHeadDim));

  flash::load_tile<E, F::kRows, F::kThreads>(q_s, q_g + static_cast<size_t>(i0) * ld, ld, seq - i0);
  flash::load_tile<E, F::kRows, F::kThreads>(do_s, do_g + static_cast<size_t>(i0) * kHidden, kHidden, seq - i0);
  float lse[2], dot[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const bool in = rows[r] < seq;
    lse[r] = in ? p.lse[static_cast<size_t>(bh) * seq + rows[r]] : __int_as_float(0x7f800000);
    dot[r] = in ? p.dot[static_cast<size_t>(bh) * seq + rows[r]] : 0.f;
  }

  float dq[kDTiles][4];
#pragma unroll
  for (int n = 0; n < kDTiles; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.f;

  for (int j0 = 0; j0 < seq; j0 += F::kInner) {
    __syncthreads();
    flash::load_tile<E, F::kInner, F::kThreads>(k_s, k_g + static_cast<size_t>(j0) * ld, ld, seq - j0);
    flash::load_tile<E, F::kInner, F::kThreads>(v_s, v_g + static_cast<size_t>(j0) * ld, ld, seq - j0);
    flash::load_mask<E, F::kInner, F::kThreads>(mask_s, mask_row, j0, seq);
    // j0 is a multiple of kInner (64 or 32): the key range spans whole words of the bits.
    if constexpr (kDropout) flash::keep_words_load<F::kRows, F::kInner, F::kThreads>(keep_w, p.bits, bh, seq, i0, j0);
    __syncthreads();

    // S = Q·Kᵀ and dP_drop = dO·Vᵀ for the warp's 16 queries x kInner keys.
    float s[kKTiles][4], dp[kKTiles][4];
    flash::mma_pair_nt<E, kKTiles>(s, dp, q_s, do_s, k_s, v_s, wrow);

    // dS = P ⊙ (dP ⊙ Z/(1−p) − D), written over s.
#pragma unroll
    for (int n = 0; n < kKTiles; ++n)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int jc = n * 8 + 2 * t;
        const float p0 = __expf(s[n][2 * r] * scale + mask_s[jc] - lse[r]);
        const float p1 = __expf(s[n][2 * r + 1] * scale + mask_s[jc + 1] - lse[r]);
        float d0 = dp[n][2 * r], d1 = dp[n][2 * r + 1];
        if constexpr (kDropout) {
          const uint32_t w = keep_w[wrow + g + 8 * r][jc / 32] >> (jc % 32);  // keys jc, jc + 1
          d0 = (w & 1u) ? d0 * kAttnDropoutScale : 0.f;
          d1 = (w & 2u) ? d1 * kAttnDropoutScale : 0.f;
        }
        s[n][2 * r] = p0 * (d0 - dot[r]);
        s[n][2 * r + 1] = p1 * (d1 - dot[r]);
      }

    // dQ += dS·K: keys are the k dimension; K is stored [k][n].
#pragma unroll
    for (int kk = 0; kk < F::kInner / 16; ++kk) {
      uint32_t sa[4];
      flash::c_to_a<E, kKTiles>(sa, s, kk);
#pragma unroll
      for (int n = 0; n < kDTiles; n += 2) {
        uint32_t kb[4];
        flash::load_b_kn<E>(kb, k_s, n * 8, kk);
        flash::mma16816<E>(dq[n], sa, kb[0], kb[1]);
        flash::mma16816<E>(dq[n + 1], sa, kb[2], kb[3]);
      }
    }
  }

  E* dq_g = reinterpret_cast<E*>(p.dqkv) + static_cast<size_t>(b) * seq * ld + h * kHeadDim + 2 * t;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (rows[r] >= seq) continue;
    E* row = dq_g + static_cast<size_t>(rows[r]) * ld;
#pragma unroll
    for (int n = 0; n < kDTiles; ++n) flash::store2<E>(row + n * 8, dq[n][2 * r] * scale, dq[n][2 * r + 1] * scale);
  }
}

}  // namespace dskc
