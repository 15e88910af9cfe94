// attn_flash_fwd on Hopper's warpgroup MMA (sm_90a; LayerPlan::attn_fwd_wgmma: fp16/bf16, head dim 64,
// the keep flags from the bits of attn_dropout_bits_fwd or no attention dropout). The same mathematics
// and outputs as attn_flash_fwd_impl<E, kDropout, false, kDropout> (templates/attn_flash_fwd.cuh), with
// the products on wgmma instead of mma.sync:
//   S = Q·Kᵀ                (A = Q, B = K: both K-major 64 x 64 tiles in shared memory)
//   P = 2^(S·scale·log2 e + mask·log2 e − max), online softmax over the key tiles, dropout from the bits
//   O += (P ⊙ Z)·V          (A = P ⊙ Z from registers, B = V read N-major)
//   context = O / l (· 1/(1−p)), L = max·ln 2 + ln l (training) — the same formulas as the mma.sync kernel.
// Why: the mma.sync kernel is issue-bound (bench/NOTES.md v13: ldmatrix traffic of every warp over the
// K and V tiles, the per-tile barriers); here the tensor core reads K and V once per warpgroup, and
// within a warpgroup the next tile's S product and this tile's P·V product run while the threads do the
// softmax arithmetic (FlashAttention-3's intra-warpgroup pipelining):
//   tile it: issue S_it = Q·K_itᵀ, issue O += P_{it−1}·V_{it−1}; wait for S_it; softmax(S_it) (the P·V
//   product still runs); wait for it; rescale O by the new max; pack P_it as the next A operand.
// Block: one warpgroup of 128 threads, 64 query rows q0 .. q0 + 63 of one (batch, head) (the mma.sync
// kernel's grid). Thread 0 copies by TMA the Q tile and the first kStages K/V tiles (3-D tensor map
// [B][S][3H]: rows past the sequence's end read as zero); after that, the last of the four warps done
// with a stage (its P·V product is complete; a shared counter per stage) refills it with the tile
// kStages later. The block stages its row's key mask (fp32, log2 units, −inf past S: P = 0 there; those
// K/V rows read as zeros) in shared memory once. Each thread loads its two rows' keep words of a tile
// from global memory before issuing that tile's products and first uses them after S is complete (a use
// before would stall the warp on the loads ahead of its wgmmas; bench/NOTES.md v20 (d)); up to 128 keys
// a whole tile ahead (kLoadAhead, v39). Query rows past S are not stored.
#pragma once
#include "dskc_config.cuh"
#include "common/types.cuh"
#include "common/sm90.cuh"
#include "common/flash.cuh"

