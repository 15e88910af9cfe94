// gemm_sm90: the FFN's two GELU GEMMs on Hopper with the GELU fused into the epilogue, where
// cuBLASLt has no erf-GELU epilogue (its GELU is the tanh form) and the separate bias_gelu passes
// cost a read and a write of the [B·S, I] activations each.
//   kBiasGelu       (gemm_inter_fwd):    h = A·Bᵀ + bias, written to `out`; g = GELU(h) to `gelu`
//   kBiasGeluNoPre  (inference):         only g
//   kDGelu          (gemm_output_dgrad): dh = (A·Bᵀ) ⊙ GELU'(h), h read from `pre`, written to `out`
//   kDGeluStoreGelu (gelu_checkpoint):   the same, and g = GELU(h) to `gelu`
// A is [m, kK] and B [kN, kK], both row-major (K contiguous): C = A·Bᵀ is the layout of
// x·Wᵀ with W = [out, in] as stored; the output layer's data gradient takes the transposed weight
// (templates/weight_transpose.cuh). Values round exactly as on the cuBLASLt + bias_gelu path: the
// product (+ bias) is rounded to T once, and the GELU (or its derivative) is the same device
// function of that rounded value (common/gelu.cuh).
//
// Structure (a persistent, warp-specialized kernel: one block per SM, or with kCluster 2 one
// cluster per two SMs, walks the 128 x 256 output tiles, N fastest), 384 threads:
//   warp 0, one thread: the producer. TMA copies the 128 x 64 A and 256 x 64 B tiles of each k block
//     into a ring of kStages shared-memory stages (mbarrier full[s] completes with the bytes,
//     empty[s] when both MMA warpgroups (of both CTAs of a cluster) are done with the stage). In a
//     cluster of two the CTAs take adjacent M tiles of one N tile and each copies half of the B tile
//     to both (TMA multicast).
//   warpgroups 1, 2: the MMA warpgroups, rows 64c..64c+63 of the tile each: four wgmma m64n256k16
//     per k block into 128 fp32 accumulators per thread, one commit group in flight while the next
//     is issued. At the tile's end each writes its rows, rounded to T, into a padded shared staging
//     tile (stg_full[c]) and starts the next tile as soon as the epilogue has released its half of
//     the staging tile (stg_empty[c]), so the tensor cores do not wait for the epilogue.
//   warps 1-3: the epilogue, 16-byte coalesced rows of the staging tile: GELU / GELU' and the global
//     stores, overlapping the next tile's MMAs. The backward first prefetches the tile's h rows into
//     L2 (bulk prefetch), so its loads hit L2 by the time the tile's products arrive. In the backward
//     the MMA warpgroup finishes the first kMmaRows rows of each half itself, two per k block of the
//     next tile while its wgmmas run (three warps alone cannot keep up with GELU' of every element).
// Registers: __launch_bounds__(384, 1) gives every thread 168, enough for the 128 accumulators
// (ptxas allocates one count for the whole kernel, so setmaxnreg could not give the MMA warpgroups
// more at compile time; a fourth, epilogue-only warpgroup would cap them all at 128, too few for
// an m64n256 wgmma).
// Measured on the H200 (bench/NOTES.md v17): the mainloop is a little faster than cuBLASLt, but the
// three epilogue warps cannot keep up with the GELU / GELU' of every element, so the layer keeps
// cuBLASLt + the bias_gelu passes by default (DSKC_FFN_GEMM=sm90 / sm90_fwd select these kernels).
#pragma once
#include "dskc_config.cuh"
#include "common/types.cuh"
#include "common/gelu.cuh"
#include "common/sm90.cuh"

