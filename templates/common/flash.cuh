// Building blocks of the fused (FlashAttention-2 style) attention kernels: tile shapes, tensor-core
// mma.sync m16n8k16 (fp16/bf16 in, fp32 accumulate) with ldmatrix operand loads, and bounds-checked
// tile copies from global to shared memory. Only 16-bit element types reach these helpers (the
// plan uses the fused path for fp16/bf16 layers whose head dim is a multiple of 16 and <= 128).
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type");
// g = lane / 4 (groupID), t = lane % 4 (threadID_in_group); a .b32 register holds two elements,
// the lower column (or row, for B) in its low half:
//   A 16x16 (row major), 4 regs: a0 = (row g,   cols 2t, 2t+1)   a1 = (row g+8, cols 2t, 2t+1)
//                                a2 = (row g,   cols 2t+8, +9)   a3 = (row g+8, cols 2t+8, +9)
//   B 16x8 (col major),  2 regs: b0 = (rows 2t, 2t+1, col g)     b1 = (rows 2t+8, 2t+9, col g)
//   C/D 16x8, 4 floats:          c0, c1 = (row g, cols 2t, 2t+1) c2, c3 = (row g+8, cols 2t, 2t+1)
// ldmatrix.x4 loads four 8x8 b16 matrices; lanes 8j..8j+7 give the row addresses of matrix j and
// every lane receives (row lane/4, cols 2(lane%4), +1) of each matrix in register j, or with
// .trans (rows 2(lane%4), +1, col lane/4). Hence, for a tile stored row-major in shared memory:
//   A operand [m][k]:               matrix j = rows +8(j&1),  cols +8(j>>1)   (ldmatrix)
//   B operand stored [n][k]:        matrix j = rows +8(j>>1), cols +8(j&1)    (ldmatrix; two n-tiles)
//   B operand stored [k][n]:        matrix j = rows +8(j&1),  cols +8(j>>1)   (ldmatrix.trans; two n-tiles)
// and a C fragment pair (n-tiles 2k, 2k+1) re-packs into the A operand of k-step k without
// shuffles: a0 = C[2k](c0,c1), a1 = C[2k](c2,c3), a2 = C[2k+1](c0,c1), a3 = C[2k+1](c2,c3).
#pragma once
#include "dskc_config.cuh"
#include "common/types.cuh"
#include "common/dropout.cuh"
#include "common/row_tiles.cuh"
#include "common/fast_math.cuh"

