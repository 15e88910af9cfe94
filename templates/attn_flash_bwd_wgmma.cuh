// attn_flash_bwd_dkdv on Hopper's warpgroup MMA (sm_90a; LayerPlan::attn_bwd_wgmma: fp16/bf16, head
// dim 64, the dQ GEMM path or, kDqFused, dQ in this kernel: see below). The same mathematics and
// outputs as attn_flash_bwd_dkdv_impl<…, kDqGemm> (templates/attn_flash_bwd.cuh), with the products
// on wgmma instead of mma.sync:
//   Sᵀ = K·Qᵀ, dPᵀ_drop = V·dOᵀ        (A = K / V, B = Q / dO: both K-major tiles in shared memory)
//   P = 2^(Sᵀ·scale·log2 e + mask − L), Z from the keep bits, dS = P ⊙ (dP_drop ⊙ Z/(1−p) − D)
//   dV += (P ⊙ Z)ᵀ·dO, dK += dSᵀ·Q     (A = P ⊙ Z / dS from registers, B = dO / Q read N-major)
//   dSᵀ (rounded to E) into grad_scores for the batched dQ GEMM; dK = scale·dK, dV = dV/(1−p) into grad_qkv.
// Why: the mma.sync kernel has every warp re-read the whole Q and dO tiles with ldmatrix (its L1/shared
// pipe was the busiest, bench/NOTES.md v10, v13) and one Q/dO tile in flight per block; here the tensor
// core reads each operand tile once per warpgroup, and the tiles stream through a ring of kStages
// shared-memory stages filled by TMA ahead of the math.
//
// Block (kWG = 1 or 2 math warpgroups, no producer warp: FlashWgBwdTile): warpgroup c owns keys
// j0 + 64c .. + 63 of one (batch, head) and walks the head's query tiles of 64. Thread 0 copies by
// TMA the K and V tiles once and the first kStages Q/dO tiles (3-D tensor maps [B][S][columns]: rows
// past the sequence's end read as zero); after that, the last of the block's warps to finish with a
// stage (its warpgroup's products reading it are complete; a shared counter per stage) refills it
// with the tile kStages later, and the same warp copies the tile's logsumexp L, D and keep words into
// the stage with cp.async (4-byte copies, zero past S; the stage's barrier also counts the 32 lanes'
// cp.async arrivals). The threads read them from shared memory after the tile's products (until v22
// each thread loaded its 16 query columns from global memory per tile: ~200 instructions of address
// arithmetic and loads per thread and tile in a kernel whose issue slots are ~45% busy).
// Registers: 8 warps per SM either way (two blocks of one warpgroup, the default, or one of two), so
// ptxas may use up to 255 per thread (it takes ~190); with a producer warp (9-10 warps per SM, 168)
// it serialized the wgmmas (C7512). Measured (bench/NOTES.md v20): dK/dV −18% / −25% against the
// mma.sync kernel at (64,128) / (16,512); two warpgroups sharing each stage were slower than two
// independent blocks (their softmax phases run in step).
// dSᵀ per tile: stmatrix into one of two 8 KB regions of the warpgroup (the TMA box's 128B-swizzled
// layout), one thread stores it by TMA (3-D map [B·heads][S][padded S]: keys past S, columns past the
// padded length are not written; columns in [S, padded S) get dS = 0, which no GEMM reads).
// Deterministic: every output element is written once, in a fixed summation order.
// kDqReduce (stochastic_mode, one warpgroup per block, sequences of more than one block of keys): no dSᵀ
// store; the region is the A operand of the tile's dQ share dS·K (as with kDqFused), which the next
// step stages (fp32, the TMA box's 128B-swizzled layout) in shared memory while its dV/dK products run,
// and one thread adds into the fp32 accumulator [B][S][H] by two TMA reductions (32 columns each).
// The additions of a head's key tiles into one element come in no fixed order: not bitwise
// reproducible. attn_flash_bwd_dot zeroes the accumulator first, attn_dq_convert writes dQ after.
// kRing (FlashWgBwdTile<1, false, N>, 3 <= N <= 8: sequences of 129 .. 512 keys, AttnDq::Ring): the N
// blocks of a cluster hold every key of the head (64 each) and block r walks the query tiles in the
// order r, r + 1, .. (mod the tile count T), so at each step the T blocks hold T different tiles. Each
// computes its share dS·K of the step's tile (A = the dS region, as with kDqFused), adds the partial
// sum that block r + 1 passed it for the same tile one step earlier (its shared memory, written by
// r + 1 through distributed shared memory) and passes the result on to block r − 1; after T steps
// block r holds tile r − 1's complete dQ and stores it. Every tile's sum runs in the same order (from
// block q down), so dQ is bitwise reproducible; no dSᵀ store, no grad_scores, no dQ GEMM. The
// hand-over is point to point: two 16 KB slots per block, each with a `full` mbarrier (armed by its
// owner, completed by the sender's st.async transactions) and, in the sender, an `empty` mbarrier the
// receiver's warps arrive on once they have read the slot. Not the default: at (16,512) the kernel takes
// 0.220–0.229 ms against 0.133 ms + the dQ GEMM's 0.049 (0.180 with the hand-overs left out, so the dq
// product alone costs about what the GEMM does; with a cluster barrier per step instead of the
// mbarriers 0.250; bench/NOTES.md v45). One cluster
// barrier before the first hand-over (every block started, its mbarriers initialized) and one split
// around the end (no block leaves while a peer may still reach its shared memory). Blocks whose keys
// lie past S (runtime S below the cluster's 64·N keys) only take part in the two cluster barriers.
#pragma once
#include "dskc_config.cuh"
#include "common/types.cuh"
#include "common/sm90.cuh"
#include "common/flash.cuh"