namespace dskc {

struct GemmEpi {
  static constexpr int kBiasGelu = 0;
  static constexpr int kBiasGeluNoPre = 1;
  static constexpr int kDGelu = 2;
  static constexpr int kDGeluStoreGelu = 3;
};

// Shapes; compiler/plan.cpp mirrors kBlockM, kBlockN, kThreads and kSmemBytes (static_asserts in
// the generated source).
struct GemmSm90Tile {
  static constexpr int kBlockM = 128, kBlockN = 256, kBlockK = 64, kStages = 3;
  static constexpr int kThreads = 384;
  static constexpr int kEpilogueThreads = 96;  // warps 1-3
  static constexpr int kEpilogueRows = 2;      // rows per epilogue iteration (bench/NOTES.md v17)
  // Rows of each staging half the MMA warpgroup finishes itself during the next tile's mainloop
  // (backward only), two per k block (128 threads x 4 elements), so that the epilogue math has more
  // than three warps' issue slots; the epilogue warps take the rest of the half.
  static constexpr int kMmaRowsPerK = 2, kMmaRowsMax = 32;
  static constexpr int kABytes = kBlockM * kBlockK * 2;  // one stage of A (128 rows x 128 bytes)
  static constexpr int kBBytes = kBlockN * kBlockK * 2;
  // Staging rows padded by 16 bytes: the MMA warps' 4-byte fragment stores (8 rows x 4 columns
  // per instruction) hit 32 distinct banks.
  static constexpr int kStageRowBytes = kBlockN * 2 + 16;
  static constexpr int kStagingBytes = kBlockM * kStageRowBytes;
  static constexpr int kBarriers = 2 * kStages + 4;
  // + 1024: the stages need 1024-byte alignment (128B swizzle) and the dynamic base has less.
  static constexpr int kSmemBytes = 1024 + kStages * (kABytes + kBBytes) + kStagingBytes + 8 * kBarriers;
};
static_assert(GemmSm90Tile::kSmemBytes <= 227 * 1024, "gemm_sm90 needs more shared memory than an SM has");

struct GemmSm90Params {
  sm90::TmaDescriptor a;  // A [m, kK], box kBlockK x kBlockM
  sm90::TmaDescriptor b;  // B [kN, kK], box kBlockK x (kBlockN / kCluster)
  const T* bias;          // [kN] (kBiasGelu*)
  const T* pre;           // [m, kN] the saved pre-activation h (kDGelu*)
  T* out;                 // [m, kN] h (kBiasGelu) or dh (kDGelu*)
  T* gelu;                // [m, kN] GELU(h) (kBiasGelu*, kDGeluStoreGelu)
  int m;
};

namespace gemm_detail {
template <typename E>
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  Vec<E, 2> v;
  v.v[0] = from_f<E>(a);
  v.v[1] = from_f<E>(b);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <int kEpi>
struct EpiHasBias {  // the forward epilogues (bias + GELU)
  static constexpr bool value = kEpi == GemmEpi::kBiasGelu || kEpi == GemmEpi::kBiasGeluNoPre;
};
// The epilogue of kV consecutive outputs at element offset `off` of the [m, kN] tensors: `v` is the
// staged product (+ bias) rounded to T, `h` the saved pre-activation (backward only). Stores only
// when `store` (rows past m compute on valid staging data and store nothing).
template <int kEpi, int kV>
__device__ __forceinline__ void epilogue_vec(const GemmSm90Params& p, size_t off, const Vec<T, kV>& v,
                                             const Vec<T, kV>& h, bool store) {
  if constexpr (EpiHasBias<kEpi>::value) {
    Vec<T, kV> g;
#pragma unroll
    for (int i = 0; i < kV; ++i) g.v[i] = from_f<T>(gelu<kGeluTanh>(to_f(v.v[i])));
    if (store) {
      if constexpr (kEpi == GemmEpi::kBiasGelu) *reinterpret_cast<Vec<T, kV>*>(p.out + off) = v;
      *reinterpret_cast<Vec<T, kV>*>(p.gelu + off) = g;
    }
  } else {
    Vec<T, kV> d;
#pragma unroll
    for (int i = 0; i < kV; ++i) d.v[i] = from_f<T>(to_f(v.v[i]) * gelu_grad<kGeluTanh>(to_f(h.v[i])));
    if (store) *reinterpret_cast<Vec<T, kV>*>(p.out + off) = d;
    if constexpr (kEpi == GemmEpi::kDGeluStoreGelu) {
      Vec<T, kV> g;
#pragma unroll
      for (int i = 0; i < kV; ++i) g.v[i] = from_f<T>(gelu<kGeluTanh>(to_f(h.v[i])));
      if (store) *reinterpret_cast<Vec<T, kV>*>(p.gelu + off) = g;
    }
  }
}
}  // namespace gemm_detail

template <int kN, int kK, int kEpi, int kCluster>
__device__ __forceinline__ void gemm_sm90_impl(const GemmSm90Params& p) {
#if DSKC_SM90A
  using G = GemmSm90Tile;
  static_assert(kN % G::kBlockN == 0 && kK % G::kBlockK == 0, "gemm_sm90 needs N % 256 == 0 and K % 64 == 0");
  static_assert(kCluster == 1 || kCluster == 2, "gemm_sm90 runs clusters of 1 or 2 CTAs");
  constexpr bool kBias = gemm_detail::EpiHasBias<kEpi>::value;
  constexpr int kTilesN = kN / G::kBlockN, kKBlocks = kK / G::kBlockK, kStages = G::kStages;
  // Each CTA of a cluster loads 1/kCluster of the B tile and multicasts it to both (they work on
  // the same N tile, on adjacent M tiles): a third less L2-to-SM traffic with two.
  constexpr int kBRows = G::kBlockN / kCluster;
  // Staging rows [0, kMmaRows) of each half: the MMA warpgroup, two per k block of the next tile, in
  // the backward (GELU' and the h loads: 0.21-0.22 -> 0.18-0.19 ms at BERT-Large); the forward's
  // GELU measured no faster that way (its MMA warps then issue the next wgmmas late), so its
  // epilogue warps take every row (bench/NOTES.md v17).
  constexpr int kMmaRowsBwd =
      G::kMmaRowsPerK * kKBlocks < G::kMmaRowsMax ? G::kMmaRowsPerK * kKBlocks : G::kMmaRowsMax;
  constexpr int kMmaRows = kBias ? 0 : kMmaRowsBwd;
  static_assert(G::kMmaRowsPerK * G::kBlockN == 128 * 4, "finish_rows: 128 threads x 4 elements cover its rows");
  extern __shared__ unsigned char gemm_smem[];
  const uint32_t raw = sm90::smem_u32(gemm_smem);
  const uint32_t base = (raw + 1023u) & ~1023u;
  const uint32_t s_a = base, s_b = base + kStages * G::kABytes;
  const uint32_t s_stage = s_b + kStages * G::kBBytes;
  const uint32_t bars = s_stage + G::kStagingBytes;
  unsigned char* staging = gemm_smem + (s_stage - raw);
  auto full = [&](int s) { return bars + 8u * s; };
  auto empty = [&](int s) { return bars + 8u * (kStages + s); };
  auto stg_full = [&](int c) { return bars + 8u * (2 * kStages + c); };
  auto stg_empty = [&](int c) { return bars + 8u * (2 * kStages + 2 + c); };

  // Work: a cluster takes a pair (kCluster) of M tiles with one N tile; CTA `rank` the M tile
  // kCluster·pair + rank (one past the rows reads zeros and stores nothing).
  const uint32_t rank = kCluster > 1 ? sm90::cluster_ctarank() : 0u;
  const int cluster = blockIdx.x / kCluster, clusters = gridDim.x / kCluster;
  const int tiles = ((p.m + G::kBlockM - 1) / G::kBlockM + kCluster - 1) / kCluster * kTilesN;
  auto tile_m0 = [&](int tile) { return (tile / kTilesN * kCluster + static_cast<int>(rank)) * G::kBlockM; };
  auto tile_n0 = [&](int tile) { return tile % kTilesN * G::kBlockN; };
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      sm90::mbar_init(full(s), 1);                // the producer's arrive_expect_tx (+ the TMA bytes)
      sm90::mbar_init(empty(s), 2 * kCluster);    // each MMA warpgroup of every CTA in the cluster
    }
    for (int c = 0; c < 2; ++c) {
      sm90::mbar_init(stg_full(c), 128);  // every thread of MMA warpgroup c
      sm90::mbar_init(stg_empty(c), G::kEpilogueThreads);
    }
    sm90::mbar_init_fence();
    sm90::tma_prefetch_descriptor(&p.a);
    sm90::tma_prefetch_descriptor(&p.b);
  }
  // The peer's copies and arrivals target this CTA's barriers: all initialized first.
  if constexpr (kCluster > 1)
    sm90::cluster_sync();
  else
    __syncthreads();

  if (threadIdx.x < 32) {
    // ---- producer ----
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      const int last_m0 = (p.m - 1) / G::kBlockM * G::kBlockM;
      for (int tile = cluster; tile < tiles; tile += clusters) {
        // A CTA whose M tile lies wholly past the rows (the second of a pair, odd tile count) still
        // takes its part in the B multicast; its A copy reads the last real tile (stores skip all).
        const int m0 = min(tile_m0(tile), last_m0), n0 = tile_n0(tile);
        for (int kb = 0; kb < kKBlocks; ++kb) {
          sm90::mbar_wait(empty(stage), phase ^ 1u);
          sm90::mbar_arrive_expect_tx(full(stage), G::kABytes + G::kBBytes);
          sm90::tma_load_2d(s_a + stage * G::kABytes, &p.a, full(stage), kb * G::kBlockK, m0);
          const uint32_t b_dst = s_b + stage * G::kBBytes + rank * (kBRows * 128);
          if constexpr (kCluster > 1)
            sm90::tma_load_2d_multicast(b_dst, &p.b, full(stage), kb * G::kBlockK, n0 + static_cast<int>(rank) * kBRows,
                                        static_cast<unsigned short>((1u << kCluster) - 1));
          else
            sm90::tma_load_2d(b_dst, &p.b, full(stage), kb * G::kBlockK, n0);
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1u;
          }
        }
      }
    }
    __syncwarp();
  } else if (wg > 0) {
    // ---- MMA warpgroups ----
    const int c = wg - 1;
    const int w = t / 32, l = t % 32;
    float acc[128];
    int stage = 0;
    uint32_t phase = 0, sphase = 0;
    // A stage is free once both warpgroups of every CTA reading it are done: thread r < kCluster
    // arrives on CTA r's barrier.
    auto release = [&](int s) {
      if (t < kCluster) {
        if constexpr (kCluster > 1)
          sm90::mbar_arrive_cluster(empty(s), static_cast<uint32_t>(t));
        else
          sm90::mbar_arrive(empty(s));
      }
    };
    // Named barrier 1 + c: the 128 threads of this warpgroup.
    auto warpgroup_sync = [](int wgc) {
      if (wgc == 0)
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
      else
        asm volatile("bar.sync 2, 128;\n" ::: "memory");
    };
    // The tile whose staging rows [0, kMmaRows) of this half the k blocks of the current tile finish
    // (pend_m0 < 0: none yet).
    int pend_m0 = -1, pend_n0 = 0;
    auto finish_rows = [&](int r0) {  // rows r0, r0 + 1 of the pending tile: 4 elements per thread
      const int r = r0 + (t >> 6), col = (t & 63) * 4, grow = pend_m0 + c * 64 + r;
      const Vec<T, 4> v = *reinterpret_cast<const Vec<T, 4>*>(staging + (c * 64 + r) * G::kStageRowBytes + col * 2);
      if (grow >= p.m) return;
      const size_t off = static_cast<size_t>(grow) * kN + pend_n0 + col;
      Vec<T, 4> h = v;
      if constexpr (!kBias) h = *reinterpret_cast<const Vec<T, 4>*>(p.pre + off);
      gemm_detail::epilogue_vec<kEpi, 4>(p, off, v, h, true);
    };
    for (int tile = cluster; tile < tiles; tile += clusters) {
      const int n0 = tile_n0(tile);
      int prev = 0;
      for (int kb = 0; kb < kKBlocks; ++kb) {
        sm90::mbar_wait(full(stage), phase);
        sm90::wgmma_fence();
        const uint32_t a = s_a + stage * G::kABytes + c * 64 * 128, b = s_b + stage * G::kBBytes;
#pragma unroll
        for (int k = 0; k < G::kBlockK / 16; ++k)
          sm90::wgmma_m64n256k16<T>(acc, sm90::wgmma_desc_k128(a + 32 * k), sm90::wgmma_desc_k128(b + 32 * k),
                                    (kb | k) != 0);
        sm90::wgmma_commit();
        // While the tensor cores run this k block: two of the previous tile's rows.
        if (pend_m0 >= 0 && kb * G::kMmaRowsPerK < kMmaRows) finish_rows(kb * G::kMmaRowsPerK);
        if (kb > 0) {
          sm90::wgmma_wait<1>();  // the previous k block's MMAs are done: release its stage
          release(prev);
        }
        prev = stage;
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1u;
        }
      }
      sm90::wgmma_wait<0>();
      release(prev);
      // Rows 64c + 16w + l/4 (+8) of the staging tile, rounded to T (with the bias in fp32 first),
      // once this warpgroup (named barrier 1 + c) and the epilogue warps are done with the last tile.
      warpgroup_sync(c);
      sm90::mbar_wait(stg_empty(c), sphase ^ 1u);
      const int row = c * 64 + w * 16 + (l >> 2);
      unsigned char* r0 = staging + row * G::kStageRowBytes + (l & 3) * 4;
      unsigned char* r1 = r0 + 8 * G::kStageRowBytes;
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        float b0 = 0.f, b1 = 0.f;
        if constexpr (kBias) {
          float bv[2];
          load_f<T, 2>(p.bias + n0 + 8 * i + 2 * (l & 3), bv);
          b0 = bv[0];
          b1 = bv[1];
        }
        *reinterpret_cast<uint32_t*>(r0 + 16 * i) = gemm_detail::pack2<T>(acc[4 * i] + b0, acc[4 * i + 1] + b1);
        *reinterpret_cast<uint32_t*>(r1 + 16 * i) = gemm_detail::pack2<T>(acc[4 * i + 2] + b0, acc[4 * i + 3] + b1);
      }
      warpgroup_sync(c);  // the rows this warpgroup finishes itself are all written
      sm90::mbar_arrive(stg_full(c));
      sphase ^= 1u;
      pend_m0 = tile_m0(tile);
      pend_n0 = n0;
    }
    if (pend_m0 >= 0)  // the last tile's rows: no next mainloop to hide them behind
      for (int r0 = 0; r0 < kMmaRows; r0 += G::kMmaRowsPerK) finish_rows(r0);
  } else {
    // ---- epilogue: warp e (1-3 of warpgroup 0) takes rows e - 1, e + 2, ... of each half ----
    const int e = threadIdx.x - 32, ew = e / 32, l = e % 32;
    constexpr int kWarps = G::kEpilogueThreads / 32;
    constexpr int kRowsPerWarp = (64 - kMmaRows + kWarps - 1) / kWarps;
    // kEpilogueRows rows per iteration, the next iteration's loads issued before this one's
    // arithmetic; rows past the half or past m compute on a valid staging row and store nothing.
    constexpr int kR = G::kEpilogueRows, kIters = (kRowsPerWarp + kR - 1) / kR;
    uint32_t sphase = 0;
    for (int tile = cluster; tile < tiles; tile += clusters) {
      const int m0 = tile_m0(tile), n0 = tile_n0(tile);
      if constexpr (!kBias)  // the tile's h rows (512 bytes each) into L2 while its MMAs run
        for (int r = e; r < G::kBlockM; r += G::kEpilogueThreads)
          if (m0 + r < p.m) sm90::prefetch_l2(p.pre + static_cast<size_t>(m0 + r) * kN + n0, G::kBlockN * 2);
      for (int c = 0; c < 2; ++c) {
        sm90::mbar_wait(stg_full(c), sphase);
        const int row0 = m0 + c * 64;  // global row of the half's first staging row
        auto row_of = [&](int it, int j) { return kMmaRows + ew + kWarps * (it * kR + j); };
        auto ok_of = [&](int r) { return r < 64 && row0 + r < p.m; };
        auto off_of = [&](int r) { return static_cast<size_t>(row0 + r) * kN + n0 + 8 * l; };
        auto load = [&](int it, Vec<T, 8>(&v)[kR], Vec<T, 8>(&h)[kR]) {
#pragma unroll
          for (int j = 0; j < kR; ++j) {
            const int r = row_of(it, j);
            v[j] = *reinterpret_cast<const Vec<T, 8>*>(staging + (c * 64 + (r < 64 ? r : 63)) * G::kStageRowBytes + l * 16);
            if constexpr (!kBias) {
              if (ok_of(r))
                h[j] = *reinterpret_cast<const Vec<T, 8>*>(p.pre + off_of(r));
              else
                h[j] = v[j];
            }
          }
        };
        Vec<T, 8> v[kR], h[kR];
        load(0, v, h);
#pragma unroll 1
        for (int it = 0; it < kIters; ++it) {
          Vec<T, 8> vn[kR], hn[kR];
          if (it + 1 < kIters) load(it + 1, vn, hn);
#pragma unroll
          for (int j = 0; j < kR; ++j) {
            const int r = row_of(it, j);
            gemm_detail::epilogue_vec<kEpi, 8>(p, off_of(r), v[j], h[j], ok_of(r));
          }
#pragma unroll
          for (int j = 0; j < kR; ++j) {
            v[j] = vn[j];
            h[j] = hn[j];
          }
        }
        sm90::mbar_arrive(stg_empty(c));
      }
      sphase ^= 1u;
    }
  }
  // No CTA leaves while its peer may still multicast into it or arrive on its barriers.
  if constexpr (kCluster > 1) sm90::cluster_sync();
#else
  (void)p;
  __trap();  // the plan lists gemm_sm90 kernels only for sm_90 targets, built as sm_90a
#endif
}

}  // namespace dskc
