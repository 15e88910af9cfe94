// gemm_sm90: dskc's Hopper GEMM C = A·Bᵀ. The FFN's two GELU GEMMs with the GELU fused into the
// epilogue (cuBLASLt has no erf-GELU epilogue, its GELU is the tanh form, and the separate bias_gelu
// passes cost a read and a write of the [B·S, I] activations each), and the forward's other linear
// GEMMs with plain epilogues (DSKC_LINEAR_GEMM=sm90):
//   kBiasGeluSaveGrad (gemm_inter_fwd):  h = A·Bᵀ + bias; g = GELU(h) to `gelu` and GELU'(h) (not h)
//                   to `out`, for kDGeluSaved (the default where both GELU GEMMs are gemm_sm90)
//   kBiasGelu       (gemm_inter_fwd, gelu_checkpoint or DSKC_GELU_SAVE=input): h to `out`, g to `gelu`
//   kBiasGeluNoPre  (inference):         only g
//   kDGeluSaved     (gemm_output_dgrad): dh = (A·Bᵀ) ⊙ GELU'(h), GELU'(h) read from `pre`: the
//                   products times a saved factor, in registers (no GELU arithmetic)
//   kDGelu          (gemm_output_dgrad, DSKC_GELU_SAVE=input): the same from h read from `pre`
//   kDGeluStoreGelu (gelu_checkpoint):   the same, and g = GELU(h) to `gelu`
//   kBias           (gemm_qkv_fwd):      A·Bᵀ + bias to `out`
//   kPlain          (gemm_attn_out_fwd, gemm_output_fwd; with DSKC_DGRAD_GEMM=sm90 the backward's
//                   gemm_inter_dgrad, gemm_attn_out_dgrad, gemm_qkv_dgrad): A·Bᵀ to `out`
//   kBiasDropoutResidual (gemm_output_fwd with DSKC_OUTPUT_GEMM=fused, Pre-LN): out = r + dropout(A·Bᵀ
//                   + bias), r (the attention residual sum) read from `pre`, the hidden dropout of
//                   the FFN output drawn as bias_dropout_residual_fwd does (the product rounded to T
//                   first, then the same fp32 arithmetic: bitwise the same layer output)
// A is [m, kK] and B [kN, kK], both row-major (K contiguous): C = A·Bᵀ is the layout of
// x·Wᵀ with W = [out, in] as stored. The data gradients dY·W read W = [kK, kN] as stored (kBNMajor:
// each stage's B is two [64 k][64 n] TMA boxes, which the wgmmas read N-major, imm-tnsp-b = 1;
// DSKC_SM90_WEIGHT=in_place, the default) or take Wᵀ that templates/weight_transpose.cuh wrote first
// (DSKC_SM90_WEIGHT=transpose; bitwise the same products, bench/NOTES.md v54). The product (+ bias)
// is rounded to T once, and the GELU is the same device function of that rounded value as on the cuBLASLt + bias_gelu path (common/gelu.cuh).
// GELU' is common/gelu.cuh's gelu_and_grad of that value, rounded to T before it multiplies the
// rounded product (dh = round(round(dY·W) · round(GELU'(h)))), in every GELU' epilogue alike: so
// saving GELU'(h) in the forward (kBiasGeluSaveGrad + kDGeluSaved) or recomputing it from h
// (kDGelu, kDGeluStoreGelu) gives bitwise the same dh, with or without gelu_checkpoint. (The
// cuBLASLt path's bias_gelu_bwd multiplies by the unrounded fp32 GELU'(h): within one rounding.)
//
// Structure: a persistent, warp-specialized "ping-pong" kernel (one block per SM walks the 128 x 128
// output tiles, N fastest), 384 threads:
//   warp 0, one thread: the producer. TMA copies the 128 x 64 A and B tiles of each k block into a
//     ring of kStages shared-memory stages, tile after tile of this block's sequence (mbarrier
//     full[s] completes with the bytes, empty[s] when the warpgroup that read the stage is done).
//   warpgroups 1, 2: the math warpgroups. They take this block's tiles in turn (warpgroup 1 the
//     even ones, 2 the odd ones), each a whole 128 x 128 tile: two wgmma m64n128k16 per k16 step into
//     2 x 64 fp32 accumulators per thread, one commit group in flight while the next is issued. Their
//     mainloops take turns (named barriers 3, 4), so one warpgroup's mainloop runs while the other
//     does its epilogue ("ping-pong"): per 64-row half, the rounded products (+ bias) go by stmatrix
//     into one of its 16 KB shared-memory regions (GemmEpi::regions: two or three) in the TMA boxes'
//     swizzled layout, a rolled pass over each warp's own rows applies GELU / GELU' with 16-byte
//     shared loads and stores, and one thread stores the regions by TMA (64 x 64 boxes; rows past m
//     are not written). The backward's h tile arrives by TMA into two of the regions while the tile's
//     mainloop runs; dh overwrites it in place. The forward's GELU epilogue reuses its two regions
//     once the TMA has read them, which leaves room for a fifth stage (bench/NOTES.md v42: measured
//     per tile, the mainloop takes ~19k cycles with four, five or six stages, so the ring's depth is
//     not what holds it back).
// Registers: __launch_bounds__(384, 1) gives every thread 168, enough for the 128 accumulators.
// Measured (bench/NOTES.md v17, v18): the mainloop alone runs at ~775 TFLOP/s on the FFN shapes
// (cuBLASLt: ~650), with the stores ~625, but the GELU / GELU' arithmetic of every element, though
// overlapped with the other warpgroup's mainloop, slows it (~0.03 ms a GEMM). Since v26 the forward
// GELU GEMM is the default on sm_90, and since v48 (the warpgroup index and the k loop's descriptors
// in uniform registers: no R2UR per HGMMA, 16% less code) the backward one too (DSKC_FFN_GEMM=sm90).
// (v17's kernel: both warpgroups on one 128 x 256 tile and three epilogue warps.)
#pragma once
#include "dskc_config.cuh"
#include "common/types.cuh"
#include "common/dropout.cuh"
#include "common/gelu.cuh"
#include "common/sm90.cuh"