namespace dskc {

// Shapes and the shared-memory map (byte offsets from a 1024-aligned base); compiler/plan.cpp mirrors
// kThreads, kKeys and smem_bytes (flash_wg_bwd_* there; static_asserts in the generated source).
template <int kWG, bool kDqFused = false, int kCluster = 1, bool kDqReduce = false>
struct FlashWgBwdTile {
  static_assert(kWG == 1 || kWG == 2, "one or two math warpgroups");
  static_assert(!kDqReduce || (kWG == 1 && !kDqFused && kCluster == 1),
                "TMA-reduced dQ shares: one warpgroup per block, no fused dQ");
  // The ring of kCluster blocks (see the top of the file); clusters of two exchange shares (kDqFused).
  static constexpr bool kRing = kCluster > 2;
  static_assert(kCluster == 1 || (kCluster == 2 && kWG == 1 && kDqFused) ||
                    (kRing && kCluster <= 8 && kWG == 1 && !kDqFused && !kDqReduce),
                "clusters of two one-warpgroup blocks exchange dQ shares (kDqFused); rings of 3 .. 8 blocks "
                "pass them on");
  static constexpr int kThreads = 128 * kWG;
  static constexpr int kKeys = 64 * kWG;  // keys per block
  static constexpr int kQueries = 64;     // queries per stage
  static constexpr int kStages = 3;
  static constexpr int kTileBytes = 64 * 128;  // a 64 x 64 16-bit tile, 128-byte rows
  static constexpr int kKV = 0;                                    // K, V of warpgroup c: tiles 2c, 2c + 1
  static constexpr int kStage0 = kKV + 2 * kWG * kTileBytes;       // stage s: Q, dO tiles
  static constexpr int kDs0 = kStage0 + kStages * 2 * kTileBytes;  // dSᵀ regions: 2 per warpgroup
  // (kRing: one; it holds only the dq product's A operand, complete before the next step's stmatrix)
  static constexpr int kRegions = kRing ? 1 : 2 * kWG;
  // Per stage, the query tile's L, D (fp32, as stored) and keep words (per query, the words of the
  // warpgroups' keys: 2 per warpgroup), copied by the refilling warp with cp.async (zero past S).
  static constexpr int kRowVals = 2 + 2 * kWG;                          // 4-byte values per query
  static constexpr int kRows0 = kDs0 + kRegions * kTileBytes;
  static constexpr int kRowBytes = kRowVals * kQueries * 4;              // per stage
  // kDqFused with two key halves: the 64 x 64 fp32 dQ share handed over by the other half (two
  // warpgroups: one slot per warpgroup; a cluster of two blocks: the slot the peer block writes).
  // kDqReduce: the share staged for the TMA reductions (two 64-row x 128-byte boxes, 1024-aligned).
  // kRing: two slots for the partial sums block r + 1 passes on (step k's into slot k % 2).
  static constexpr int kXchg0 = kRows0 + kStages * kRowBytes;
  static constexpr int kXchgBytes = kDqReduce ? 64 * 64 * 4
                                    : kRing    ? 2 * 64 * 64 * 4
                                    : !kDqFused ? 0
                                    : kWG == 2  ? 2 * 64 * 64 * 4
                                    : kCluster == 2 ? 64 * 64 * 4
                                                    : 0;
  static_assert(!kDqReduce || kXchg0 % 1024 == 0, "128B-swizzled TMA boxes start 1024-aligned");
  static constexpr int kMask0 = kXchg0 + kXchgBytes;               // the block's key mask (fp32, × log2 e)
  static constexpr int kCount0 = kMask0 + kKeys * 4;               // per stage: warps done with it (mod 4·kWG)
  static constexpr int kBars0 = kCount0 + (4 * kStages + 7) / 8 * 8;  // mbarriers: 8-byte aligned
  static constexpr int kBars = kStages + 1 + (kRing ? 4 : 0);  // full[s], kv (kRing: + its slots' full[2], empty[2])
  static_assert(kBars0 % 8 == 0, "mbarriers are 8-byte aligned");
  static constexpr int smem_bytes = 1024 + kBars0 + 8 * kBars;  // + 1024: aligning the dynamic base
  // Resident blocks per SM the kernel is built for (__launch_bounds__): 8 warps per SM.
  static constexpr int kMinBlocks = kWG == 1 ? 2 : 1;
  // kDqFused with one warpgroup per block: D = rowsum(dO ⊙ O) of each query tile computed here, from
  // the O tile that TMA loads with the stage into the dSᵀ region of the step that uses it (free until
  // that step's stmatrix; two regions, at most two query tiles): no attn_flash_bwd_dot launch.
  static constexpr bool kDotFused = kDqFused && kWG == 1;
};

struct AttnFlashBwdWgParams {
  sm90::TmaDescriptor qkv;   // [B][S][3H], 64 x 64 x 1 boxes (Q, K, V tiles of one head)
  sm90::TmaDescriptor dctx;  // [B][S][H] dO, 64 x 64 x 1 boxes
  sm90::TmaDescriptor ds;    // [B·heads][S][padded S] dSᵀ stores (row = key), 64 x 64 x 1 boxes
  sm90::TmaDescriptor ctx;   // [B][S][H] O, 64 x 64 x 1 boxes (FlashWgBwdTile::kDotFused only)
  sm90::TmaDescriptor dq_acc;  // [B][S][H] fp32 dQ accumulator, 32 x 64 x 1 boxes (kDqReduce only)
  sm90::TmaDescriptor dqkv_out;  // [B][S][3H] grad_qkv, 64 x 64 x 1 boxes: the dK, dV, dQ stores (kTmaOut only)
  const T* mask;             // [B, S] additive
  const float* lse;          // [B*heads*S] forward logsumexp L
  const float* dot;          // [B*heads*S] D = rowsum(dO ⊙ O) (unless FlashWgBwdTile::kDotFused)
  const uint32_t* bits;      // [B*heads, S, ceil(S/32)] dropout keep bits (kDropout only)
  T* dqkv;                   // [B*S, 3H] out: dK | dV columns of each head
  int batch;
  int seq;
};

// Pieces of a query-tile step that the per-head kernel and the persistent one (below) share: the
// warpgroup's products, D from the staged O tile, P and dS from the products, the dV/dK products and
// the dq product (kWG == 1's thread mapping where noted).
namespace flash_wg_bwd {
// Sᵀ = K·Qᵀ and dPᵀ_drop = V·dOᵀ (one commit group).
template <typename E>
__device__ __forceinline__ void products(float (&st)[32], float (&dpt)[32], uint32_t k_tile, uint32_t v_tile,
                                         uint32_t q_tile, uint32_t do_tile) {
#if DSKC_SM90A
  const uint64_t kd = sm90::wgmma_desc_k128(k_tile), qd = sm90::wgmma_desc_k128(q_tile);
  const uint64_t vd = sm90::wgmma_desc_k128(v_tile), dod = sm90::wgmma_desc_k128(do_tile);
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    sm90::wgmma_m64n64k16_ss<E>(st, sm90::wgmma_desc_advance(kd, 32 * kk), sm90::wgmma_desc_advance(qd, 32 * kk), kk);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    sm90::wgmma_m64n64k16_ss<E>(dpt, sm90::wgmma_desc_advance(vd, 32 * kk), sm90::wgmma_desc_advance(dod, 32 * kk),
                                kk);
  sm90::wgmma_commit();
#endif
}
// D = rowsum(dO ⊙ O) of the query tile into dot_w[64], 8 lanes per query row (lane x sums the row's
// 16-byte chunk x: attn_flash_bwd_dot's lanes, order and arithmetic), from the O and dO tiles in
// shared memory (both 128B-swizzled). Rows past S are zero in both (TMA fill), so D = 0 there.
template <typename E>
__device__ __forceinline__ void dot_rows(uint32_t o_tile, uint32_t do_tile, float* dot_w, int tid) {
#if DSKC_SM90A
  const int x = tid % 8;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int q = 16 * r + tid / 8;
    const uint32_t off = q * 128 + ((x ^ (q & 7)) << 4);
    const uint4 o = sm90::ld_shared_v4(o_tile + off), d = sm90::ld_shared_v4(do_tile + off);
    const uint32_t ow[4] = {o.x, o.y, o.z, o.w}, dw[4] = {d.x, d.y, d.z, d.w};
    float acc = 0.f;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 of = flash::unpack2<E>(ow[e]), df = flash::unpack2<E>(dw[e]);
      acc = flash::dot2_acc(acc, of.x, df.x, of.y, df.y);
    }
#pragma unroll
    for (int m = 1; m < 8; m <<= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
    if (x == 0) dot_w[q] = acc;
  }
#endif
}
// P ⊙ Z into st and dS = P ⊙ (dP_drop ⊙ Z/(1−p) − D) into dpt, from this thread's query columns
// 8j + 2t (+1) of the stage's L (lse_s), D (dot_s) and keep words (keep_s; kDropout).
// P = 2^(Sᵀ·scale·log2 e + mask·log2 e − L·log2 e). Past S the values are zero: there Q's and dO's
// rows are zero, so Sᵀ = 0 and dPᵀ = 0, P = 2^mask multiplies a zero dO row in dV and
// dS = P·(0 − 0) = 0.
template <bool kDropout>
__device__ __forceinline__ void softmax_ds(float (&st)[32], float (&dpt)[32], const float* lse_s, const float* dot_s,
                                           const uint32_t* keep_s, const uint32_t (&keep_bit)[2],
                                           const float (&mask_r)[2], float scale2) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 lj = *reinterpret_cast<const float2*>(lse_s + 8 * j);
    const float2 dj = *reinterpret_cast<const float2*>(dot_s + 8 * j);
    uint2 kj = make_uint2(0u, 0u);
    if constexpr (kDropout) kj = *reinterpret_cast<const uint2*>(keep_s + 8 * j);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float lq = (e & 1) ? lj.y : lj.x, dq = (e & 1) ? dj.y : dj.x;
      const float pv =
          flash::exp2_approx(__fmaf_rn(lq, -flash::kLog2e, __fmaf_rn(st[4 * j + e], scale2, mask_r[e >> 1])));
      float dp = dpt[4 * j + e];
      float pz = pv;
      if constexpr (kDropout) {
        const bool keep = (((e & 1) ? kj.y : kj.x) & keep_bit[e >> 1]) != 0u;
        pz = keep ? pv : 0.f;
        dp *= keep ? kAttnDropoutScale : 0.f;
      }
      st[4 * j + e] = pz;
      dpt[4 * j + e] = pv * (dp - dq);
    }
  }
}
// dV += (P ⊙ Z)ᵀ·dO, dK += dSᵀ·Q (A = pa / sa from registers, B = dO / Q read N-major; one commit group).
template <typename E>
__device__ __forceinline__ void dv_dk(float (&dv)[32], float (&dk)[32], const uint32_t (&pa)[4][4],
                                      const uint32_t (&sa)[4][4], uint32_t q_tile, uint32_t do_tile) {
#if DSKC_SM90A
  const uint64_t dod = sm90::wgmma_desc_mn128(do_tile), qd = sm90::wgmma_desc_mn128(q_tile);
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) sm90::wgmma_m64n64k16_rs_tn<E>(dv, pa[kk], sm90::wgmma_desc_advance(dod, 2048 * kk));
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) sm90::wgmma_m64n64k16_rs_tn<E>(dk, sa[kk], sm90::wgmma_desc_advance(qd, 2048 * kk));
  sm90::wgmma_commit();