namespace dskc {

// Shapes and the shared-memory map (byte offsets from a 1024-aligned base); compiler/plan.cpp mirrors
// kStages and smem_bytes (flash_wg_fwd_smem_bytes there; a static_assert in the generated source).
template <int kStages_>
struct FlashWgFwdTile {
  static constexpr int kThreads = 128;
  static constexpr int kRows = 64;  // queries per block
  static constexpr int kKeys = 64;  // keys per tile
  static constexpr int kStages = kStages_;
  static_assert(kStages >= 2 && kStages <= 4, "two to four K/V stages");
  static constexpr int kTileBytes = 64 * 128;                   // a 64 x 64 16-bit tile, 128-byte rows
  static constexpr int kQ = 0;                                  // the block's Q tile
  static constexpr int kStage0 = kQ + kTileBytes;               // stage s: K, V tiles
  static constexpr int kMaskKeys = (kMaxSeq + kKeys - 1) / kKeys * kKeys;  // the key mask of the whole row
  static constexpr int kMask0 = kStage0 + kStages * 2 * kTileBytes;        // fp32, × log2 e, −inf past S
  static constexpr int kCount0 = kMask0 + kMaskKeys * 4;                    // per stage: warps done with it (mod 4)
  static constexpr int kBars0 = kCount0 + (4 * kStages + 7) / 8 * 8;  // mbarriers: 8-byte aligned
  static constexpr int kBars = kStages + 1;                           // full[s], q
  static_assert(kBars0 % 8 == 0, "mbarriers are 8-byte aligned");
  static constexpr int smem_bytes = 1024 + kBars0 + 8 * kBars;  // + 1024: aligning the dynamic base
  // Resident blocks per SM the kernel is built for (__launch_bounds__): 4 with two stages (42.5 KB of
  // shared memory at max_seq 512, <= 128 registers), 3 with three (58.5 KB, <= 168 registers). Two
  // stages measured faster (bench/NOTES.md v21): the fourth block hides the loads better than a third stage.
  static constexpr int kMinBlocks = kStages == 2 ? 4 : 3;
};

struct AttnFlashFwdWgParams {
  sm90::TmaDescriptor qkv;  // [B][S][3H], 64 x 64 x 1 boxes (Q, K, V tiles of one head)
  sm90::TmaDescriptor ctx_out;  // [B][S][H] context, 64 x 64 x 1 boxes: the O store (kAttnTmaStores)
  const T* mask;            // [B, S] additive (0 keep, large negative drop)
  T* ctx;                   // [B*S, H] out
  float* lse;               // [B*heads*S] out: row logsumexp (training only)
  const uint32_t* bits;     // [B*heads, S, ceil(S/32)] dropout keep bits (kDropout only)
  int batch;
  int seq;
};

template <typename E, bool kDropout, int kStages>
__device__ __forceinline__ void attn_flash_fwd_wgmma_impl(const AttnFlashFwdWgParams& p) {
#if DSKC_SM90A
  static_assert(sizeof(E) == 2, "wgmma attention runs on fp16/bf16 only");
  static_assert(kHeadDim == 64, "the wgmma attention forward is built for head dim 64 (128-byte tile rows)");
  using F = FlashWgFwdTile<kStages>;
  extern __shared__ unsigned char attn_wg_smem[];
  const uint32_t base = (sm90::smem_u32(attn_wg_smem) + 1023u) & ~1023u;
  unsigned char* const smem = attn_wg_smem + (base - sm90::smem_u32(attn_wg_smem));  // at the aligned base
  int* const done_s = reinterpret_cast<int*>(smem + F::kCount0);
  float* const mask_s = reinterpret_cast<float*>(smem + F::kMask0);
  auto full = [&](int s) { return base + F::kBars0 + 8u * s; };
  const uint32_t q_bar = base + F::kBars0 + 8u * kStages;
  const uint32_t q_tile = base + F::kQ;
  auto k_tile = [&](int it) { return base + F::kStage0 + 2 * (it % kStages) * F::kTileBytes; };

  const int seq = p.seq;
  const int q0 = blockIdx.x * F::kRows;
  const int bh = blockIdx.y, b = bh / kHeads, h = bh % kHeads;
  const int tiles = (seq + F::kKeys - 1) / F::kKeys;
  // K and V of key tile `it` into stage it % kStages (one thread).
  auto load_stage = [&](int it) {
    const uint32_t kt = k_tile(it), bar = full(it % kStages);
    sm90::mbar_arrive_expect_tx(bar, 2 * F::kTileBytes);
    sm90::tma_load_3d(kt, &p.qkv, bar, kHidden + h * kHeadDim, it * F::kKeys, b);
    sm90::tma_load_3d(kt + F::kTileBytes, &p.qkv, bar, 2 * kHidden + h * kHeadDim, it * F::kKeys, b);
  };
  // Thread (warp w, lane 4g + t) holds rows 16w + g and + 8 of the block, columns 8j + 2t (+1) of each
  // 64-key tile (j = 0 .. 7): the wgmma accumulator layout of S and of O.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int rows[2] = {q0 + 16 * warp + g, q0 + 16 * warp + g + 8};
  // Scores in log2 units (S·log2(e), mask·log2(e)): P = 2^(S' − max') as in the mma.sync kernel.
  const float scale = flash::kLog2e / sqrtf(static_cast<float>(kHeadDim));
  const int words = (seq + 31) / 32;
  const uint32_t* bits_r[2];
#pragma unroll
  for (int r = 0; r < 2; ++r)
    bits_r[r] = kDropout ? p.bits + (static_cast<size_t>(bh) * seq + min(rows[r], seq - 1)) * words : nullptr;

  uint32_t kw[2][kDropout ? 2 : 1];  // the two rows' keep words of the tile the next softmax reads
  // Keep words of key tile `it`. Sequences of at most two key tiles (kLoadAhead) load them a whole
  // tile ahead of their use: tile 0's before the block's prologue, tile 1's right after softmax(0) has
  // read tile 0's, so the global load's latency runs under the TMA waits and the products instead of
  // stalling the first softmax (attn_flash_fwd −14% at (64,128)). Longer ones issue each tile's loads
  // just before its products: loading ahead measured 4% slower at (16,512) (bench/NOTES.md v39).
  constexpr bool kLoadAhead = kMaxSeq <= 2 * F::kKeys;
  auto load_tile_values = [&](int it) {
    const int k0 = it * F::kKeys;
    if constexpr (kDropout)
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int w = 0; w < 2; ++w) kw[r][w] = bits_r[r][min(k0 / 32 + w, words - 1)];
  };
  if constexpr (kLoadAhead) load_tile_values(0);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      sm90::mbar_init(full(s), 1);
      done_s[s] = 0;
    }
    sm90::mbar_init(q_bar, 1);
    sm90::mbar_init_fence();
    sm90::tma_prefetch_descriptor(&p.qkv);
    sm90::mbar_arrive_expect_tx(q_bar, F::kTileBytes);
    sm90::tma_load_3d(q_tile, &p.qkv, q_bar, h * kHeadDim, q0, b);
    for (int it = 0; it < tiles && it < kStages; ++it) load_stage(it);
  }
  {
    // The row's mask in log2 units, once per block (the mma.sync kernel stages it per tile).
    const E* mask_row = reinterpret_cast<const E*>(p.mask) + static_cast<size_t>(b) * seq;
    for (int k = threadIdx.x; k < tiles * F::kKeys; k += F::kThreads)
      mask_s[k] = k < seq ? to_f(mask_row[k]) * flash::kLog2e : neg_inf();
  }
  __syncthreads();  // barriers initialized, mask staged

  float o[32], s[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i] = 0.f;
  float m[2] = {neg_inf(), neg_inf()};  // running row max (log2 units)
  float l[2] = {0.f, 0.f};              // running Σ P over this thread's columns (before dropout)
  uint32_t pa[4][4];                    // P ⊙ Z of the previous tile as A fragments, per k16 step of keys
  auto issue_s = [&](int it) {
    sm90::mbar_wait(full(it % kStages), (it / kStages) & 1u);
    const uint64_t qd = sm90::wgmma_desc_k128(q_tile), kd = sm90::wgmma_desc_k128(k_tile(it));
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      sm90::wgmma_m64n64k16_ss<E>(s, sm90::wgmma_desc_advance(qd, 32 * kk), sm90::wgmma_desc_advance(kd, 32 * kk), kk);
    sm90::wgmma_commit();
  };
  auto issue_pv = [&](int it) {
    const uint64_t vd = sm90::wgmma_desc_mn128(k_tile(it) + F::kTileBytes);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) sm90::wgmma_m64n64k16_rs_tn<E>(o, pa[kk], sm90::wgmma_desc_advance(vd, 2048 * kk));
    sm90::wgmma_commit();
  };
  // S of tile it -> P ⊙ Z (in s); updates m and l; corr = the factor for what was summed before.
  auto softmax = [&](int it, float (&corr)[2]) {
    const float* mk = mask_s + it * F::kKeys + 2 * t;
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float2 mj = *reinterpret_cast<const float2*>(mk + 8 * j);  // keys 8j + 2t, + 1 (−inf past S)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[4 * j + e] = s[4 * j + e] * scale + ((e & 1) ? mj.y : mj.x);
        mx[e >> 1] = fmaxf(mx[e >> 1], s[4 * j + e]);
      }
    }
    float base_r[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      base_r[r] = mx[r] == neg_inf() ? 0.f : mx[r];  // a row with no finite score yet: exp(-inf) = 0
      corr[r] = flash::exp2_approx(m[r] - base_r[r]);
      m[r] = mx[r];
      l[r] *= corr[r];
    }
    uint32_t kws[2][kDropout ? 2 : 1];
    if constexpr (kDropout)
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int w = 0; w < 2; ++w) kws[r][w] = kw[r][w] >> (2 * t);
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        float pv = flash::exp2_approx(s[4 * j + e] - base_r[r]);
        l[r] += pv;
        // key 8j + 2t + (e & 1) of the tile: bit (j % 4)·8 + (e & 1) of word j / 4 shifted by 2t
        if constexpr (kDropout) pv = (kws[r][j / 4] & (1u << ((j % 4) * 8 + (e & 1)))) ? pv : 0.f;
        s[4 * j + e] = pv;
      }
  };
  auto pack_p = [&]() {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      pa[kk][0] = flash::pack2<E>(s[8 * kk], s[8 * kk + 1]);
      pa[kk][1] = flash::pack2<E>(s[8 * kk + 2], s[8 * kk + 3]);
      pa[kk][2] = flash::pack2<E>(s[8 * kk + 4], s[8 * kk + 5]);
      pa[kk][3] = flash::pack2<E>(s[8 * kk + 6], s[8 * kk + 7]);
    }
  };

  float corr[2];
  if constexpr (!kLoadAhead) load_tile_values(0);
  sm90::mbar_wait(q_bar, 0);
  sm90::wgmma_fence();
  issue_s(0);
  sm90::wgmma_wait<0>();
  sm90::fence_operands(s);
  softmax(0, corr);  // O is still zero: nothing to rescale
  if (kLoadAhead && tiles > 1) load_tile_values(1);
  pack_p();
  for (int it = 1; it < tiles; ++it) {
    if constexpr (!kLoadAhead) load_tile_values(it);
    sm90::wgmma_fence();
    issue_s(it);
    issue_pv(it - 1);
    sm90::wgmma_wait<1>();  // S_it (P_{it−1}·V_{it−1} may still run)
    sm90::fence_operands(s);
    softmax(it, corr);
    sm90::wgmma_wait<0>();
    sm90::fence_operands(o);
    if (lane == 0 && it - 1 + kStages < tiles) {
      // Stage (it − 1) % kStages is no longer read by this warp's products; the last of the four warps
      // to get here refills it with the tile kStages after that one.
      if (atomicAdd(done_s + (it - 1) % kStages, 1) % 4 == 3) load_stage(it - 1 + kStages);
    }
    // Rescale O where a row's max grew (once the max settles, most tiles skip the 32 multiplies).
    if (__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) {
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[4 * j + e] *= corr[e >> 1];
    }
    pack_p();
  }
  sm90::wgmma_fence();
  issue_pv(tiles - 1);
  sm90::wgmma_wait<0>();
  sm90::fence_operands(o);

  if constexpr (kAttnTmaStores) {
    // Normalized O staged in the Q tile (its last product completed with the wait above) and stored by
    // one TMA (whole 128-byte rows; rows past S clipped) instead of 4-byte stores from the accumulator
    // layout; the logsumexp as in the mma.sync kernel. Thread 0 waits until the box is read.
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[r] = flash::quad_sum(l[r]);
      inv[r] = flash::row_out_scale<kDropout>(l[r]);
      if constexpr (kTraining)
        if (t == 0 && rows[r] < seq) p.lse[static_cast<size_t>(bh) * seq + rows[r]] = flash::row_logsumexp(m[r], l[r]);
    }
    uint32_t pk[4][4];
    flash::pack_acc64<E>(pk, o, inv[0], inv[1]);
    sm90::stmatrix_tile64(q_tile, pk);
    sm90::fence_proxy_async();
    __syncthreads();
    if (threadIdx.x == 0) {
      sm90::tma_store_3d(&p.ctx_out, q_tile, h * kHeadDim, q0, b);
      sm90::tma_store_commit();
      sm90::tma_store_wait_read<0>();
    }
  } else {
    // Normalize, write O and the logsumexp (the mma.sync kernel's code).
    flash::store_rows<E, kDropout, 8>(reinterpret_cast<E*>(p.ctx), p.lse, l, m, rows, seq, b, h, bh, t,
                                      [&](int j, int r) { return make_float2(o[4 * j + 2 * r], o[4 * j + 2 * r + 1]); });
  }
#endif
}

}  // namespace dskc