namespace dskc {

struct GemmEpi {
  static constexpr int kBiasGelu = 0;
  static constexpr int kBiasGeluNoPre = 1;
  static constexpr int kDGelu = 2;
  static constexpr int kDGeluStoreGelu = 3;
  static constexpr int kBias = 4;
  static constexpr int kPlain = 5;
  static constexpr int kBiasDropoutResidual = 6;
  static constexpr int kBiasGeluSaveGrad = 7;
  static constexpr int kDGeluSaved = 8;
  static constexpr bool plain(int epi) { return epi == kBias || epi == kPlain; }
  // The forward GELU epilogues (h staged, then a GELU pass over it).
  static constexpr bool gelu_fwd(int epi) { return epi == kBiasGelu || epi == kBiasGeluNoPre || epi == kBiasGeluSaveGrad; }
  // 64-row shared-memory regions per math warpgroup: three for the backward's GELU′ epilogues from h
  // (h's two halves and the products), kGemmGeluRegions (2 or 3; the plan's choice) for the forward's
  // GELU ones, two for the others (kBiasDropoutResidual and kDGeluSaved work in registers on the
  // staged residual / GELU′(h)).
  // Every region fewer leaves room for one more pipeline stage (7 − regions).
  static constexpr int regions(int epi) {
    return epi == kDGelu || epi == kDGeluStoreGelu ? 3 : gelu_fwd(epi) ? kGemmGeluRegions : 2;
  }
};

// Shapes; compiler/plan.cpp mirrors kBlockM, kBlockN, kThreads and smem_bytes (static_asserts in
// the generated source).
struct GemmSm90Tile {
  static constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 64;
  static constexpr int kThreads = 384;
  static constexpr int kABytes = kBlockM * kBlockK * 2;  // one stage of A (128 rows x 128 bytes)
  static constexpr int kBBytes = kBlockN * kBlockK * 2;
  // Epilogue TMA boxes: 64 columns (128 bytes, swizzled) x 64 rows; a 64-row half of a tile of one
  // tensor ("region") is two boxes; each math warpgroup has GemmEpi::regions(epi) of them.
  static constexpr int kBoxRows = 64, kBoxBytes = kBoxRows * 128, kHalfBytes = 2 * kBoxBytes;
  static constexpr int stages(int epi) { return 7 - GemmEpi::regions(epi); }
  static constexpr int epi_bytes(int epi) { return GemmEpi::regions(epi) * kHalfBytes; }
  static constexpr int barriers(int epi) { return 2 * stages(epi) + 2; }
  // + 1024: the stages and boxes need 1024-byte alignment (128B swizzle) and the dynamic base has less.
  static constexpr int smem_bytes(int epi) {
    return 1024 + stages(epi) * (kABytes + kBBytes) + 2 * epi_bytes(epi) + 8 * barriers(epi);
  }
};
static_assert(GemmSm90Tile::smem_bytes(GemmEpi::kBiasGelu) <= 227 * 1024 &&
                  GemmSm90Tile::smem_bytes(GemmEpi::kDGelu) <= 227 * 1024 &&
                  GemmSm90Tile::smem_bytes(GemmEpi::kPlain) <= 227 * 1024,
              "gemm_sm90 needs more shared memory than an SM has");
static_assert(kGemmGeluRegions == 2 || kGemmGeluRegions == 3, "gemm_sm90: 2 or 3 GELU epilogue regions");

struct GemmSm90Params {
  sm90::TmaDescriptor a;     // A [m, kK], box kBlockK x kBlockM
  sm90::TmaDescriptor b;     // B [kN, kK], box kBlockK x kBlockN; kBNMajor: [kK, kN], box 64 (n) x kBlockK
  sm90::TmaDescriptor out;   // [m, kN] h (kBiasGelu), GELU'(h) (kBiasGeluSaveGrad), dh (kDGelu*) or C
                             // (kBias, kPlain), 64 x 64 boxes (stores)
  sm90::TmaDescriptor gelu;  // [m, kN] GELU(h) (kBiasGelu*, kDGeluStoreGelu), 64 x 64 boxes (stores)
  sm90::TmaDescriptor pre;   // [m, kN] the saved h (kDGelu, kDGeluStoreGelu) or GELU'(h) (kDGeluSaved), or
                             // the residual (kBiasDropoutResidual), 64 x 64 boxes (loads)
  const T* bias;             // [kN] (kBiasGelu*, kBias, kBiasDropoutResidual)
  int m;
  DropoutArgs rng;           // kBiasDropoutResidual: the FFN output's hidden dropout
  unsigned* sched;           // kGemmDynamicTiles: [2] the next tile, the blocks done; zero between launches
};
static_assert(sizeof(GemmSm90Params) == 768, "GemmSm90Params mirrors runtime/kernel_params.h's GemmSm90");

namespace gemm_detail {
template <typename E>
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  Vec<E, 2> v;
  v.v[0] = from_f<E>(a);
  v.v[1] = from_f<E>(b);
  return *reinterpret_cast<const uint32_t*>(&v);
}
// a · b per 16-bit lane of two packed pairs of E, each exact product rounded once to E (one
// mul.rn.f16x2 / bf16x2; the product of two 16-bit values is exact in fp32, so this is the fp32
// product rounded to E): dh from the rounded products and the rounded GELU'(h) in every GELU'
// epilogue.
template <typename E>
__device__ __forceinline__ uint32_t mul2(uint32_t a, uint32_t b) {
  uint32_t d;
  if constexpr (sm90::SameType<E, __nv_bfloat16>::value)
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
template <int kEpi>
struct EpiHasBias {  // the epilogues that add a bias
  static constexpr bool value = GemmEpi::gelu_fwd(kEpi) || kEpi == GemmEpi::kBias;
};
// This thread's stmatrix row address for column pair i (columns 16i..16i+15) of a half
// region: lane l addresses row 16w + 8((l/8)%2) + l%8 of matrix l/8, whose columns start at
// 16i + 8(l/16); in the 128B-swizzled box the 16-byte chunk j of row r sits at j ^ (r % 8).
// Matrix q of pair i holds the accumulators of column group g = 2i + q/2, rows +8(q%2): d[4g + 2(q%2)], +1.
__device__ __forceinline__ uint32_t frag_addr(uint32_t region, int w, int l, int i) {
  const int row = 16 * w + ((l >> 3) & 1) * 8 + (l & 7);
  const int chunk = (2 * i + (l >> 4)) & 7;
  return region + (i >> 2) * GemmSm90Tile::kBoxBytes + row * 128 + ((chunk ^ (l & 7)) << 4);
}
}  // namespace gemm_detail

template <int kN, int kK, int kEpi, bool kBNMajor = false>
__device__ __forceinline__ void gemm_sm90_impl(const GemmSm90Params& p) {
#if DSKC_SM90A
  using G = GemmSm90Tile;
  using gemm_detail::frag_addr;
  static_assert(kN % G::kBlockN == 0 && kK % G::kBlockK == 0, "gemm_sm90 needs N % 128 == 0 and K % 64 == 0");
  constexpr bool kBias = gemm_detail::EpiHasBias<kEpi>::value;
  // h (kDGelu*), GELU'(h) (kDGeluSaved) or the residual (kBiasDropoutResidual) by TMA into two regions
  // during the mainloop
  constexpr bool kLoadsPre = kEpi == GemmEpi::kDGelu || kEpi == GemmEpi::kDGeluStoreGelu ||
                             kEpi == GemmEpi::kDGeluSaved || kEpi == GemmEpi::kBiasDropoutResidual;
  constexpr int kTilesN = kN / G::kBlockN, kKBlocks = kK / G::kBlockK, kStages = G::stages(kEpi);
  // kBiasDropoutResidual works on both accumulator halves in registers (with the Philox draws) and
  // would spill at 168: there the producer warpgroup (one issuing thread) gives the math warpgroups
  // its share, 128 · 40 + 256 · 232 = 64512 of the SM's 65536. (For every epilogue this measured no
  // faster: bench/NOTES.md v27.)
  constexpr bool kRegSplit = kEpi == GemmEpi::kBiasDropoutResidual;
  constexpr int kProducerRegs = 40, kMathRegs = 232;
  constexpr int kEpiBytes = G::epi_bytes(kEpi);
  extern __shared__ unsigned char gemm_smem[];
  const uint32_t base = (sm90::smem_u32(gemm_smem) + 1023u) & ~1023u;
  const uint32_t s_a = base, s_b = base + kStages * G::kABytes;
  const uint32_t s_epi = s_b + kStages * G::kBBytes;
  const uint32_t bars = s_epi + 2 * kEpiBytes;
  auto full = [&](int s) { return bars + 8u * s; };
  auto empty = [&](int s) { return bars + 8u * (kStages + s); };
  auto hfull = [&](int c) { return bars + 8u * (2 * kStages + c); };

  const int tiles = (p.m + G::kBlockM - 1) / G::kBlockM * kTilesN;
  auto tile_m0 = [&](int tile) { return tile / kTilesN * G::kBlockM; };
  auto tile_n0 = [&](int tile) { return tile % kTilesN * G::kBlockN; };
  const int wg = sm90::warpgroup_index(), t = threadIdx.x % 128;
  // kGemmDynamicTiles: the producer takes each next tile from a global counter (atomicAdd) instead of
  // the static sequence blockIdx.x + j·gridDim.x, so blocks that start late (their SMs busy with the
  // other stream's kernels) take fewer tiles; it passes the j-th tile to the math warpgroups through
  // an 8-slot ring in shared memory (slot j % 8, mbarrier phase j / 8), at least one tile ahead. A
  // tile's arithmetic does not depend on the block that computes it: the same results bitwise.
  constexpr bool kDynamic = kGemmDynamicTiles;
  __shared__ int tile_ring[8];
  __shared__ unsigned long long tile_bar[8];
  auto tile_slot_bar = [&](int j) { return sm90::smem_u32(&tile_bar[j % 8]); };
  if (threadIdx.x == 0) {
    if constexpr (kDynamic)
      for (int s = 0; s < 8; ++s) sm90::mbar_init(tile_slot_bar(s), 1);
    for (int s = 0; s < kStages; ++s) {
      sm90::mbar_init(full(s), 1);   // the producer's arrive_expect_tx (+ the TMA bytes)
      sm90::mbar_init(empty(s), 1);  // the math warpgroup that read the stage
    }
    sm90::mbar_init(hfull(0), 1);  // the math warpgroup's own h loads (+ their bytes)
    sm90::mbar_init(hfull(1), 1);
    sm90::mbar_init_fence();
    sm90::tma_prefetch_descriptor(&p.a);
    sm90::tma_prefetch_descriptor(&p.b);
  }
  __syncthreads();

  if (wg == 0) {
    // ---- producer: every k block of this block's tiles, in order ----
    if constexpr (kRegSplit) sm90::setmaxnreg_dec<kProducerRegs>();
    if (t == 0) {
      int stage = 0;
      uint32_t phase = 0;
      // kDynamic: the next tile from the counter, `tiles` once it is past the last; the block that
      // finds it so last of all resets both counters for the next launch (every block has then taken
      // its last tile: no atomicAdd on the counter follows).
      bool exhausted = false;
      auto take = [&]() -> int {
        if (exhausted) return tiles;
        const int id = static_cast<int>(atomicAdd(&p.sched[0], 1u));
        if (id < tiles) return id;
        exhausted = true;
        __threadfence();  // this block's last take is ordered before its count, so before the reset
        if (atomicAdd(&p.sched[1], 1u) == gridDim.x - 1) {
          atomicExch(&p.sched[0], 0u);
          atomicExch(&p.sched[1], 0u);
        }
        return tiles;
      };
      auto put = [&](int j, int id) {  // the j-th tile to the math warpgroups
        tile_ring[j % 8] = id;
        sm90::mbar_arrive(tile_slot_bar(j));
      };
      // kDynamic: tiles j + 1 and j + 2 of this block while tile j's blocks are loaded
      int first = 0, next = 0, after = 0;
      if constexpr (kDynamic) {
        first = take();
        put(0, first);
        next = take();
        put(1, next);
      }
      auto advance = [&] {
        const int n = next;
        next = after;
        return n;
      };
      for (int j = 0, tile = kDynamic ? first : blockIdx.x; tile < tiles;
           ++j, tile = kDynamic ? advance() : tile + gridDim.x) {
        const int m0 = tile_m0(tile), n0 = tile_n0(tile);
        for (int kb = 0; kb < kKBlocks; ++kb) {
          sm90::mbar_wait(empty(stage), phase ^ 1u);
          sm90::mbar_arrive_expect_tx(full(stage), G::kABytes + G::kBBytes);
          sm90::tma_load_2d(s_a + stage * G::kABytes, &p.a, full(stage), kb * G::kBlockK, m0);
          if constexpr (kBNMajor) {  // rows kb·64.. of W [kK, kN], columns n0.. in two 64-wide boxes
            const uint32_t sb = s_b + stage * G::kBBytes;
            sm90::tma_load_2d(sb, &p.b, full(stage), n0, kb * G::kBlockK);
            sm90::tma_load_2d(sb + G::kBBytes / 2, &p.b, full(stage), n0 + 64, kb * G::kBlockK);
          } else {
            sm90::tma_load_2d(s_b + stage * G::kBBytes, &p.b, full(stage), kb * G::kBlockK, n0);
          }
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1u;
          }
          if (kDynamic && kb == 0) {  // the tile after next, while this one's first block loads
            after = take();
            put(j + 2, after);
          }
        }
      }
    }
    return;
  }