#endif
}
// dq = dS·K over the warpgroup's 64 keys: A = dS read M-major from the region (row = key), B = K read
// N-major (row = key); one commit group.
template <typename E>
__device__ __forceinline__ void dq_product(float (&dq)[32], uint32_t region, uint32_t k_tile) {
#if DSKC_SM90A
  const uint64_t sd = sm90::wgmma_desc_mn128(region), kd = sm90::wgmma_desc_mn128(k_tile);
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    sm90::wgmma_m64n64k16_ss<E, 1>(dq, sm90::wgmma_desc_advance(sd, 2048 * kk), sm90::wgmma_desc_advance(kd, 2048 * kk), kk);
  sm90::wgmma_commit();
#endif
}
// dq += the 64 x 64 fp32 share at `slot` (this thread's 32 values, in its accumulator order: float4 i
// of thread tid at slot[i·128 + tid]).
__device__ __forceinline__ void add_share(float (&dq)[32], const float4* slot, int tid) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float4 o = slot[i * 128 + tid];
    dq[4 * i] += o.x;
    dq[4 * i + 1] += o.y;
    dq[4 * i + 2] += o.z;
    dq[4 * i + 3] += o.w;
  }
}
// L (and D, kDot) and the keep words (kWords per query: keys j0 + 32x .. + 31, kDropout) of query
// tile `it` into a stage's row values at dst (L at q, D at 64 + q, word x at 64(2 + x) + q), by one
// warp with 4-byte cp.async (zero past S), then the lanes' cp.async arrivals on `bar`.
template <bool kDropout, bool kDot, int kWords>
__device__ __forceinline__ void load_rows(uint32_t dst, uint32_t bar, const float* lse_g, const float* dot_g,
                                          const uint32_t* bits_g, int it, int seq, int words, int j0, int lane) {
#if DSKC_SM90A
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int q = lane + 32 * r, i = it * 64 + q;
    const uint32_t bytes = i < seq ? 4u : 0u;
    const int ic = min(i, seq - 1);
    sm90::cp_async_4(dst + 4 * q, lse_g + ic, bytes);
    if constexpr (kDot) sm90::cp_async_4(dst + 4 * (64 + q), dot_g + ic, bytes);
    if constexpr (kDropout)
#pragma unroll
      for (int x = 0; x < kWords; ++x)
        sm90::cp_async_4(dst + 4 * ((2 + x) * 64 + q), bits_g + static_cast<size_t>(ic) * words + min(j0 / 32 + x, words - 1),
                         bytes);
  }
  sm90::cp_async_mbar_arrive(bar);
#endif
}
}  // namespace flash_wg_bwd