namespace dskc {

// Tile shapes; compiler/plan.cpp mirrors them (checked by static_asserts in the generated source).
// Forward: 4 warps, 16 query rows each; keys stream through shared memory in kKeys-row tiles.
struct FlashFwdTile {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = 16 * kWarps;               // query rows per block
  static constexpr int kKeys = kHeadDim <= 64 ? 64 : 32;  // key rows per inner step
  // Resident blocks per SM attn_flash_fwd is built for (__launch_bounds__): 4 (128 registers) at head
  // dims up to 64, where ptxas would otherwise take ~137 for the unrolled tile loads (3 blocks).
  static constexpr int kMinBlocks = kHeadDim <= 64 ? 4 : 1;
  // Static shared memory of attn_flash_fwd with kStages K/V tile buffers: Q, K, V tiles (16-bit),
  // the mask row (fp32) and the tile's dropout flags (bytes where the kernel draws them, bit words
  // where it reads them). compiler/plan.cpp mirrors this to choose kAttnFwdStages.
  static constexpr int smem_bytes(int stages, bool byte_flags, bool word_flags) {
    return 2 * (kHeadDim + 8) * (kRows + 2 * stages * kKeys) + 4 * kKeys + (byte_flags ? kRows * kKeys : 16) +
           (word_flags ? kRows * (kKeys / 32) * 4 : 4);
  }
};
// Backward: each warp owns 16 rows (keys in dK/dV, queries in dQ) and the block streams the other
// side through shared memory kInner rows at a time. Head dims above 64 use 2 warps and 32-row inner
// tiles so the four tiles stay under 48 KB of static shared memory and the dK/dV accumulators fit
// in registers.
struct FlashBwdTile {
  static constexpr int kWarps = kHeadDim <= 64 ? 4 : 2;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = 16 * kWarps;
  static constexpr int kInner = kHeadDim <= 64 ? 64 : 32;
  // attn_flash_bwd_dkdv with the dSᵀ stores (FlashDq kDqGemm) is built for this many resident blocks
  // per SM (__launch_bounds__). ptxas (NVRTC 13.0, d = 64) gives it 169 registers on sm_90, which
  // allocate as 176: 2 blocks per SM instead of the 3 that 168 allow, and capped at 168 it does not
  // spill. On sm_80 (228 registers) the cap would spill; 1 leaves the choice to ptxas.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static constexpr int kMinBlocksDqGemm = kWarps == 4 ? 3 : 1;
#else
  static constexpr int kMinBlocksDqGemm = 1;
#endif
};
// D = rowsum(dO ⊙ O): 8 lanes per row, 16 rows per 128-thread block.
struct FlashDotTile {
  static constexpr int kThreads = 128;
  static constexpr int kLanesPerRow = 8;
  static constexpr int kRows = kThreads / kLanesPerRow;
};

// How the fused backward produces dQ. kDqPerQueryTile (DSKC_ATTN_DQ=kernel): attn_flash_bwd_dq owns a
// query tile and recomputes P and dS over every key tile (no atomics: bitwise reproducible).
// kDqAtomic (stochastic_mode): attn_flash_bwd_dkdvdq, the dK/dV kernel, also adds each key tile's
// dS·K into an fp32 accumulator with atomics (FlashAttention-2's single pass; the order of the
// additions varies run to run), so P and dS are computed once.
// kDqGemm (default mode): attn_flash_bwd_dkdv also writes each tile's dSᵀ, rounded to E, into the
// workspace grad_scores ([B·heads, S, padded S], row = key, column = query), and the runtime computes
// dQ = dS·K/√d with one batched GEMM: P and dS are computed once and the result is still bitwise
// reproducible (a fixed GEMM algorithm, no atomics).
// kDqReduce (stochastic_mode, the wgmma dK/dV kernel where one block does not cover every key): each
// key tile's dS·K, staged in shared memory, is added into the fp32 accumulator by TMA reductions
// (cp.reduce.async.bulk.tensor: the order of the additions varies run to run); attn_dq_convert then
// writes dQ = scale·acc into grad_qkv. No dSᵀ round trip through memory, no dQ GEMM.
enum FlashDq { kDqPerQueryTile = 0, kDqAtomic = 1, kDqGemm = 2, kDqReduce = 3 };

// Shared-memory row stride in elements: +8 (16 bytes) keeps every ldmatrix row 16-byte aligned and
// spreads the 8 row addresses of one 8x8 matrix over distinct banks.
constexpr int kFlashStride = kHeadDim + 8;

namespace flash {

// A compile-time buffer index (double-buffered tiles).
template <int N>
struct Buf {
  static constexpr int value = N;
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

// d += a·b for one 16x8x16 tile (E = __half or __nv_bfloat16).
template <typename E>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// *p += a, *(p + 1) += b in global memory, atomically per element, no result (p 8-byte aligned):
// one vector reduction on sm_90, two scalar ones before.
__device__ __forceinline__ void red_add2(float* p, float a, float b) {
#if __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
#else
  atomicAdd(p, a);
  atomicAdd(p + 1, b);
#endif
}

// Two floats rounded to E and packed into one .b32 register (lo in the low half).
template <typename E>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  union {
    E e[2];
    uint32_t u;
  } v;
  v.e[0] = from_f<E>(lo);
  v.e[1] = from_f<E>(hi);
  return v.u;
}

// A warpgroup's m64n64 fp32 accumulator (acc[4n + 2r + e]: row 16w + g + 8r, column 8n + 2t + e)
// rounded to E and packed per k16 step of 16 columns: the A operand of a register-A wgmma (P ⊙ Z, dS)
// or a tile for sm90::stmatrix_tile64. The second form scales rows g by s0 and g + 8 by s1 first.
template <typename E>
__device__ __forceinline__ void pack_acc64(uint32_t (&pk)[4][4], const float (&acc)[32]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    pk[i][0] = pack2<E>(acc[8 * i], acc[8 * i + 1]);
    pk[i][1] = pack2<E>(acc[8 * i + 2], acc[8 * i + 3]);
    pk[i][2] = pack2<E>(acc[8 * i + 4], acc[8 * i + 5]);
    pk[i][3] = pack2<E>(acc[8 * i + 6], acc[8 * i + 7]);
  }
}
template <typename E>
__device__ __forceinline__ void pack_acc64(uint32_t (&pk)[4][4], const float (&acc)[32], float s0, float s1) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    pk[i][0] = pack2<E>(acc[8 * i] * s0, acc[8 * i + 1] * s0);
    pk[i][1] = pack2<E>(acc[8 * i + 2] * s1, acc[8 * i + 3] * s1);
    pk[i][2] = pack2<E>(acc[8 * i + 4] * s0, acc[8 * i + 5] * s0);
    pk[i][3] = pack2<E>(acc[8 * i + 6] * s1, acc[8 * i + 7] * s1);
  }
}

