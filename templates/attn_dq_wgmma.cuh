// attn_dq_wgmma: the fused attention backward's dQ = dS·K/√d above 128 keys (the dQ-GEMM form,
// LayerPlan::attn_dq_gemm with LayerPlan::attn_dq_wgmma; sm_90a, fp16/bf16, head dim 64), in place of
// cuBLAS's batched GEMM over pointer arrays (`gemm_attn_dq`). attn_flash_bwd_dkdv has stored dSᵀ
// (rounded to T; row = key, [B·heads][S][padded S]) into grad_scores; this kernel streams it back:
//   dQ[q, :] = Σ_k dSᵀ[k, q] · K[k, :]     (A = dSᵀ read M-major, B = K read N-major: both the TMA
//                                           boxes' [64 keys][64 columns] layout, as the fused-dQ
//                                           product of the dK/dV kernel reads them)
// Why its own kernel: the product is 2·S²·64 flops per head against 2·S² bytes of dSᵀ, so it is bound
// by that read (128 MiB at (16,512)); cuBLAS's batched kernel reads it at ~2.5 TB/s on an H100 and
// ~3.5 on an H200 (bench/NOTES.md t18, v39). Here each block keeps up to kStages × 24 KB of loads in
// flight (two blocks per SM) and the grid walks the heads last-written first, so the blocks that start
// first read the dSᵀ that attn_flash_bwd_dkdv wrote last, while it may still be in L2.
//
// Block: one warpgroup, 128 queries of one (batch, head) (two m64n64 accumulators). Thread 0 copies by
// TMA, per block of 64 keys, the two [64 keys][64 queries] dSᵀ boxes and the [64 keys][64] K box into
// one of kStages stages (keys past S read as zero in both: the views' rows end at S); each stage is
// refilled with the key block kStages later once the wgmmas that read it are complete. The result,
// scaled and rounded to T (the GEMM's alpha, then one rounding), goes by stmatrix into the first
// stage's dSᵀ boxes and by TMA into grad_qkv's Q columns of the head (rows past S are not written).
// Rows of A past S (queries in [S, padded S) hold dS = 0, past the padded length the box reads zero)
// only reach accumulator rows that are not stored.
// Deterministic: every dQ element is one fp32 accumulation in a fixed order (key blocks in order, the
// wgmma's own order within a k16 step); within rounding of cuBLAS's (bitwise in most GPU test cases).
// Measured (bench/NOTES.md v53, H100, (16,512)): 0.060 ms against cuBLAS's 0.066 (~2.8 TB/s).
#pragma once
#include "dskc_config.cuh"
#include "common/types.cuh"
#include "common/sm90.cuh"
#include "common/flash.cuh"