template <typename E, bool kDropout, int kWG, bool kDqFused = false, int kCluster = 1, bool kDqReduce = false>
__device__ __forceinline__ void attn_flash_bwd_wgmma_impl(const AttnFlashBwdWgParams& p) {
#if DSKC_SM90A
  static_assert(sizeof(E) == 2, "wgmma attention runs on fp16/bf16 only");
  static_assert(kHeadDim == 64, "the wgmma attention backward is built for head dim 64 (128-byte tile rows)");
  using F = FlashWgBwdTile<kWG, kDqFused, kCluster, kDqReduce>;
  constexpr bool kRing = F::kRing;
  extern __shared__ unsigned char attn_wg_smem[];
  const uint32_t base = (sm90::smem_u32(attn_wg_smem) + 1023u) & ~1023u;
  unsigned char* const smem_ptr = attn_wg_smem - sm90::smem_u32(attn_wg_smem);  // + a shared address = its pointer
  auto full = [&](int s) { return base + F::kBars0 + 8u * s; };
  const uint32_t kv_bar = base + F::kBars0 + 8u * F::kStages;
  // kRing: slot s's full and empty barriers.
  auto ring_full = [&](int s) { return base + F::kBars0 + 8u * (F::kStages + 1 + s); };
  auto ring_empty = [&](int s) { return base + F::kBars0 + 8u * (F::kStages + 3 + s); };
  float* const mask_s = reinterpret_cast<float*>(smem_ptr + base + F::kMask0);
  int* const done_s = reinterpret_cast<int*>(smem_ptr + base + F::kCount0);

  const int seq = p.seq;
  const int j0 = blockIdx.x * F::kKeys;
  const int bh = blockIdx.y, b = bh / kHeads, h = bh % kHeads;
  const int tiles = (seq + F::kQueries - 1) / F::kQueries;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // kDqFused: which of the two key halves of the sequence the warpgroup holds (its block's warpgroup
  // index, or its block's rank in the cluster); 0 where one warpgroup holds every key. kRing: the
  // block's rank in the ring.
  const int part =
      kWG == 2 ? sm90::warpgroup_index() : kCluster >= 2 ? static_cast<int>(blockIdx.x % kCluster) : 0;
  if constexpr (kRing) {
    // Keys all past S: no tile of the ring; the block still takes part in each of its barriers.
    if (part >= tiles) {
      sm90::cluster_arrive_relaxed();
      sm90::cluster_wait();
      sm90::cluster_arrive_release();
      sm90::cluster_wait();
      return;
    }
  }
  // The query tile of step `it`: the halves (kDqFused) and the ring's blocks start at tile `part`.
  auto tile_of = [&](int it) { return kDqFused || kRing ? (it + part) % tiles : it; };
  // Q and dO of query tile `it` into stage it % kStages (one thread); kDotFused: O too, into the dSᵀ
  // region of the step that walks tile `it` (step (it − part) mod tiles = (it + part) % tiles).
  // kRing: the stages go by step, not tile: step `it`'s tile into stage it % kStages.
  auto load_stage = [&](int step) {
    const int s = step % F::kStages;
    const int it = kRing ? tile_of(step) : step;
    const uint32_t qt = base + F::kStage0 + 2 * s * F::kTileBytes;
    sm90::mbar_arrive_expect_tx(full(s), (F::kDotFused ? 3 : 2) * F::kTileBytes);
    sm90::tma_load_3d(qt, &p.qkv, full(s), h * kHeadDim, it * F::kQueries, b);
    sm90::tma_load_3d(qt + F::kTileBytes, &p.dctx, full(s), h * kHeadDim, it * F::kQueries, b);
    if constexpr (F::kDotFused)
      sm90::tma_load_3d(base + F::kDs0 + ((it + part) % tiles) * F::kTileBytes, &p.ctx, full(s), h * kHeadDim,
                        it * F::kQueries, b);
  };
  // L, D and the keep words of query tile `it` into stage it % kStages (one whole warp; cp.async, zero
  // past S: there P ⊙ Z and dS multiply zero rows of Q and dO or are zero themselves, see below).
  const float* lse_g = p.lse + static_cast<size_t>(bh) * seq;
  const float* dot_g = p.dot + static_cast<size_t>(bh) * seq;
  const int words = (seq + 31) / 32;
  const uint32_t* bits_g = kDropout ? p.bits + static_cast<size_t>(bh) * seq * words : nullptr;
  auto load_rows = [&](int step) {
    const int s = step % F::kStages;
    const int it = kRing ? tile_of(step) : step;
    flash_wg_bwd::load_rows<kDropout, !F::kDotFused, 2 * kWG>(base + F::kRows0 + s * F::kRowBytes, full(s), lse_g, dot_g,
                                                               bits_g, it, seq, words, j0, lane);
  };

  if (threadIdx.x == 0) {
    for (int s = 0; s < F::kStages; ++s) {
      sm90::mbar_init(full(s), 1 + 32);  // the TMA's expect_tx arrival + the 32 lanes' cp.async arrivals
      done_s[s] = 0;
    }
    sm90::mbar_init(kv_bar, 1);
    if constexpr (kRing)
      for (int s = 0; s < 2; ++s) {
        sm90::mbar_init(ring_full(s), 1);   // the owner's expect_tx arrival + the sender's 16 KB
        sm90::mbar_init(ring_empty(s), 4);  // the receiver's four warps
      }
    sm90::mbar_init_fence();
    sm90::tma_prefetch_descriptor(&p.qkv);
    sm90::tma_prefetch_descriptor(&p.dctx);
    if constexpr (F::kDotFused) sm90::tma_prefetch_descriptor(&p.ctx);
    if constexpr (kDqReduce) sm90::tma_prefetch_descriptor(&p.dq_acc);
    sm90::mbar_arrive_expect_tx(kv_bar, 2 * kWG * F::kTileBytes);
    for (int c = 0; c < kWG; ++c) {
      const uint32_t kt = base + F::kKV + 2 * c * F::kTileBytes;
      sm90::tma_load_3d(kt, &p.qkv, kv_bar, kHidden + h * kHeadDim, j0 + 64 * c, b);
      sm90::tma_load_3d(kt + F::kTileBytes, &p.qkv, kv_bar, 2 * kHidden + h * kHeadDim, j0 + 64 * c, b);
    }
    for (int it = 0; it < tiles && it < F::kStages; ++it) load_stage(it);
  }
  if (warp == 0) {
    __syncwarp();  // the barriers are initialized (thread 0, fenced) before the lanes' cp.async arrivals
    for (int it = 0; it < tiles && it < F::kStages; ++it) load_rows(it);
  }
  {
    const E* mask_row = reinterpret_cast<const E*>(p.mask) + static_cast<size_t>(b) * seq;
    for (int k = threadIdx.x; k < F::kKeys; k += F::kThreads)
      mask_s[k] = j0 + k < seq ? to_f(mask_row[j0 + k]) * flash::kLog2e : neg_inf();
  }
  __syncthreads();  // barriers initialized, mask staged
  // Clusters: this block has started (the peer writes into its shared memory after waiting for this).
  if constexpr (kCluster == 2)
    if (tiles == 2) sm90::cluster_arrive_relaxed();
  if constexpr (kRing) sm90::cluster_arrive_relaxed();  // (the ring's barrier 0)

  // ---- math warpgroup c: keys j0 + 64c + 16w + g (+8) ----
  const int c = kWG == 1 ? 0 : sm90::warpgroup_index();
  const int w = warp % 4, g = lane / 4, t = lane % 4, tid = threadIdx.x % 128;
  const uint32_t k_tile = base + F::kKV + 2 * c * F::kTileBytes, v_tile = k_tile + F::kTileBytes;
  const float scale = 1.f / sqrtf(static_cast<float>(kHeadDim));
  const float scale2 = scale * flash::kLog2e;
  const float mask_r[2] = {mask_s[64 * c + 16 * w + g], mask_s[64 * c + 16 * w + g + 8]};
  // The warp's 16 keys lie in one keep word of each query row: word (j0 + 64c)/32 + w/2, bits
  // 16(w%2) + g (+8).
  // (the stage's keep words 2 + 2c + w/2).
  const uint32_t keep_bit[2] = {1u << (16 * (w % 2) + g), 1u << (16 * (w % 2) + g + 8)};
  sm90::mbar_wait(kv_bar, 0);

  float dk[32], dv[32], st[32], dpt[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) dk[i] = dv[i] = 0.f;
  uint32_t pa[4][4], sa[4][4];  // (P ⊙ Z)ᵀ and dSᵀ as A fragments, per k16 step (16 queries)
  // kDqFused: the block's (or the cluster's) keys cover the whole sequence (tiles <= 2 < kStages: every
  // query tile is loaded once, up front), so each query tile's dQ = scale·dS·K is the sum of the two
  // key halves' shares over their 64 keys. Half `part` walks the tiles starting at tile `part`; after
  // its first tile it hands that tile's share (dq) to the other half through shared memory (its own
  // block's, or the peer block's by a cluster store), which adds it to its own share of the same tile,
  // its last, and stores dQ: a fixed order of summation, no atomics. With one tile (S <= 64) the
  // second half's keys are all past S, its share is zero, and the first half stores dQ alone.
  [[maybe_unused]] float dq[32];
  [[maybe_unused]] float4* const xchg = reinterpret_cast<float4*>(smem_ptr + base + F::kXchg0);
  // dq += the 64 x 64 fp32 share in xchg slot `slot` (this thread's 32 values, in its accumulator order).
  [[maybe_unused]] auto add_share = [&](int slot) { flash_wg_bwd::add_share(dq, xchg + slot * 8 * 128, tid); };
  // The outputs by TMA stores (kAttnTmaStores) where the block holds every key of its head (kDqFused:
  // at (64,128) the kernel 0.083 → 0.070 ms; kRing); the dQ GEMM form keeps the 4-byte stores, which
  // measured faster there (at (16,512) 0.134 against 0.147 ms with TMA stores; bench/NOTES.md v44).
  constexpr bool kTmaOut = kAttnTmaStores && (kDqFused || kRing);
  // kTmaOut: the warpgroup's dQ tile is staged in the last Q/dO stage (its Q slot, or its dO slot for
  // the second warpgroup), which kDqFused's at most two query tiles never load (kRing: every stage is
  // free once the last products are complete); the tile it holds is the half's (or the ring block's)
  // last, (tiles − 1 + part) % tiles.
  static_assert(!kDqFused || F::kStages > 2, "fused dQ: a free Q/dO stage for the dQ tile");
  [[maybe_unused]] const uint32_t dq_tile = base + F::kStage0 + (2 * (F::kStages - 1) + c) * F::kTileBytes;
  // kDqReduce: this thread's dq (rows 16w + g (+8), columns 8n + 2t (+1)) into the staging boxes (box
  // n / 4 holds columns 32(n / 4) ..; in a 128-byte row, 16-byte chunk 2(n % 4) + t / 2 is stored at
  // chunk ^ (row % 8), row % 8 = g: conflict-free 8-byte stores), then the two reductions of query
  // tile `tq` (thread 0, after the other threads' stores are fenced and synchronized).
  [[maybe_unused]] auto stage_dq = [&] {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = 16 * w + g + 8 * r;
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const uint32_t off = (n / 4) * (64 * 128) + row * 128 + (((2 * (n % 4) + t / 2) ^ g) << 4) + 8 * (t % 2);
        *reinterpret_cast<float2*>(smem_ptr + base + F::kXchg0 + off) = make_float2(dq[4 * n + 2 * r], dq[4 * n + 2 * r + 1]);
      }
    }
  };
  [[maybe_unused]] auto reduce_dq = [&](int tq) {
    sm90::tma_reduce_add_3d(&p.dq_acc, base + F::kXchg0, h * kHeadDim, tq * F::kQueries, b);
    sm90::tma_reduce_add_3d(&p.dq_acc, base + F::kXchg0 + 64 * 128, h * kHeadDim + 32, tq * F::kQueries, b);
    sm90::tma_store_commit();
  };

  // kRing: step k's share (dq, complete) plus the partial sum block part + 1 passed for the same tile
  // at its step k − 1 (slot (k − 1) % 2), passed on into block part − 1's slot k % 2 (mod tiles)
  // unless k is the last step. The read slot is handed back (its empty barrier in the sender) only
  // if the sender fills it again, at its step k + 1; the pass into a slot used before waits until
  // the receiver has read it (step k − 2's partial, read at the receiver's step k − 1).
  [[maybe_unused]] auto ring_step = [&](int k) {
    if (k == 0) sm90::cluster_wait();  // every block of the ring has started, its barriers initialized
    if (k >= 1) {
      const int s = (k - 1) & 1;
      if (tid == 0) sm90::mbar_arrive_expect_tx(ring_full(s), 64 * 64 * 4);
      sm90::mbar_wait_cluster(ring_full(s), ((k - 1) >> 1) & 1);
      add_share(s);
      if (k + 1 <= tiles - 2) {
        __syncwarp();
        if (lane == 0) sm90::mbar_arrive_remote(ring_empty(s), static_cast<uint32_t>((part + 1) % tiles));
      }
    }
    if (k < tiles - 1) {
      const int s = k & 1;
      if (k >= 2) sm90::mbar_wait_cluster(ring_empty(s), ((k >> 1) - 1) & 1);
      const uint32_t to = static_cast<uint32_t>((part + tiles - 1) % tiles);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        sm90::st_async_f4(sm90::smem_u32(xchg + (s * 8 + i) * 128 + tid), ring_full(s), to,
                          make_float4(dq[4 * i], dq[4 * i + 1], dq[4 * i + 2], dq[4 * i + 3]));
    } else {
      sm90::cluster_arrive_release();  // this block's hand-overs are done (waited for at its end)
    }
  };

  for (int it = 0; it < tiles; ++it) {
    const int tq = tile_of(it);  // the query tile of this step
    const int slot = kRing ? it : tq;  // (which stage holds it, and the fill's phase)
    const int i0 = tq * F::kQueries, stage = slot % F::kStages;
    const uint32_t phase = (slot / F::kStages) & 1u;
    const uint32_t q_tile = base + F::kStage0 + 2 * stage * F::kTileBytes, do_tile = q_tile + F::kTileBytes;
    sm90::mbar_wait(full(stage), phase);
    flash_wg_bwd::products<E>(st, dpt, k_tile, v_tile, q_tile, do_tile);
    float* const rows_s = reinterpret_cast<float*>(smem_ptr + base + F::kRows0 + stage * F::kRowBytes);
    if constexpr (F::kDotFused) {
      // While the products run: the tile's D = rowsum(dO ⊙ O) into the stage's D slot, 8 lanes per query
      // row (lane x sums the row's 16-byte chunk x: attn_flash_bwd_dot's lanes, order and arithmetic),
      // from the O tile in this step's dSᵀ region and the dO tile (both 128B-swizzled). Rows past S are
      // zero in both (TMA fill), so D = 0 there as the copied value was.
      flash_wg_bwd::dot_rows<E>(base + F::kDs0 + (it & 1) * F::kTileBytes, do_tile, rows_s + F::kQueries, tid);
    }
    sm90::wgmma_wait<0>();  // this tile's Sᵀ, dPᵀ and the previous tile's dK/dV products
    sm90::fence_operands(st);
    sm90::fence_operands(dpt);
    sm90::fence_operands(dk);
    sm90::fence_operands(dv);
    if constexpr (kDqReduce || kRing) sm90::fence_operands(dq);  // the previous tile's share (complete with this wait)
    if constexpr (kDqFused) {
      // The first tile's dQ share (complete with this wait) to the other half (two tiles).
      sm90::fence_operands(dq);
      if (it == 1) {
        if constexpr (kCluster == 2) sm90::cluster_wait();  // the peer block has started
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float4 v = make_float4(dq[4 * i], dq[4 * i + 1], dq[4 * i + 2], dq[4 * i + 3]);
          if constexpr (kCluster == 2)
            sm90::st_cluster_f4(sm90::smem_u32(xchg + i * 128 + tid), static_cast<uint32_t>(part ^ 1), v);
          else
            xchg[(c * 8 + i) * 128 + tid] = v;
        }
      }
    } else if (it > 0 && it - 1 + F::kStages < tiles) {
      // The previous tile's stage is no longer read by this warp (its products are complete, its
      // L/D/keep reads came before); the last of the block's warps to get here refills it with the
      // tile kStages after that one (Q, dO by TMA from lane 0, the row values by the whole warp).
      const int ps = (it - 1) % F::kStages;
      int last = 0;
      if (lane == 0) last = atomicAdd(done_s + ps, 1) % (4 * kWG) == 4 * kWG - 1;
      if (__shfl_sync(0xffffffffu, last, 0)) {
        if (lane == 0) load_stage(it - 1 + F::kStages);
        load_rows(it - 1 + F::kStages);
      }
    }

    if constexpr (F::kDotFused) sm90::warpgroup_sync(c);  // the tile's D is in shared memory
    // This thread's query columns 8j + 2t (+1) of the stage's L, D and keep words (shared memory).
    // Past S they are zero: there Q's and dO's rows are zero, so Sᵀ = 0 and dPᵀ = 0, P = 2^mask
    // multiplies a zero dO row in dV and dS = P·(0 − 0) = 0 (its dK term and its grad_scores column).
    const float* const lse_s = rows_s + 2 * t;
    const float* const dot_s = rows_s + F::kQueries + 2 * t;
    const uint32_t* const keep_s = reinterpret_cast<const uint32_t*>(rows_s) + (2 + 2 * c + w / 2) * F::kQueries + 2 * t;
    flash_wg_bwd::softmax_ds<kDropout>(st, dpt, lse_s, dot_s, keep_s, keep_bit, mask_r, scale2);
    flash::pack_acc64<E>(pa, st);
    flash::pack_acc64<E>(sa, dpt);
    flash_wg_bwd::dv_dk<E>(dv, dk, pa, sa, q_tile, do_tile);
    // kRing: the previous step's share on around the ring while the dV/dK products run (before this
    // step's dq product overwrites it).
    if constexpr (kRing)
      if (it >= 1) ring_step(it - 1);

    // dSᵀ of the tile into region it % 2 (free once the store issued two tiles ago has read it), then
    // by TMA. (Per-warp 64 x 16 stores without the two warpgroup barriers measured no faster.)
    // kDqFused: no store; the region is the M-major A operand of the tile's dQ share dS·K instead.
    const uint32_t region = kRing ? base + F::kDs0 : base + F::kDs0 + (2 * c + (it & 1)) * F::kTileBytes;
    if constexpr (kDqReduce) {
      // The previous tile's share into the staging boxes, once the reductions issued a step ago have
      // read them; its reductions go out after the barrier below.
      if (it >= 1) {
        if (it >= 2) {
          if (tid == 0) sm90::tma_store_wait_read<0>();
          sm90::warpgroup_sync(c);
        }
        stage_dq();
      }
    } else if (!kDqFused && !kRing && it >= 2) {
      if (tid == 0) sm90::tma_store_wait_read<1>();
      sm90::warpgroup_sync(c);
    }
    sm90::stmatrix_tile64(region, sa);
    sm90::fence_proxy_async();
    sm90::warpgroup_sync(c);
    if constexpr (kDqReduce)
      if (it >= 1 && tid == 0) reduce_dq(it - 1);
    if constexpr (kDqFused || kDqReduce || kRing) {
      flash_wg_bwd::dq_product<E>(dq, region, k_tile);
    } else if (tid == 0) {
      sm90::tma_store_3d(&p.ds, region, i0, j0 + 64 * c, bh);
      sm90::tma_store_commit();
    }
  }
  sm90::wgmma_wait<0>();
  sm90::fence_operands(dk);
  sm90::fence_operands(dv);
  if constexpr (kDqFused || kRing) {
    sm90::fence_operands(dq);
    // The last tile's share: with two tiles each half's last tile is the other's first, whose share
    // is in this half's xchg slot once both have passed the barrier. kRing: the last step's share
    // plus the partial of every other block (passed along the ring): tile part − 1's whole dQ.
    if constexpr (kRing) {
      ring_step(tiles - 1);
    } else if constexpr (kWG == 2 || kCluster == 2) {
      if (tiles == 2) {
        if constexpr (kCluster == 2) {
          sm90::cluster_arrive_release();
          sm90::cluster_wait();
        } else {
          __syncthreads();
        }
        const int slot = kWG == 2 ? 1 - c : 0;
        add_share(slot);
      }
    }
    if (kRing || tiles == 2 || part == 0) {
      const int tq = (tiles - 1 + part) % tiles;
      if constexpr (kTmaOut) {
        uint32_t pk[4][4];
        flash::pack_acc64<E>(pk, dq, scale, scale);
        sm90::stmatrix_tile64(dq_tile, pk);
      } else {
        const size_t ldq = 3 * static_cast<size_t>(kHidden);
        E* dq_g = reinterpret_cast<E*>(p.dqkv) + static_cast<size_t>(b) * seq * ldq + h * kHeadDim + 2 * t;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int i = tq * F::kQueries + 16 * w + g + 8 * r;
          if (i >= seq) continue;
          E* row = dq_g + static_cast<size_t>(i) * ldq;
#pragma unroll
          for (int n = 0; n < 8; ++n)
            flash::store2<E>(row + n * 8, dq[4 * n + 2 * r] * scale, dq[4 * n + 2 * r + 1] * scale);
        }
      }
    }
  } else if constexpr (kDqReduce) {
    // The last tile's share, as in the loop.
    sm90::fence_operands(dq);
    if (tiles >= 2) {
      if (tid == 0) sm90::tma_store_wait_read<0>();
      sm90::warpgroup_sync(c);
    }
    stage_dq();
    sm90::fence_proxy_async();
    sm90::warpgroup_sync(c);
    if (tid == 0) {
      reduce_dq(tiles - 1);
      sm90::tma_store_wait<0>();
    }
  } else if (tid == 0) {
    sm90::tma_store_wait<0>();
  }

  // dK = scale·dSᵀ·Q, dV = (1/(1−p))·(P ⊙ Z)ᵀ·dO into grad_qkv (rows past S are not written).
  const float v_scale = kDropout ? kAttnDropoutScale : 1.f;
  if constexpr (kTmaOut) {
    // Staged in the warpgroup's K and V tiles (their last products completed with the wait above),
    // then one thread stores dK, dV (and the dQ tile staged above) by TMA and waits until the boxes
    // are read: the block's shared memory stays until then, the global writes drain after it ends.
    uint32_t pk[4][4];
    flash::pack_acc64<E>(pk, dk, scale, scale);
    sm90::stmatrix_tile64(k_tile, pk);
    flash::pack_acc64<E>(pk, dv, v_scale, v_scale);
    sm90::stmatrix_tile64(v_tile, pk);
    sm90::fence_proxy_async();
    sm90::warpgroup_sync(c);
    if (tid == 0) {
      const int j = j0 + 64 * c;
      if (j < seq) {  // (all of a second key half can lie past S)
        sm90::tma_store_3d(&p.dqkv_out, k_tile, kHidden + h * kHeadDim, j, b);
        sm90::tma_store_3d(&p.dqkv_out, v_tile, 2 * kHidden + h * kHeadDim, j, b);
      }
      if (kRing || tiles == 2 || part == 0)
        sm90::tma_store_3d(&p.dqkv_out, dq_tile, h * kHeadDim, (tiles - 1 + part) % tiles * F::kQueries, b);
      sm90::tma_store_commit();
      sm90::tma_store_wait_read<0>();
    }
  } else {
    const size_t ld = 3 * static_cast<size_t>(kHidden);
    E* dk_g = reinterpret_cast<E*>(p.dqkv) + static_cast<size_t>(b) * seq * ld + kHidden + h * kHeadDim + 2 * t;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int j = j0 + 64 * c + 16 * w + g + 8 * r;
      if (j >= seq) continue;
      E* row = dk_g + static_cast<size_t>(j) * ld;
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        flash::store2<E>(row + n * 8, dk[4 * n + 2 * r] * scale, dk[4 * n + 2 * r + 1] * scale);
        flash::store2<E>(row + kHidden + n * 8, dv[4 * n + 2 * r] * v_scale, dv[4 * n + 2 * r + 1] * v_scale);
      }
    }
  }
  if constexpr (kRing) sm90::cluster_wait();  // every block of the ring is done with the others' shared memory