// D = rowsum(dO ⊙ O)'s per-lane step, in one fixed form wherever D is computed (attn_flash_bwd_dot,
// the wgmma dK/dV kernel with fused dQ): acc + (o0·d0 + o1·d1), the pair's product sum by one
// rounded multiply and one fma, so both kernels give the same bits for the same lanes and order.
__device__ __forceinline__ float dot2_acc(float acc, float o0, float d0, float o1, float d1) {
  return __fadd_rn(acc, __fmaf_rn(o1, d1, __fmul_rn(o0, d0)));
}

// pack2's inverse: the two E of a .b32 register as floats (x from the low half).
template <typename E>
__device__ __forceinline__ float2 unpack2(uint32_t u) {
  union {
    uint32_t u;
    E e[2];
  } v;
  v.u = u;
  return make_float2(to_f(v.e[0]), to_f(v.e[1]));
}

// Stores two adjacent elements (a 4-byte aligned pair).
template <typename E>
__device__ __forceinline__ void store2(E* p, float lo, float hi) {
  *reinterpret_cast<uint32_t*>(p) = pack2<E>(lo, hi);
}

// Calls f(c) for the thread's items c = threadIdx.x, + kThreads, ... below kN (blockDim.x ==
// kThreads): a compile-time trip count, unrolled, with a bounds test only where kN is not a
// multiple of kThreads. (A run-time `for (c = threadIdx.x; c < kN; c += kThreads)` compiles to a
// generic loop with prologue and remainder code: in attn_flash_fwd at BERT-Large that loop
// overhead was about a third of the kernel's instructions, and the kernel is issue-bound.)
// kUnroll = false keeps the run-time loop: attn_flash_bwd_dkdv, which runs at its 168-register cap,
// spilled with the unrolled forms (ptxas keeps their hoisted row offsets live across the query loop).
template <int kN, int kThreads, bool kUnroll = true, typename Fn>
__device__ __forceinline__ void block_for(Fn&& f) {
  if constexpr (!kUnroll) {
    for (int c = threadIdx.x; c < kN; c += kThreads) f(c);
  } else {
#pragma unroll
    for (int i = 0; i < (kN + kThreads - 1) / kThreads; ++i) {
      const int c = static_cast<int>(threadIdx.x) + i * kThreads;
      if (kN % kThreads == 0 || c < kN) f(c);
    }
  }
}

// Calls f(r, k) for the thread's 16-byte chunks (row r, column k) of a [kTileRows][kHeadDim] tile.
// Where kThreads is a multiple of the chunks per row, a thread keeps one column and steps its row
// by kThreads / chunks (no division per chunk).
template <int kTileRows, int kThreads, bool kUnroll = true, typename Fn>
__device__ __forceinline__ void tile_chunks(Fn&& f) {
  constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  if constexpr (kUnroll && kThreads % kChunks == 0 && (kTileRows * kChunks) % kThreads == 0) {
    const int r0 = static_cast<int>(threadIdx.x) / kChunks, k = (static_cast<int>(threadIdx.x) % kChunks) * 8;
#pragma unroll
    for (int i = 0; i < kTileRows * kChunks / kThreads; ++i) f(r0 + i * (kThreads / kChunks), k);
  } else {
    block_for<kTileRows * kChunks, kThreads, kUnroll>([&](int c) { f(c / kChunks, (c % kChunks) * 8); });
  }
}