namespace dskc {

// compiler/plan.cpp mirrors kThreads, kQueries and smem_bytes (static_asserts in the generated source).
struct AttnDqWgTile {
  static constexpr int kThreads = 128, kQueries = 128, kKeys = 64, kStages = 4;
  static constexpr int kBoxBytes = 64 * 128;                       // [64 rows][64 16-bit columns]
  static constexpr int kStageBytes = 3 * kBoxBytes;                // two dSᵀ boxes + one K box
  static constexpr int smem_bytes = 1024 + kStages * kStageBytes + 8 * kStages;
};

struct AttnDqWgParams {
  sm90::TmaDescriptor ds;        // [B·heads][S][padded S] dSᵀ (row = key), 64 x 64 x 1 boxes (loads)
  sm90::TmaDescriptor qkv;       // [B][S][3H], 64 x 64 x 1 boxes (the K tiles of one head)
  sm90::TmaDescriptor dqkv_out;  // [B][S][3H] grad_qkv, 64 x 64 x 1 boxes (the dQ stores)
  int batch;
  int seq;
};

template <typename E>
__device__ __forceinline__ void attn_dq_wgmma_impl(const AttnDqWgParams& p) {
#if DSKC_SM90A
  using G = AttnDqWgTile;
  static_assert(kHeadDim == 64, "attn_dq_wgmma: head dim 64");
  extern __shared__ unsigned char dq_smem[];
  const uint32_t base = (sm90::smem_u32(dq_smem) + 1023u) & ~1023u;
  auto stage_at = [&](int s) { return base + static_cast<uint32_t>(s) * G::kStageBytes; };
  auto full = [&](int s) { return base + G::kStages * G::kStageBytes + 8u * s; };
  // Heads last-written first (attn_flash_bwd_dkdv's grid walks them in order).
  const int bh = static_cast<int>(gridDim.y - 1 - blockIdx.y);
  const int b = bh / kHeads, h = bh % kHeads;
  const int q0 = blockIdx.x * G::kQueries;
  const int blocks = (p.seq + G::kKeys - 1) / G::kKeys;
  const int t = threadIdx.x;
  auto load = [&](int kb) {  // key block kb into stage kb % kStages (thread 0)
    const int s = kb % G::kStages;
    const uint32_t st = stage_at(s);
    sm90::mbar_arrive_expect_tx(full(s), G::kStageBytes);
    sm90::tma_load_3d(st, &p.ds, full(s), q0, kb * G::kKeys, bh);
    sm90::tma_load_3d(st + G::kBoxBytes, &p.ds, full(s), q0 + 64, kb * G::kKeys, bh);
    sm90::tma_load_3d(st + 2 * G::kBoxBytes, &p.qkv, full(s), kHidden + h * kHeadDim, kb * G::kKeys, b);
  };
  if (t == 0) {
    for (int s = 0; s < G::kStages; ++s) sm90::mbar_init(full(s), 1);
    sm90::mbar_init_fence();
    sm90::tma_prefetch_descriptor(&p.ds);
    sm90::tma_prefetch_descriptor(&p.qkv);
    sm90::tma_prefetch_descriptor(&p.dqkv_out);
    for (int kb = 0; kb < G::kStages && kb < blocks; ++kb) load(kb);
  }
  __syncthreads();

  float acc0[32], acc1[32];
  for (int kb = 0; kb < blocks; ++kb) {
    const int s = kb % G::kStages;
    sm90::mbar_wait(full(s), static_cast<uint32_t>(kb / G::kStages) & 1u);
    const uint32_t st = stage_at(s);
    const uint64_t a0 = sm90::wgmma_desc_mn128(st), a1 = sm90::wgmma_desc_mn128(st + G::kBoxBytes);
    const uint64_t kd = sm90::wgmma_desc_mn128(st + 2 * G::kBoxBytes);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      // The first k16 step of the first block overwrites the accumulators (scale-d = 0).
      const int accumulate = kb > 0 || kk > 0;
      const uint64_t kdk = sm90::wgmma_desc_advance(kd, 2048 * kk);
      sm90::wgmma_m64n64k16_ss<E, 1>(acc0, sm90::wgmma_desc_advance(a0, 2048 * kk), kdk, accumulate);
      sm90::wgmma_m64n64k16_ss<E, 1>(acc1, sm90::wgmma_desc_advance(a1, 2048 * kk), kdk, accumulate);
    }
    sm90::wgmma_commit();
    if (kb > 0) {
      // The previous block's wgmmas are complete (one warpgroup: thread 0's wait covers them): refill
      // their stage with the block kStages after it.
      sm90::wgmma_wait<1>();
      if (t == 0 && kb - 1 + G::kStages < blocks) load(kb - 1 + G::kStages);
    }
  }
  sm90::wgmma_wait<0>();
  sm90::fence_operands(acc0);
  sm90::fence_operands(acc1);

  // dQ = acc/√d rounded to E, through the first stage's dSᵀ boxes (every load into the ring has been
  // waited for, and after the barrier every warp's products have read it) to grad_qkv by TMA.
  __syncthreads();
  const float scale = 1.f / sqrtf(static_cast<float>(kHeadDim));
  uint32_t pk[4][4];
  flash::pack_acc64<E>(pk, acc0, scale, scale);
  sm90::stmatrix_tile64(stage_at(0), pk);
  flash::pack_acc64<E>(pk, acc1, scale, scale);
  sm90::stmatrix_tile64(stage_at(0) + G::kBoxBytes, pk);
  sm90::fence_proxy_async();
  __syncthreads();
  if (t == 0) {
    sm90::tma_store_3d(&p.dqkv_out, stage_at(0), h * kHeadDim, q0, b);
    if (q0 + 64 < p.seq) sm90::tma_store_3d(&p.dqkv_out, stage_at(0) + G::kBoxBytes, h * kHeadDim, q0 + 64, b);
    sm90::tma_store_commit();
    sm90::tma_store_wait<0>();
  }
#endif
}

}  // namespace dskc