#endif
}

// ---- The persistent form (LayerPlan::attn_bwd_persist; DSKC_ATTN_BWD_PERSIST): sequences of 65 .. 128
// keys (up to two query tiles), fused dQ in clusters of two one-warpgroup blocks, D in the kernel,
// outputs by TMA. The same mathematics, order of summation and outputs as
// attn_flash_bwd_wgmma_impl<E, kDropout, 1, true, 2> (bitwise equal), but each cluster walks the heads
// first, first + clusters, … (grid: 2 × clusters blocks, clusters ≤ B·heads) instead of one head per
// cluster, so that a head's loads arrive while the previous head computes (bench/NOTES.md v44 measured
// a (64,128) block's life as ~23% prologue: loads in flight, nothing to compute). Measured (v47): the
// kernel −3% at (64,128) (0.0695 → 0.0677 ms), not the ~25% predicted: the other block on the SM
// already hid most of a prologue, and the heads' dependent chains bound the kernel.
//   K/V: two buffers, head n in buffer n % 2. Head n + 1's K/V are loaded once head n − 1's dK/dV
//     stores (staged in that buffer) have read it, at head n's second step.
//   Q/dO of query tile t in stage t, O in the dSᵀ region of the step that walks it (as above); head
//     n + 1's first tile goes in at head n's second step (its own first step's stage and region are
//     free then: its products are complete), the second at head n's end.
//   X: the peer's fp32 dQ share (16 KB), then, once added, the dQ tile staged for its TMA store.
// Per head with two tiles the cluster passes two barriers, as the per-head kernel does: at the second
// step (each block's X is free: its last share added, its last dQ store has read it) before the
// first tile's share goes to the peer, and at the end (both shares written) before it is added.
struct FlashWgBwdPersistTile {
  static constexpr int kThreads = 128;
  static constexpr int kKeys = 64;
  static constexpr int kQueries = 64;
  static constexpr int kTileBytes = 64 * 128;
  static constexpr int kKV0 = 0;                                    // K, V of buffer x: tiles 2x, 2x + 1
  static constexpr int kStage0 = kKV0 + 4 * kTileBytes;             // stage t: Q, dO of query tile t
  static constexpr int kDs0 = kStage0 + 4 * kTileBytes;             // two dSᵀ regions (O tiles arrive here)
  static constexpr int kX0 = kDs0 + 2 * kTileBytes;                 // the peer's share, then the dQ tile
  static constexpr int kXBytes = 64 * 64 * 4;
  static constexpr int kRows0 = kX0 + kXBytes;                      // per stage: L, D, 2 keep words per query
  static constexpr int kRowBytes = 4 * kQueries * 4;
  static constexpr int kBars0 = kRows0 + 2 * kRowBytes;             // full[2], kv[2]
  static_assert(kX0 % 1024 == 0 && kDs0 % 1024 == 0, "128B-swizzled tiles start 1024-aligned");
  static constexpr int smem_bytes = 1024 + kBars0 + 8 * 4;
  static constexpr int kMinBlocks = 2;
};