// Copies rows [0, kTileRows) of a row-major global matrix (row stride ld elements, kHeadDim
// columns from src) into shared memory, 16 bytes per access; rows >= valid are zero-filled (and
// never read from global memory), so partial tiles neither read out of bounds nor feed garbage
// (possibly NaN) into the products.
template <typename E, int kTileRows, int kThreads, bool kUnroll = true>
__device__ __forceinline__ void load_tile(E (*dst)[kFlashStride], const E* src, size_t ld, int valid) {
  tile_chunks<kTileRows, kThreads, kUnroll>([&](int r, int k) {
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (r < valid) v = *reinterpret_cast<const uint4*>(src + static_cast<size_t>(r) * ld + k);
    *reinterpret_cast<uint4*>(&dst[r][k]) = v;
  });
}

// load_tile's asynchronous form (cp.async, 16 bytes per copy, no register round trip): rows >=
// valid are zero-filled (cp_async_zfill16; row 0's address is passed, never read; valid >= 1).
// The copies join the thread's current cp.async group (cp_async_commit / cp_async_wait in
// row_tiles.cuh); after the wait a __syncthreads() publishes every thread's copies to the block.
template <typename E, int kTileRows, int kThreads, bool kUnroll = true>
__device__ __forceinline__ void load_tile_async(E (*dst)[kFlashStride], const E* src, size_t ld, int valid) {
  tile_chunks<kTileRows, kThreads, kUnroll>([&](int r, int k) {
    const bool in = r < valid;
    cp_async_zfill16(&dst[r][k], src + static_cast<size_t>(in ? r : 0) * ld + k, in);
  });
}

// The additive mask of keys [k0, k0 + kTileRows) as floats (times mul: attn_flash_fwd and dkdv keep
// scores in log2 units); keys >= seq get -inf (never attended).
template <typename E, int kTileRows, int kThreads, bool kUnroll = true>
__device__ __forceinline__ void load_mask(float* dst, const E* mask_row, int k0, int seq, float mul = 1.f) {
  block_for<kTileRows, kThreads, kUnroll>(
      [&](int r) { dst[r] = k0 + r < seq ? to_f(mask_row[k0 + r]) * mul : neg_inf(); });
}

// 2^x (ex2.approx, flush-to-zero: what __expf uses after its multiply by log2(e)): common/fast_math.cuh.
using ::dskc::exp2_approx;
constexpr float kLog2e = 1.4426950408889634f;

// The end of a query row of the attention forward (attn_flash_fwd and its wgmma form share these):
// the row sum l of the quad of threads holding the row, the context's scale 1/l (· 1/(1−p) with
// attention dropout; 0 for a row with l = 0), and its logsumexp L from the running max m (log2 units).
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
template <bool kDropout>
__device__ __forceinline__ float row_out_scale(float l) {
  return l > 0.f ? (kDropout ? kAttnDropoutScale : 1.f) / l : 0.f;
}
// A row with every key masked by -inf has l = 0: L = +inf makes backward's exp(S − L) = 0.
// (L = m·ln 2 + ln l, one explicit fma so every instantiation rounds alike.)
__device__ __forceinline__ float row_logsumexp(float m, float l) {
  return l > 0.f ? __fmaf_rn(m, 1.f / kLog2e, logf(l)) : __int_as_float(0x7f800000);
}
// Normalizes and writes the thread's two query rows rows[0], rows[1] of the context (columns 8n + 2t,
// + 1 of each 8-column group n < kNTiles, from o_at(n, r) as a float2) and, in training, their
// logsumexp (lane t == 0 of the quad); rows >= S are not written. l becomes the quad's row sums.
template <typename E, bool kDropout, int kNTiles, typename OAt>
__device__ __forceinline__ void store_rows(E* ctx, float* lse, float (&l)[2], const float (&m)[2], const int (&rows)[2],
                                           int seq, int b, int h, int bh, int t, OAt o_at) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] = quad_sum(l[r]);
    const int i = rows[r];
    if (i >= seq) continue;
    const float inv = row_out_scale<kDropout>(l[r]);
    E* out = ctx + (static_cast<size_t>(b) * seq + i) * kHidden + h * kHeadDim + 2 * t;
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) {
      const float2 v = o_at(n, r);
      store2<E>(out + n * 8, v.x * inv, v.y * inv);
    }
    if constexpr (kTraining)
      if (t == 0) lse[static_cast<size_t>(bh) * seq + i] = row_logsumexp(m[r], l[r]);
  }
}