  // ---- math warpgroup c: this block's tiles c, c + 2, ... (the j-th tile is blockIdx.x + j·grid) ----
  if constexpr (kRegSplit) sm90::setmaxnreg_inc<kMathRegs>();
  const int c = wg - 1, w = t / 32, l = t % 32;
  const uint32_t epi = s_epi + c * kEpiBytes;
  auto region = [&](int k) { return epi + k * G::kHalfBytes; };
  unsigned char* const smem_base = gemm_smem - sm90::smem_u32(gemm_smem);  // + a shared address = its pointer
  // The elementwise passes: warp w's rows (16w..16w+15 of a half: 256 16-byte chunks, the same
  // offsets in every region, whatever the swizzle) in 8 steps of 32 consecutive chunks, a rolled
  // loop (the math fully unrolled over a tile was several thousand instructions per warp).
  auto chunk_off = [&](int it) {
    const int k = it * 32 + l;
    return static_cast<uint32_t>((k >> 7) * G::kBoxBytes + 16 * w * 128 + (k & 127) * 16);
  };
  auto vec_at = [&](uint32_t addr) -> Vec<T, 8>& { return *reinterpret_cast<Vec<T, 8>*>(smem_base + addr); };
  // TMA stores of one half region: the two 64 x 64 boxes at rows row0.., columns n0.. (one commit group).
  auto store_half = [&](const sm90::TmaDescriptor* map, uint32_t r, int n0, int row0) {
    sm90::tma_store_2d(map, r, n0, row0);
    sm90::tma_store_2d(map, r + G::kBoxBytes, n0 + 64, row0);
    sm90::tma_store_commit();
  };
  // Every thread's shared-memory writes are done and visible to the TMA (async) proxy.
  auto publish = [&] {
    sm90::fence_proxy_async();
    sm90::warpgroup_sync(c);
  };
  // The regions may be overwritten: every store this warpgroup issued has read them.
  auto regions_free = [&] {
    if (t == 0) sm90::tma_store_wait_read<0>();
    sm90::warpgroup_sync(c);
  };
  float acc0[64], acc1[64];
  uint32_t hphase = 0;
  // kDynamic: the j-th tile of this block from the producer's ring (`tiles` past the last).
  auto ring_tile = [&](int j) -> int {
    sm90::mbar_wait(tile_slot_bar(j), (j / 8) & 1);
    return *reinterpret_cast<volatile int*>(&tile_ring[j % 8]);
  };
  for (int j = c, tile = kDynamic ? ring_tile(c) : blockIdx.x + c * gridDim.x; tile < tiles;
       j += 2, tile = kDynamic ? ring_tile(j) : tile + 2 * gridDim.x) {
    const int m0 = tile_m0(tile), n0 = tile_n0(tile);
    int stage = j * kKBlocks % kStages, prev = 0;
    uint32_t phase = (j * kKBlocks / kStages) & 1u;
    // Fresh accumulators: the wgmmas then always accumulate, and the compiler sees the previous
    // tile's values die in its epilogue (an in-out asm operand would otherwise keep all 128 live).
#pragma unroll
    for (int k = 0; k < 64; ++k) acc0[k] = acc1[k] = 0.f;
    sm90::fence_operands(acc0);
    sm90::fence_operands(acc1);
    // The mainloops take turns: this one starts once the other warpgroup has waited for the last
    // block of its tile. An mbarrier wait tells phases apart only by parity, so a warpgroup may wait
    // for a stage's block only after that stage's previous block (kStages earlier: possibly the other
    // warpgroup's) has arrived; otherwise it could take that one for its own.
    if (j > 0) sm90::turn_wait(c);
    for (int kb = 0; kb < kKBlocks; ++kb) {
      sm90::mbar_wait(full(stage), phase);
      sm90::wgmma_fence();
      const uint64_t da = sm90::wgmma_desc_k128(s_a + stage * G::kABytes);
      // B N-major: the two 64-column boxes 8 KB apart (LBO), a k16 step is 16 of its 128-byte rows.
      const uint64_t db = kBNMajor ? sm90::wgmma_desc_mn128(s_b + stage * G::kBBytes, G::kBBytes / 2)
                                   : sm90::wgmma_desc_k128(s_b + stage * G::kBBytes);
#pragma unroll
      for (int k = 0; k < G::kBlockK / 16; ++k) {
        const uint64_t dbk = sm90::wgmma_desc_advance(db, kBNMajor ? 16 * 128 * k : 32 * k);
        sm90::wgmma_m64n128k16<T, kBNMajor>(acc0, sm90::wgmma_desc_advance(da, 32 * k), dbk);
        sm90::wgmma_m64n128k16<T, kBNMajor>(acc1, sm90::wgmma_desc_advance(da, 64 * 128 + 32 * k), dbk);
      }
      sm90::wgmma_commit();
      if constexpr (kLoadsPre) {
        // The tile's h (or residual) into this warpgroup's regions (free once the previous tile's
        // stores have read them), arriving while the mainloop runs.
        if (kb == 0 && t == 0) {
          sm90::tma_store_wait_read<0>();
          sm90::mbar_arrive_expect_tx(hfull(c), 2 * G::kHalfBytes);
          for (int half = 0; half < 2; ++half)
            for (int box = 0; box < 2; ++box)
              sm90::tma_load_2d(region(half) + box * G::kBoxBytes, &p.pre, hfull(c), n0 + 64 * box, m0 + 64 * half);
        }
      }
      if (kb > 0) {
        sm90::wgmma_wait<1>();  // the previous k block's MMAs are done: release its stage
        if (t == 0) sm90::mbar_arrive(empty(prev));
      }
      prev = stage;
      if (++stage == kStages) {
        stage = 0;
        phase ^= 1u;
      }
    }
    // the other warpgroup has a next tile
    if ((kDynamic ? ring_tile(j + 1) : tile + gridDim.x) < tiles) sm90::turn_give(1 - c);
    sm90::wgmma_wait<0>();
    sm90::fence_operands(acc0);
    sm90::fence_operands(acc1);
    if (t == 0) sm90::mbar_arrive(empty(prev));

    // ---- epilogue, one 64-row half (one accumulator array) at a time: the rounded products (+ bias)
    // into a region by stmatrix, then the GELU / GELU' pass over the warp's own rows, then TMA stores ----
    auto stage_half = [&](const float(&acc)[64], uint32_t r) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        uint32_t v[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int g = 2 * i + q / 2, x = 4 * g + 2 * (q % 2);
          float bv[2] = {0.f, 0.f};
          if constexpr (kBias) load_f<T, 2>(p.bias + n0 + 8 * g + 2 * (l & 3), bv);
          v[q] = gemm_detail::pack2<T>(acc[x] + bv[0], acc[x + 1] + bv[1]);
        }
        sm90::stmatrix_x4(frag_addr(r, w, l, i), v);
      }
      __syncwarp();
    };
    // GELU(src) -> dst, chunk by chunk (src == dst: in place); kBiasGeluSaveGrad also GELU'(src) -> src.
    auto gelu_pass = [&](uint32_t src, uint32_t dst) {
#pragma unroll 1
      for (int it = 0; it < 8; ++it) {
        const uint32_t o = chunk_off(it);
        const Vec<T, 8> h = vec_at(src + o);
        Vec<T, 8> g;
        if constexpr (kEpi == GemmEpi::kBiasGeluSaveGrad) {
          Vec<T, 8> d;
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            float gv, dv;
            gelu_and_grad<kGeluTanh>(to_f(h.v[e]), gv, dv);
            g.v[e] = from_f<T>(gv);
            d.v[e] = from_f<T>(dv);
          }
          vec_at(src + o) = d;
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e) g.v[e] = from_f<T>(gelu<kGeluTanh>(to_f(h.v[e])));
        }
        vec_at(dst + o) = g;
      }
    };
    if constexpr (GemmEpi::plain(kEpi)) {
      // Both halves staged (regions 0, 1), then stored: no elementwise pass.
      regions_free();
      stage_half(acc0, region(0));
      stage_half(acc1, region(1));
      publish();
      if (t == 0) {
        store_half(&p.out, region(0), n0, m0);
        store_half(&p.out, region(1), n0, m0 + 64);
      }
    } else if constexpr (kEpi == GemmEpi::kBiasGelu || kEpi == GemmEpi::kBiasGeluSaveGrad) {
      // h0 -> region 0, GELU(h0) -> 1 (kBiasGeluSaveGrad: GELU'(h0) over h0 in region 0, stored to
      // `out` in its place). Three regions: h1 -> 2, GELU(h1) -> 0 once h0's stores have read it.
      // Two: h1 -> 0 once h0's stores have read it, GELU(h1) -> 1 once GELU(h0)'s have (the TMA reads
      // a region long before the next half is staged).
      constexpr bool k3 = kGemmGeluRegions == 3;
      const uint32_t rh1 = region(k3 ? 2 : 0), rg1 = region(k3 ? 0 : 1);
      regions_free();
      stage_half(acc0, region(0));
      gelu_pass(region(0), region(1));
      publish();
      if (t == 0) {
        store_half(&p.out, region(0), n0, m0);
        store_half(&p.gelu, region(1), n0, m0);
        if (!k3) sm90::tma_store_wait_read<1>();
      }
      if (!k3) sm90::warpgroup_sync(c);
      stage_half(acc1, rh1);
      if (t == 0) k3 ? sm90::tma_store_wait_read<1>() : sm90::tma_store_wait_read<0>();
      sm90::warpgroup_sync(c);
      gelu_pass(rh1, rg1);
      publish();
      if (t == 0) {
        store_half(&p.out, rh1, n0, m0 + 64);
        store_half(&p.gelu, rg1, n0, m0 + 64);
      }
    } else if constexpr (kEpi == GemmEpi::kBiasGeluNoPre) {
      regions_free();
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        stage_half(half ? acc1 : acc0, region(half));
        gelu_pass(region(half), region(half));
        publish();
        if (t == 0) store_half(&p.gelu, region(half), n0, m0 + 64 * half);
      }
    } else if constexpr (kEpi == GemmEpi::kBiasDropoutResidual) {
      // The residual of half k is in region k (TMA). It is read back by ldmatrix at the stmatrix
      // addresses, which gives every thread the residual pairs of its own accumulators; out = r +
      // dropout(round(v) + bias) in registers goes back by stmatrix in place (two regions per
      // warpgroup, so the fifth pipeline stage stays). Accumulators d[4g + 2h'], +1 are row
      // 16w + l/4 + 8h', columns 8g + 2(l%4), +1 of the half. The keep flags of a (row, 8-column
      // group) segment are one Philox call: column pair i has four segments per quad of lanes (the
      // same rows), g = 2i + q/2, h' = q%2 for q = 0..3; lane q of the quad draws segment q and two
      // xor shuffles give every lane all four 8-bit masks.
      sm90::mbar_wait(hfull(c), hphase);
      hphase ^= 1u;
      const int quad = l & 3;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const uint32_t rr = region(half);
        const float(&acc)[64] = half ? acc1 : acc0;
        const int row0 = m0 + 64 * half + 16 * w + (l >> 2);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          uint32_t masks = 0;  // byte q: segment q of this column pair
          if constexpr (kHiddenDropoutOn) {
            bool keep[8];
            dropout_keep_vec<8>(p.rng, dskc_rng::kStreamFfnOutput,
                                static_cast<uint64_t>(row0 + 8 * (quad & 1)) * kN + n0 + 8 * (2 * i + (quad >> 1)),
                                kHiddenDropoutThreshold, keep);
#pragma unroll
            for (int e = 0; e < 8; ++e) masks |= keep[e] ? 1u << e : 0u;
            masks <<= 8 * quad;
            masks |= __shfl_xor_sync(0xffffffffu, masks, 1);
            masks |= __shfl_xor_sync(0xffffffffu, masks, 2);
          }
          uint32_t v[4];
          sm90::ldmatrix_x4(frag_addr(rr, w, l, i), v);
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int g = 2 * i + q / 2, x = 4 * g + 2 * (q % 2);
            float b[2];
            load_f<T, 2>(p.bias + n0 + 8 * g + 2 * quad, b);
            const Vec<T, 2> r = *reinterpret_cast<const Vec<T, 2>*>(&v[q]);
            float o[2];
            if constexpr (kHiddenDropoutOn) {
              const uint32_t m = masks >> (8 * q + 2 * quad);
#pragma unroll
              for (int e = 0; e < 2; ++e)
                o[e] = to_f(r.v[e]) +
                       ((m >> e) & 1u ? (to_f(from_f<T>(acc[x + e])) + b[e]) * kHiddenDropoutScale : 0.f);
            } else {
#pragma unroll
              for (int e = 0; e < 2; ++e) o[e] = to_f(r.v[e]) + to_f(from_f<T>(acc[x + e])) + b[e];
            }
            v[q] = gemm_detail::pack2<T>(o[0], o[1]);
          }
          sm90::stmatrix_x4(frag_addr(rr, w, l, i), v);
        }
        __syncwarp();
        publish();
        if (t == 0) store_half(&p.out, rr, n0, m0 + 64 * half);
      }
    } else if constexpr (kEpi == GemmEpi::kDGeluSaved) {
      // GELU'(h) of half k is in region k (TMA). As kBiasDropoutResidual does with the residual, it is
      // read back by ldmatrix at the stmatrix addresses (every thread gets the factors of its own
      // accumulators), multiplied into the rounded products in registers, and dh goes back by
      // stmatrix in place: no elementwise pass, no GELU arithmetic.
      sm90::mbar_wait(hfull(c), hphase);
      hphase ^= 1u;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const uint32_t rr = region(half);
        const float(&acc)[64] = half ? acc1 : acc0;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          uint32_t v[4];
          sm90::ldmatrix_x4(frag_addr(rr, w, l, i), v);
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int x = 4 * (2 * i + q / 2) + 2 * (q % 2);
            v[q] = gemm_detail::mul2<T>(gemm_detail::pack2<T>(acc[x], acc[x + 1]), v[q]);
          }
          sm90::stmatrix_x4(frag_addr(rr, w, l, i), v);
        }
        __syncwarp();
        publish();
        if (t == 0) store_half(&p.out, rr, n0, m0 + 64 * half);
      }
    } else {
      // h of half k is in region k (TMA); the products go to region 2, dh overwrites h in place and,
      // under gelu_checkpoint, GELU(h) the products.
      constexpr bool kG = kEpi == GemmEpi::kDGeluStoreGelu;
      sm90::mbar_wait(hfull(c), hphase);
      hphase ^= 1u;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const uint32_t rh = region(half), rv = region(2);
        if (kG && half == 1) regions_free();  // GELU(h0)'s stores have read region 2
        stage_half(half ? acc1 : acc0, rv);
#pragma unroll 1
        for (int it = 0; it < 8; ++it) {
          const uint32_t o = chunk_off(it);
          const Vec<T, 8> h = vec_at(rh + o), v = vec_at(rv + o);
          Vec<T, 8> d, g;
#pragma unroll
          for (int e = 0; e < 8; e += 2) {
            float gv[2], dv[2];
            gelu_and_grad<kGeluTanh>(to_f(h.v[e]), gv[0], dv[0]);
            gelu_and_grad<kGeluTanh>(to_f(h.v[e + 1]), gv[1], dv[1]);
            const uint32_t dh = gemm_detail::mul2<T>(*reinterpret_cast<const uint32_t*>(&v.v[e]),
                                                     gemm_detail::pack2<T>(dv[0], dv[1]));
            *reinterpret_cast<uint32_t*>(&d.v[e]) = dh;
            if constexpr (kG) {
              g.v[e] = from_f<T>(gv[0]);
              g.v[e + 1] = from_f<T>(gv[1]);
            }
          }
          vec_at(rh + o) = d;
          if constexpr (kG) vec_at(rv + o) = g;
        }
        publish();
        if (t == 0) {
          store_half(&p.out, rh, n0, m0 + 64 * half);
          if constexpr (kG) store_half(&p.gelu, rv, n0, m0 + 64 * half);
        }
        __syncwarp();
      }
    }
  }
  if (t == 0) sm90::tma_store_wait<0>();  // every store has landed before the block's memory goes
#else
  (void)p;
  __trap();  // the plan lists gemm_sm90 kernels only for sm_90 targets, built as sm_90a
#endif
}

}  // namespace dskc