template <typename E, bool kDropout>
__device__ __forceinline__ void attn_flash_bwd_wgmma_persist_impl(const AttnFlashBwdWgParams& p) {
#if DSKC_SM90A
  static_assert(sizeof(E) == 2, "wgmma attention runs on fp16/bf16 only");
  static_assert(kHeadDim == 64, "the wgmma attention backward is built for head dim 64 (128-byte tile rows)");
  using F = FlashWgBwdPersistTile;
  constexpr int kTile = F::kTileBytes;
  extern __shared__ unsigned char attn_wg_smem[];
  const uint32_t base = (sm90::smem_u32(attn_wg_smem) + 1023u) & ~1023u;
  unsigned char* const smem_ptr = attn_wg_smem - sm90::smem_u32(attn_wg_smem);  // + a shared address = its pointer
  auto full = [&](int s) { return base + F::kBars0 + 8u * s; };
  auto kv_bar = [&](int x) { return base + F::kBars0 + 8u * (2 + x); };
  float4* const xslot = reinterpret_cast<float4*>(smem_ptr + base + F::kX0);

  const int seq = p.seq, heads = p.batch * kHeads;
  const int tiles = (seq + F::kQueries - 1) / F::kQueries;  // 1 or 2 (the plan: max_seq <= 128)
  const int part = static_cast<int>(blockIdx.x % 2);        // the block's rank: keys j0 .. j0 + 63
  const int j0 = F::kKeys * part;
  const int clusters = static_cast<int>(gridDim.x / 2), first = static_cast<int>(blockIdx.x / 2);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, tid = threadIdx.x;
  const int w = warp, g = lane / 4, t = lane % 4;
  const int words = (seq + 31) / 32;
  // Step `it` of a head walks query tile (it + part) % tiles (the halves start at different tiles);
  // it < tiles and part <= 1, so one conditional subtraction is the modulo (no integer division).
  auto tile_of = [&](int it) { return it + part >= tiles ? it + part - tiles : it + part; };
  // Head bh's K/V into buffer x (thread 0).
  auto load_kv = [&](int bh, int x) {
    const int b = bh / kHeads, h = bh % kHeads;
    const uint32_t kt = base + F::kKV0 + 2 * x * kTile;
    sm90::mbar_arrive_expect_tx(kv_bar(x), 2 * kTile);
    sm90::tma_load_3d(kt, &p.qkv, kv_bar(x), kHidden + h * kHeadDim, j0, b);
    sm90::tma_load_3d(kt + kTile, &p.qkv, kv_bar(x), 2 * kHidden + h * kHeadDim, j0, b);
  };
  // Head bh's Q and dO of query tile tq into stage tq, O into the region of the step that walks it
  // (step (tq + part) % tiles) (thread 0).
  auto load_stage = [&](int bh, int tq) {
    const int b = bh / kHeads, h = bh % kHeads;
    const uint32_t qt = base + F::kStage0 + 2 * tq * kTile;
    sm90::mbar_arrive_expect_tx(full(tq), 3 * kTile);
    sm90::tma_load_3d(qt, &p.qkv, full(tq), h * kHeadDim, tq * F::kQueries, b);
    sm90::tma_load_3d(qt + kTile, &p.dctx, full(tq), h * kHeadDim, tq * F::kQueries, b);
    sm90::tma_load_3d(base + F::kDs0 + tile_of(tq) * kTile, &p.ctx, full(tq), h * kHeadDim,
                      tq * F::kQueries, b);
  };
  // Head bh's L and keep words of query tile tq into stage tq's row values (warp 0).
  auto load_rows = [&](int bh, int tq) {
    flash_wg_bwd::load_rows<kDropout, false, 2>(base + F::kRows0 + tq * F::kRowBytes, full(tq),
                                                p.lse + static_cast<size_t>(bh) * seq, nullptr,
                                                kDropout ? p.bits + static_cast<size_t>(bh) * seq * words : nullptr, tq,
                                                seq, words, j0, lane);
  };
  // This thread's keys j0 + 16w + g (+8): their mask values (× log2 e; −inf past S), loaded a head ahead.
  auto mask_of = [&](int bh, float (&m)[2]) {
    const E* row = reinterpret_cast<const E*>(p.mask) + static_cast<size_t>(bh / kHeads) * seq;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int j = j0 + 16 * w + g + 8 * e;
      m[e] = j < seq ? to_f(row[j]) * flash::kLog2e : neg_inf();
    }
  };

  if (tid == 0) {
    for (int s = 0; s < 2; ++s) {
      sm90::mbar_init(full(s), 1 + 32);  // the TMA's expect_tx arrival + the 32 lanes' cp.async arrivals
      sm90::mbar_init(kv_bar(s), 1);
    }
    sm90::mbar_init_fence();
    sm90::tma_prefetch_descriptor(&p.qkv);
    sm90::tma_prefetch_descriptor(&p.dctx);
    sm90::tma_prefetch_descriptor(&p.ctx);
    sm90::tma_prefetch_descriptor(&p.dqkv_out);
    if (first < heads) {
      load_kv(first, 0);
      for (int tq = 0; tq < tiles; ++tq) load_stage(first, tq);
    }
  }
  if (warp == 0) {
    __syncwarp();  // the barriers are initialized (thread 0, fenced) before the lanes' cp.async arrivals
    if (first < heads)
      for (int tq = 0; tq < tiles; ++tq) load_rows(first, tq);
  }
  float mask_next[2];
  if (first < heads) mask_of(first, mask_next);
  __syncthreads();  // barriers initialized

  const float scale = 1.f / sqrtf(static_cast<float>(kHeadDim));
  const float scale2 = scale * flash::kLog2e;
  const float v_scale = kDropout ? kAttnDropoutScale : 1.f;
  // The warp's 16 keys lie in one keep word of each query row: the stage's word 2 + w/2, bits 16(w%2) + g (+8).
  const uint32_t keep_bit[2] = {1u << (16 * (w % 2) + g), 1u << (16 * (w % 2) + g + 8)};
  float dk[32], dv[32], st[32], dpt[32], dq[32];
  uint32_t pa[4][4], sa[4][4];
  int n = 0;
  for (int bh = first; bh < heads; bh += clusters, ++n) {
    const int b = bh / kHeads, h = bh % kHeads, next = bh + clusters, x = n & 1;
    const uint32_t k_tile = base + F::kKV0 + 2 * x * kTile, v_tile = k_tile + kTile;
    const uint32_t phase = static_cast<uint32_t>(n & 1);
    const float mask_r[2] = {mask_next[0], mask_next[1]};
    sm90::mbar_wait(kv_bar(x), static_cast<uint32_t>((n >> 1) & 1));
#pragma unroll
    for (int i = 0; i < 32; ++i) dk[i] = dv[i] = 0.f;
    for (int it = 0; it < tiles; ++it) {
      const int tq = tile_of(it);
      const uint32_t q_tile = base + F::kStage0 + 2 * tq * kTile, do_tile = q_tile + kTile;
      float* const rows_s = reinterpret_cast<float*>(smem_ptr + base + F::kRows0 + tq * F::kRowBytes);
      sm90::mbar_wait(full(tq), phase);
      flash_wg_bwd::products<E>(st, dpt, k_tile, v_tile, q_tile, do_tile);
      flash_wg_bwd::dot_rows<E>(base + F::kDs0 + it * kTile, do_tile, rows_s + F::kQueries, tid);
      sm90::wgmma_wait<0>();  // this tile's Sᵀ, dPᵀ and the previous step's dV/dK and dq products
      sm90::fence_operands(st);
      sm90::fence_operands(dpt);
      sm90::fence_operands(dk);
      sm90::fence_operands(dv);
      sm90::fence_operands(dq);
      // The previous head's stores have read the other K/V buffer and X (thread 0 issued them).
      if (it == 1 && tid == 0) sm90::tma_store_wait_read<0>();
      sm90::warpgroup_sync(0);  // the tile's D is in shared memory; (it == 1) step 0's stage, region, rows are free
      if (it == 1) {
        // Head next's K/V and first tile while this step and the head's end run.
        if (next < heads) {
          if (tid == 0) {
            sm90::fence_proxy_async();
            load_kv(next, x ^ 1);
            load_stage(next, tile_of(0));
          }
          if (warp == 0) load_rows(next, tile_of(0));
          mask_of(next, mask_next);
        }
        // Step 0's share (complete with the wait above) into the peer's X, once both blocks' X are free.
        sm90::cluster_arrive_release();
        sm90::cluster_wait();
#pragma unroll
        for (int i = 0; i < 8; ++i)
          sm90::st_cluster_f4(sm90::smem_u32(xslot + i * 128 + tid), static_cast<uint32_t>(part ^ 1),
                              make_float4(dq[4 * i], dq[4 * i + 1], dq[4 * i + 2], dq[4 * i + 3]));
      }
      const uint32_t* const keep_s = reinterpret_cast<const uint32_t*>(rows_s) + (2 + w / 2) * F::kQueries + 2 * t;
      flash_wg_bwd::softmax_ds<kDropout>(st, dpt, rows_s + 2 * t, rows_s + F::kQueries + 2 * t, keep_s, keep_bit,
                                         mask_r, scale2);
      flash::pack_acc64<E>(pa, st);
      flash::pack_acc64<E>(sa, dpt);
      flash_wg_bwd::dv_dk<E>(dv, dk, pa, sa, q_tile, do_tile);
      // dSᵀ into region `it` (its O tile was read above, before the barrier), the A operand of dq = dS·K.
      const uint32_t region = base + F::kDs0 + it * kTile;
      sm90::stmatrix_tile64(region, sa);
      sm90::fence_proxy_async();
      sm90::warpgroup_sync(0);
      flash_wg_bwd::dq_product<E>(dq, region, k_tile);
    }
    sm90::wgmma_wait<0>();
    sm90::fence_operands(dk);
    sm90::fence_operands(dv);
    sm90::fence_operands(dq);
    if (tiles == 2) {
      // Both shares written: the peer's first-tile share, which is this block's last tile, is in X.
      sm90::cluster_arrive_release();
      sm90::cluster_wait();
      flash_wg_bwd::add_share(dq, xslot, tid);
    } else if (tid == 0) {
      sm90::tma_store_wait_read<0>();  // the previous head's stores have read the other K/V buffer and X
    }
    sm90::warpgroup_sync(0);  // X read by every thread; every step's stage, region and rows free
    if (next < heads) {
      if (tiles == 2) {
        if (tid == 0) {
          sm90::fence_proxy_async();
          load_stage(next, tile_of(1));
        }
        if (warp == 0) load_rows(next, tile_of(1));
      } else {
        if (tid == 0) {
          sm90::fence_proxy_async();
          load_kv(next, x ^ 1);
          load_stage(next, 0);
        }
        if (warp == 0) load_rows(next, 0);
        mask_of(next, mask_next);
      }
    }
    // dQ of the block's last tile (the half with keys past S and one tile has none), dK and dV: staged
    // in X and this head's K/V tiles (their last products are complete), stored by TMA (rows past S
    // clipped); the next reuse of either waits until the stores have read them.
    const bool has_dq = tiles == 2 || part == 0;
    uint32_t pk[4][4];
    if (has_dq) {
      flash::pack_acc64<E>(pk, dq, scale, scale);
      sm90::stmatrix_tile64(base + F::kX0, pk);
    }
    flash::pack_acc64<E>(pk, dk, scale, scale);
    sm90::stmatrix_tile64(k_tile, pk);
    flash::pack_acc64<E>(pk, dv, v_scale, v_scale);
    sm90::stmatrix_tile64(v_tile, pk);
    sm90::fence_proxy_async();
    sm90::warpgroup_sync(0);
    if (tid == 0) {
      if (j0 < seq) {  // (all of the second key half can lie past S)
        sm90::tma_store_3d(&p.dqkv_out, k_tile, kHidden + h * kHeadDim, j0, b);
        sm90::tma_store_3d(&p.dqkv_out, v_tile, 2 * kHidden + h * kHeadDim, j0, b);
      }
      if (has_dq) sm90::tma_store_3d(&p.dqkv_out, base + F::kX0, h * kHeadDim, tile_of(tiles - 1) * F::kQueries, b);
      sm90::tma_store_commit();
    }
  }
  if (tid == 0) sm90::tma_store_wait_read<0>();  // the block's shared memory stays until the stores have read it
#else
  (void)p;
  __trap();  // planned only for sm_90 targets, built as sm_90a
#endif
}

}  // namespace dskc