// A-operand fragment of k-step ks for the warp's 16 rows starting at row0 of a [rows][kFlashStride] tile.
template <typename E>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const E (*tile)[kFlashStride], int row0, int ks) {
  const int lane = threadIdx.x % 32;
  flash::ldmatrix_x4(a, &tile[row0 + (lane & 7) + ((lane >> 3) & 1) * 8][ks * 16 + (lane >> 4) * 8]);
}
// B-operand fragments of k-step ks for n-tiles (n0, n0 + 8) of a tile stored [n][k] (e.g. K for Q·Kᵀ):
// b[0], b[1] for n-tile n0; b[2], b[3] for n0 + 8.
template <typename E>
__device__ __forceinline__ void load_b_nk(uint32_t (&b)[4], const E (*tile)[kFlashStride], int n0, int ks) {
  const int lane = threadIdx.x % 32;
  flash::ldmatrix_x4(b, &tile[n0 + (lane & 7) + (lane >> 4) * 8][ks * 16 + ((lane >> 3) & 1) * 8]);
}
// B-operand fragments of k-step ks (rows k0 = 16·ks) for n-tiles (n0, n0 + 8) of a tile stored [k][n]
// (e.g. V for P·V): same register order as load_b_nk.
template <typename E>
__device__ __forceinline__ void load_b_kn(uint32_t (&b)[4], const E (*tile)[kFlashStride], int n0, int ks) {
  const int lane = threadIdx.x % 32;
  flash::ldmatrix_x4_trans(b, &tile[ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8][n0 + (lane >> 4) * 8]);
}
// A-operand fragment of k-step ks for rows (m) m0..m0 + 15 of a tile stored transposed, [k][m] (e.g. dS
// kept as dSᵀ [key][query] for dQ = dS·K): ldmatrix.trans, matrix j = rows +8(j>>1), cols +8(j&1).
template <typename E, int kStride>
__device__ __forceinline__ void load_a_km(uint32_t (&a)[4], const E (*tile)[kStride], int m0, int ks) {
  const int lane = threadIdx.x % 32;
  flash::ldmatrix_x4_trans(a, &tile[ks * 16 + (lane & 7) + (lane >> 4) * 8][m0 + ((lane >> 3) & 1) * 8]);
}
// The A operand of k-step kk from accumulator n-tiles 2kk and 2kk + 1 (rounded to E).
template <typename E, int kN>
__device__ __forceinline__ void c_to_a(uint32_t (&a)[4], const float (&c)[kN][4], int kk) {
  a[0] = pack2<E>(c[2 * kk][0], c[2 * kk][1]);
  a[1] = pack2<E>(c[2 * kk][2], c[2 * kk][3]);
  a[2] = pack2<E>(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = pack2<E>(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

// Stores the warp's accumulator (16 rows from row0 x kN n-tiles of 8 columns), rounded to E, into a
// [row][col] tile in shared memory: one 4-byte store per register pair (c0, c1) / (c2, c3).
template <typename E, int kN, int kStride>
__device__ __forceinline__ void store_c(E (*tile)[kStride], const float (&c)[kN][4], int row0) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int n = 0; n < kN; ++n)
#pragma unroll
    for (int r = 0; r < 2; ++r) store2<E>(&tile[row0 + g + 8 * r][n * 8 + 2 * t], c[n][2 * r], c[n][2 * r + 1]);
}

// The attention-dropout keep rule (common/philox.cuh, stream kStreamAttnProbs): element (query i,
// key j) of head bh keeps iff the draw of element index attn_keep_index(bh, S, i, j) = (bh·S + i)·S + j
// is >= kAttnDropoutThreshold. One Philox call yields the draws of the group of eight indices
// [8·group, 8·group + 8); a row's groups need not start at its first key.
__device__ __forceinline__ uint64_t attn_keep_index(int bh, int seq, int i, int j) {
  return (static_cast<uint64_t>(bh) * seq + i) * seq + j;
}
// Keep flags of the eight elements of `group` as bits 0..7 (bit w: element 8·group + w).
__device__ __forceinline__ uint32_t keep8(const dskc_rng::DropoutKey& key, uint64_t group) {
  const dskc_rng::U32x4 d = dskc_rng::dropout_draws(key, dskc_rng::kStreamAttnProbs, group);
  uint32_t v = 0;
#pragma unroll
  for (int w = 0; w < 8; ++w) v |= static_cast<uint32_t>(dskc_rng::select_draw(d, w) >= kAttnDropoutThreshold) << w;
  return v;
}

// Attention-dropout keep flags of a tile, into shared memory: dst[qi][kj] = keep(query i0 + qi,
// key j0 + kj) of head bh — 1 where kept, 0 where dropped or out of range.
// Work item = (query row, group of eight consecutive indices): a row's kKeys indices span at most
// kKeys/8 + 1 groups, so one Philox call serves up to eight flags (the groups partition the row, so
// every flag is written exactly once). Callers __syncthreads() before reading dst.
template <int kQueries, int kKeys, int kThreads>
__device__ __forceinline__ void dropout_tile(unsigned char (*dst)[kKeys], const DropoutArgs& a, int bh, int seq, int i0,
                                             int j0) {
  constexpr int kGroups = kKeys / 8 + 1;
  const dskc_rng::DropoutKey key{a.seed, a.layer, a.step};
  for (int c = threadIdx.x; c < kQueries * kGroups; c += kThreads) {
    const int qi = c / kGroups, gi = c % kGroups;
    const int i = i0 + qi;
    const uint64_t first = attn_keep_index(bh, seq, i, j0);  // index of key j0
    const uint64_t group = (first >> 3) + gi;
    const int kj0 = static_cast<int>(static_cast<long long>(group * 8) - static_cast<long long>(first));  // -7 .. kKeys
    if (kj0 >= kKeys) continue;  // the row ended in the previous group
    const uint32_t keep = i < seq ? keep8(key, group) : 0u;
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      const int kj = kj0 + w;
      if (kj < 0 || kj >= kKeys) continue;
      dst[qi][kj] = j0 + kj < seq && ((keep >> w) & 1u);
    }
  }
}

// Bit-packed keep flags (the tensor attn_dropout_bits, [B·heads, S, W] uint32, W = ceil(S/32)):
// bit j % 32 of word j / 32 of row i of head bh = keep(query i, key j); bits of keys >= S are 0.
// Written by attn_flash_fwd (keep_bits_store, from its tiles' flags) or by the standalone kernel
// attn_dropout_bits (keep_word), identically; read by the backward kernels and, with
// DSKC_ATTN_MASK=kernel, by attn_flash_fwd (keep_words_load).
// Tiles start at multiples of their key count, which is a multiple of 32, so each tile row spans
// whole words and every (row, word) belongs to exactly one tile of the forward's grid.
__device__ __forceinline__ int keep_words(int seq) { return (seq + 31) / 32; }

// One word of the bits from the keep rule directly: the flags of `count` (1..32) consecutive keys
// of one query row from element index `first` (attn_keep_index of the word's first key); bit b =
// keep(first + b), bits >= count 0. The word's 32 indices meet 4 groups of eight when first % 8 == 0
// (S % 8 == 0), else 5, the outer two shared with the neighbouring words.
// The first four groups are drawn unconditionally (a short last word masks off what it does not
// need), so their Philox calls are straight-line code the compiler interleaves; the fifth only
// where the word straddles it (first % 8 != 0).
__device__ __forceinline__ uint32_t keep_word(const dskc_rng::DropoutKey& key, uint64_t first, int count) {
  const int lead = static_cast<int>(first & 7);  // indices of the first group before `first`
  const uint64_t g0 = first >> 3;
  uint32_t v = keep8(key, g0) >> lead;
#pragma unroll
  for (int k = 1; k <= 3; ++k) v |= keep8(key, g0 + k) << (8 * k - lead);  // shifts 1 .. 24
  if (lead != 0 && 32 - lead < count) v |= keep8(key, g0 + 4) << (32 - lead);
  return count < 32 ? v & ((1u << count) - 1u) : v;
}

// Forward: packs a tile's flags (src as built by dropout_tile; synchronized) into the bits.
// Work item = (query row, word): one thread, one 32-bit store; rows >= S and words >= W are skipped.
// The eight 4-byte reads of a 32-byte run start at a lane-dependent offset (rotation by c / 4), so
// a warp's reads fall into distinct banks.
template <int kQueries, int kKeys, int kThreads>
__device__ __forceinline__ void keep_bits_store(uint32_t* bits, const unsigned char (*src)[kKeys], int bh, int seq,
                                                int i0, int j0) {
  static_assert(kKeys % 32 == 0, "keep-flag tiles must span whole 32-bit words");
  constexpr int kWords = kKeys / 32;
  const int words = keep_words(seq);
  for (int c = threadIdx.x; c < kQueries * kWords; c += kThreads) {
    const int qi = c / kWords, wi = c % kWords;
    const int i = i0 + qi, w = j0 / 32 + wi;
    if (i >= seq || w >= words) continue;
    const uint32_t* run = reinterpret_cast<const uint32_t*>(&src[qi][wi * 32]);
    uint32_t v = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int q = (k + c / 4) % 8;
      const uint32_t x = run[q];  // four flags, one per byte (0 or 1)
      v |= ((x | x >> 7 | x >> 14 | x >> 21) & 0xfu) << (4 * q);
    }
    bits[(static_cast<size_t>(bh) * seq + i) * words + w] = v;
  }
}

// The bits of a tile as words, into shared memory: dst[qi][wi] = word j0/32 + wi of query row i0 + qi
// (0 for rows >= S and words >= W), one coalesced 32-bit load per word. Readers take their flags
// straight from the words (one shared load per 32 keys of a row instead of one byte load per flag,
// which also met 4-way bank conflicts in the [query][key] byte tiles). Callers __syncthreads()
// before reading dst.
template <int kQueries, int kKeys, int kThreads, bool kUnroll = true>
__device__ __forceinline__ void keep_words_load(uint32_t (*dst)[kKeys / 32], const uint32_t* bits, int bh, int seq,
                                                int i0, int j0) {
  static_assert(kKeys % 32 == 0, "keep-flag tiles must span whole 32-bit words");
  constexpr int kWords = kKeys / 32;
  const int words = keep_words(seq);
  block_for<kQueries * kWords, kThreads, kUnroll>([&](int c) {
    const int qi = c / kWords, wi = c % kWords;
    const int i = i0 + qi, w = j0 / 32 + wi;
    dst[qi][wi] = i < seq && w < words ? bits[(static_cast<size_t>(bh) * seq + i) * words + w] : 0u;
  });
}

// Two products over the head dim for the warp's 16 rows (from wrow) of a1 / a2 against every row
// of b1 / b2 (kNTiles n-tiles of 8): c1 = a1·b1ᵀ, c2 = a2·b2ᵀ; all four tiles stored
// [row][head dim] in shared memory. Backward uses it for (S, dP) and their transposes.
template <typename E, int kNTiles>
__device__ __forceinline__ void mma_pair_nt(float (&c1)[kNTiles][4], float (&c2)[kNTiles][4],
                                            const E (*a1)[kFlashStride], const E (*a2)[kFlashStride],
                                            const E (*b1)[kFlashStride], const E (*b2)[kFlashStride], int wrow) {
#pragma unroll
  for (int n = 0; n < kNTiles; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) c1[n][e] = c2[n][e] = 0.f;
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks) {
    uint32_t x[4], y[4];
    load_a<E>(x, a1, wrow, ks);
    load_a<E>(y, a2, wrow, ks);
#pragma unroll
    for (int n = 0; n < kNTiles; n += 2) {
      uint32_t u[4], v[4];
      load_b_nk<E>(u, b1, n * 8, ks);
      mma16816<E>(c1[n], x, u[0], u[1]);
      mma16816<E>(c1[n + 1], x, u[2], u[3]);
      load_b_nk<E>(v, b2, n * 8, ks);
      mma16816<E>(c2[n], y, v[0], v[1]);
      mma16816<E>(c2[n + 1], y, v[2], v[3]);
    }
  }
}

}  // namespace flash
}  // namespace dskc
