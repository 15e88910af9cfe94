// ==== dskc generated module ====
// dskc 0.1.0 | config c32adbaa3331b3ee | arch sm_90 | NVRTC 13.0
// options: --gpu-architecture=sm_90a -Xptxas=-v --std=c++17 -default-device --diag-suppress=177 -I/usr/local/cuda/include
// layer: hidden 1024, heads 16 (head dim 64), intermediate 4096, batch <= 16, seq <= 512, fp16, Pre-LN
// dropout: attention 0.1, hidden 0.1; eps 1e-12; GELU erf; training
// flags: attn_dropout_checkpoint off, normalize_invertible off, gelu_checkpoint off, stochastic_mode off
// kernels (12): layernorm_fwd_norm attn_flash_fwd bias_dropout_residual_layernorm_fwd_attn gemm_inter_fwd bias_dropout_residual_fwd_ffn dropout_bias_grad_ffn_out bias_gelu_bwd layernorm_bwd_attn attn_flash_bwd_dot attn_flash_bwd_dkdv layernorm_bwd_norm param_grad_reduce_layernorm
// The gemm_sm90 kernels are GEMMs (TMA + wgmma); the other GEMMs run in cuBLAS/cuBLASLt between these kernels; see `dskc inspect` for the schedule.

// ---------------- common/philox.cuh ----------------
// Philox4x32-10 counter-based RNG and the dropout keep rule shared by the generated kernels and
// the CPU reference (compiled as plain C++ there), so masks regenerate bit-identically anywhere.
// Keep rule: element `idx` of stream `stream` at training step `step` for layer `layer` under
// `seed` is kept iff its 16-bit draw >= threshold(ratio) = floor(ratio * 2^16) (at most 65535).
// Eight consecutive elements (group idx / 8) share one Philox call: draw idx % 8 = i is the low
// (i even) or high (i odd) half of word i / 2. 16-bit draws halve the Philox work of the 32-bit
// ones (the attention mask kernels are bound by it); the keep probability 1 - threshold / 2^16
// is within 2^-16 of 1 - ratio.
#if defined(__CUDACC_RTC__)
// NVRTC has no C library headers; these are the widths CUDA guarantees.
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define DSKC_HD __host__ __device__ __forceinline__
#else
#define DSKC_HD inline
#endif

namespace dskc_rng {

struct U32x4 {
  uint32_t x, y, z, w;
};

// The 64-bit product a·b as its high and low words. On the device as two 32-bit multiplies
// (mul.hi.u32, mul.lo.u32): from the 64-bit product NVRTC kept the whole Philox state in 64-bit
// registers (mul.lo.s64 of masked operands, 64-bit xors and shifts: ~2x the instructions in
// attn_dropout_bits and every other dropout kernel, bench/NOTES.md v24). The same bits either way.
DSKC_HD uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
#if defined(__CUDA_ARCH__)
  *hi = __umulhi(a, b);
  return a * b;
#else
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
#endif
}

// Philox4x32 with 10 rounds (Salmon et al., SC'11).
DSKC_HD U32x4 philox4x32_10(U32x4 ctr, uint32_t k0, uint32_t k1) {
  const uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  const uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#pragma unroll
#endif
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(kM0, ctr.x, &hi0);
    uint32_t lo1 = mulhilo(kM1, ctr.z, &hi1);
    ctr = U32x4{hi1 ^ ctr.y ^ k0, lo1, hi0 ^ ctr.w ^ k1, lo0};
    k0 += kW0;
    k1 += kW1;
  }
  return ctr;
}

// Streams: which dropout site a draw belongs to.
enum Stream : uint32_t { kStreamAttnProbs = 1, kStreamAttnOutput = 2, kStreamFfnOutput = 3 };

struct DropoutKey {
  uint64_t seed;
  uint32_t layer;
  uint32_t step;
};

// Elements sharing one Philox call.
constexpr int kDrawsPerCall = 8;

// The Philox output for elements [8*group, 8*group+8) of one stream (select_draw picks one).
DSKC_HD U32x4 dropout_draws(DropoutKey key, uint32_t stream, uint64_t group) {
  U32x4 ctr{static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), key.step,
            (key.layer << 4) ^ stream};
  return philox4x32_10(ctr, static_cast<uint32_t>(key.seed), static_cast<uint32_t>(key.seed >> 32));
}

DSKC_HD uint32_t dropout_threshold(double ratio) {
  double t = ratio * 65536.0;
  return t >= 65535.0 ? 65535u : static_cast<uint32_t>(t);
}

DSKC_HD uint32_t select_word(U32x4 d, int i) { return i == 0 ? d.x : i == 1 ? d.y : i == 2 ? d.z : d.w; }
// The 16-bit draw i (0..7) of one Philox output.
DSKC_HD uint32_t select_draw(U32x4 d, int i) { return (select_word(d, i >> 1) >> (16 * (i & 1))) & 0xFFFFu; }

// Scalar form (the CPU reference uses this; kernels use dropout_draws per group of eight).
DSKC_HD bool dropout_keep(DropoutKey key, uint32_t stream, uint64_t idx, uint32_t threshold) {
  return select_draw(dropout_draws(key, stream, idx >> 3), static_cast<int>(idx & 7)) >= threshold;
}

}  // namespace dskc_rng

// ---------------- dskc_config.cuh ----------------
// dskc_config.cuh: compile-time constants of this layer (generated; config c32adbaa3331b3ee).
#include <cuda_fp16.h>
#include <cuda_bf16.h>

using T = __half;  // storage type: fp16
constexpr int kBatch = 16;  // batch_size: largest micro-batch accepted
constexpr int kMaxSeq = 512;  // max_seq_length
constexpr int kSeqPad = 8;  // attention rows padded to a multiple of this
constexpr int kHidden = 1024;
constexpr int kHeads = 16;
constexpr int kHeadDim = 64;
constexpr int kInter = 4096;  // intermediate_size
constexpr float kLayerNormEps = 1e-12f;
constexpr bool kTraining = true;
constexpr bool kPreLayerNorm = true;
constexpr bool kGeluTanh = false;  // gelu_approximation: none (erf)
constexpr bool kAttnDropoutCheckpoint = false;
constexpr bool kNormalizeInvertible = false;
constexpr bool kGeluCheckpoint = false;
constexpr bool kStochasticMode = false;
constexpr bool kAttnDropoutOn = true;  // attn_dropout_ratio 0.1
constexpr bool kHiddenDropoutOn = true;  // hidden_dropout_ratio 0.1
constexpr bool kAttnFwdStoresBits = false;  // DSKC_ATTN_MASK=ln: layernorm_fwd_norm writes the keep bits
constexpr bool kAttnFwdLoadsBits = true;  // DSKC_ATTN_MASK=ln: attn_flash_fwd reads the bits layernorm_fwd_norm wrote
constexpr int kAttnFwdStages = 1;  // attn_flash_fwd's K/V tile buffers
constexpr bool kLnBwdWarpRows = true;  // layernorm_bwd: a warp per row where rows are at most 128 vectors
constexpr bool kFfnGemmSm90 = true;  // the intermediate GEMM is a gemm_sm90 kernel (GELU in its epilogue)
constexpr bool kLinearGemmSm90 = false;  // the forward's QKV, attention-output and output GEMMs run in cuBLASLt
constexpr bool kGeluInGemm = false;  // GELU by bias_gelu_fwd / bias_gelu_bwd
constexpr uint32_t kAttnDropoutThreshold = 6553u;  // keep iff draw >= ratio * 2^16 (16-bit draw)
constexpr float kAttnDropoutScale = 1.1111112f;  // 1 / (1 - ratio)
constexpr uint32_t kHiddenDropoutThreshold = 6553u;
constexpr float kHiddenDropoutScale = 1.1111112f;

// ---------------- common/dropout.cuh ----------------
// Dropout masks for N consecutive elements starting at any element index, from the shared
// Philox keep rule (common/philox.cuh). Reuses one Philox call per group of eight indices.

namespace dskc {

struct DropoutArgs {
  unsigned long long seed;
  unsigned int layer;
  unsigned int step;
};

template <int N>
__device__ __forceinline__ void dropout_keep_n(DropoutArgs a, uint32_t stream, uint64_t first,
                                               uint32_t threshold, bool (&keep)[N]) {
  const dskc_rng::DropoutKey key{a.seed, a.layer, a.step};
  uint64_t group = first >> 3;
  dskc_rng::U32x4 d = dskc_rng::dropout_draws(key, stream, group);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint64_t idx = first + i;
    if ((idx >> 3) != group) {
      group = idx >> 3;
      d = dskc_rng::dropout_draws(key, stream, group);
    }
    keep[i] = dskc_rng::select_draw(d, static_cast<int>(idx & 7)) >= threshold;
  }
}

// The same flags for a vector that lies inside one group of eight indices: kV divides 8 and
// `first` is a multiple of kV (every 16-byte vector of a row-major [rows, cols] tensor whose
// cols are a multiple of kV: the hidden-dropout kernels). One Philox call, no branches: the general
// form above cannot know that the group stays the same and keeps a conditional Philox call per
// element, which the compiler expands into kV copies (layernorm_bwd_attn had 27 in its PTX).
template <int kV>
__device__ __forceinline__ void dropout_keep_vec(DropoutArgs a, uint32_t stream, uint64_t first, uint32_t threshold,
                                                 bool (&keep)[kV]) {
  static_assert(8 % kV == 0, "a vector inside one group of eight draws");
  const dskc_rng::DropoutKey key{a.seed, a.layer, a.step};
  const dskc_rng::U32x4 d = dskc_rng::dropout_draws(key, stream, first >> 3);
  const int lead = static_cast<int>(first & 7);  // a multiple of kV
#pragma unroll
  for (int i = 0; i < kV; ++i) {
    // draw lead + i of the group, without a dynamic index: lead is a multiple of kV
    uint32_t w;
    if constexpr (kV == 8) {
      w = dskc_rng::select_draw(d, i);
    } else {
      w = dskc_rng::select_draw(d, (lead + i) & 7);
    }
    keep[i] = w >= threshold;
  }
}

}  // namespace dskc

// ---------------- common/types.cuh ----------------
// Element types and 16-byte vector access for the generated kernels. T is the layer's storage
// type (float, __half or __nv_bfloat16), chosen by dskc_config.cuh; all arithmetic is in float.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace dskc {

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

// Rounds a float to storage type U and back (what a value looks like once stored).
template <typename U>
__device__ __forceinline__ float round_to(float x) {
  return to_f(from_f<U>(x));
}

// Widest vector (<= 16 bytes) whose width divides `cols`, so rows stay aligned.
template <typename T, int kCols>
struct VecWidth {
  static constexpr int kMax = 16 / static_cast<int>(sizeof(T));
  static constexpr int value = (kCols % kMax == 0) ? kMax : (kCols % 4 == 0 && kMax >= 4) ? 4
                               : (kCols % 2 == 0) ? 2 : 1;
};

// Elementwise kernels: f(e) for the first element index e of every kV-wide vector of an
// [rows, kCols] tensor of E (kV = VecWidth<E, kCols>), over a grid-stride loop.
template <typename E, int kCols, typename F>
__device__ __forceinline__ void for_each_vec(int rows, F&& f) {
  constexpr int kV = VecWidth<E, kCols>::value;
  const size_t n_vec = static_cast<size_t>(rows) * (kCols / kV);
  for (size_t vi = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; vi < n_vec;
       vi += static_cast<size_t>(gridDim.x) * blockDim.x)
    f(vi * kV);
}

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Loads N elements starting at p (aligned to N elements) and widens them to float.
template <typename T, int N>
__device__ __forceinline__ void load_f(const T* p, float (&out)[N]) {
  Vec<T, N> v = *reinterpret_cast<const Vec<T, N>*>(p);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = to_f(v.v[i]);
}

template <typename T, int N>
__device__ __forceinline__ void store_f(T* p, const float (&in)[N]) {
  Vec<T, N> v;
#pragma unroll
  for (int i = 0; i < N; ++i) v.v[i] = from_f<T>(in[i]);
  *reinterpret_cast<Vec<T, N>*>(p) = v;
}

// Threads for a block that walks one row of kVecs vectors (a multiple of 32, at most 1024).
template <int kVecs>
struct RowThreads {
  static constexpr int kRaw = kVecs >= 512 ? 512 : ((kVecs + 31) / 32) * 32;
  static constexpr int value = kRaw < 32 ? 32 : kRaw;
  static constexpr int kPerThread = (kVecs + value - 1) / value;
};

}  // namespace dskc

// ---------------- common/row_tiles.cuh ----------------
// Row tiles for backward kernels that also produce per-column (bias / LayerNorm parameter)
// gradient partial sums: a block owns kGradRowsPerBlock consecutive rows, its threads cover the
// kCols columns in vectors, and each thread keeps its columns' sums in registers. Partials go
// to part[blockIdx.x, kCols] (float) and param_grad_reduce sums them in a fixed order, so the
// result is bitwise reproducible run to run.

namespace dskc {

constexpr int kGradRowsPerBlock = 8;

template <int kCols>
struct RowTile {
  static constexpr int kV = VecWidth<T, kCols>::value;
  static constexpr int kThreads = RowThreads<kCols / kV>::value;
  static constexpr int kPer = RowThreads<kCols / kV>::kPerThread;
  __device__ static int col(int k) { return (threadIdx.x + k * kThreads) * kV; }
};

// Asynchronous global -> shared copies (cp.async, sm_80+) of kBytes = 4, 8 or 16 per thread, for
// kernels that stage the next row while they reduce the current one. Each thread reads back only
// what it copied itself, so cp_async_wait<N>() (at most N groups still pending) is all the
// synchronization it needs.
template <int kBytes>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (kBytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(gmem), "n"(kBytes) : "memory");
}
// 16 bytes, or (valid false) 16 zero bytes: cp.async's source size 0 reads nothing from gmem, which
// must still be a valid address (callers pass a row inside the tensor).
__device__ __forceinline__ void cp_async_zfill16(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Number of partial rows a row-tiled kernel writes for `rows` input rows.
__host__ __device__ constexpr int grad_parts(int rows) {
  return (rows + kGradRowsPerBlock - 1) / kGradRowsPerBlock;
}

}  // namespace dskc

// ---------------- common/fast_math.cuh ----------------
// Single-MUFU-instruction forms of 2^x and 1/x: the flush-to-zero approximations
// (ex2.approx.ftz, rcp.approx.ftz). exp2f / __expf and __fdividef are the IEEE-denormal forms,
// which compile to a range check and a rescale around the MUFU op (bench/NOTES.md v25: they made
// the GELU passes issue-bound). Inputs and results below 2^-126 flush to zero.

namespace dskc {

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace dskc

// ---------------- common/flash.cuh ----------------
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
enum FlashDq { kDqPerQueryTile = 0, kDqAtomic = 1, kDqGemm = 2 };

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

// ---------------- attn_dropout_bits.cuh ----------------
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

// ---------------- common/reduce.cuh ----------------
// Warp and block reductions (float). Block reductions need kThreads % 32 == 0 and a shared
// scratch of kThreads / 32 floats; every thread receives the result.

namespace dskc {

template <typename V>
__device__ __forceinline__ V warp_sum(V v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <int kThreads>
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  static_assert(kThreads % 32 == 0, "block_sum needs whole warps");
  v = warp_sum(v);
  if constexpr (kThreads == 32) {
    return v;
  } else {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < kThreads / 32 ? scratch[lane] : 0.f;
    return warp_sum(v);
  }
}

// Two block sums in one round of shared memory (each component added in block_sum's order, so
// the results are bitwise block_sum's): two barriers instead of four.
template <int kThreads>
__device__ __forceinline__ float2 block_sum2(float a, float b, float2* scratch) {
  static_assert(kThreads % 32 == 0, "block_sum2 needs whole warps");
  a = warp_sum(a);
  b = warp_sum(b);
  if constexpr (kThreads == 32) {
    return make_float2(a, b);
  } else {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 0) scratch[warp] = make_float2(a, b);
    __syncthreads();
    const float2 v = lane < kThreads / 32 ? scratch[lane] : make_float2(0.f, 0.f);
    return make_float2(warp_sum(v.x), warp_sum(v.y));
  }
}

// Block-wide sum / max over kThreads threads with their own shared scratch (one array per
// instantiation); every thread receives the result, combined in a fixed order.
template <int kThreads, typename V>
__device__ __forceinline__ V block_sum_shared(V v) {
  static_assert(kThreads % 32 == 0, "block reductions need whole warps");
  __shared__ V scratch[kThreads / 32];
  v = warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kThreads / 32 ? scratch[lane] : V(0);
  return warp_sum(v);
}

template <int kThreads>
__device__ __forceinline__ float block_max_shared(float v) {
  static_assert(kThreads % 32 == 0, "block reductions need whole warps");
  __shared__ float scratch[kThreads / 32];
  v = warp_max(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kThreads / 32 ? scratch[lane] : __int_as_float(0xff800000u);
  return warp_max(v);
}

}  // namespace dskc

// ---------------- layernorm_fwd.cuh ----------------
// layernorm_fwd: y = (x - mean) * rstd * gamma + beta over rows of kCols, one warp (or, for wide
// rows, one block) per row, the row held in registers (two-pass mean/variance). Saves mean and
// rstd per row for backward.

namespace dskc {

struct LayerNormFwdParams {
  const T* x;      // [rows, kCols]
  const T* gamma;  // [kCols]
  const T* beta;   // [kCols]
  T* y;            // [rows, kCols]
  float* mean;     // [rows]
  float* rstd;     // [rows]
  int rows;
};

// Which threads hold which columns of which row. Rows of at most 128 vectors (BERT-Large's 1024
// fp16 columns: four 16-byte vectors per lane) run one per warp, four per 128-thread block: the
// reductions are warp shuffles (no block barriers) and every thread has all its loads in flight at
// once. Wider rows run one per block. The plan sizes the grid the same way (rows per block).
template <int kCols>
struct LayerNormShape {
  static constexpr int kV = VecWidth<T, kCols>::value;
  static constexpr int kVecs = kCols / kV;
  static constexpr bool kWarpRows = kVecs <= 128;
  static constexpr int kRowsPerBlock = kWarpRows ? 4 : 1;
  static constexpr int kThreads = kWarpRows ? 32 * kRowsPerBlock : RowThreads<kVecs>::value;
  static constexpr int kRowThreads = kWarpRows ? 32 : kThreads;  // threads sharing one row
  static constexpr int kPer = (kVecs + kRowThreads - 1) / kRowThreads;
  __device__ static int row() { return kWarpRows ? blockIdx.x * kRowsPerBlock + threadIdx.x / 32 : blockIdx.x; }
  __device__ static int lane() { return kWarpRows ? threadIdx.x % 32 : threadIdx.x; }
  __device__ static int col(int k) { return (lane() + k * kRowThreads) * kV; }
};

// Sum over the threads of one row (S's layout); every thread of the row receives it.
template <typename S>
__device__ __forceinline__ float row_sum(float v) {
  if constexpr (S::kWarpRows) return warp_sum(v);
  else return block_sum_shared<S::kThreads>(v);
}

// Normalizes the kPer*kV values a thread holds (v) in place; the threads of S::row() cover the row.
template <int kCols, typename S = LayerNormShape<kCols>>
__device__ __forceinline__ void layernorm_row(float (&v)[S::kPer][S::kV], const T* gamma, const T* beta,
                                              float* mean_out, float* rstd_out) {
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    if (S::col(k) < kCols) {
#pragma unroll
      for (int i = 0; i < S::kV; ++i) s += v[k][i];
    }
  }
  const float mean = row_sum<S>(s) * (1.f / kCols);
  float q = 0.f;
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    if (S::col(k) < kCols) {
#pragma unroll
      for (int i = 0; i < S::kV; ++i) {
        const float d = v[k][i] - mean;
        q += d * d;
      }
    }
  }
  const float rstd = rsqrtf(row_sum<S>(q) * (1.f / kCols) + kLayerNormEps);
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    const int c = S::col(k);
    if (c < kCols) {
      float g[S::kV], b[S::kV];
      load_f<T, S::kV>(gamma + c, g);
      load_f<T, S::kV>(beta + c, b);
#pragma unroll
      for (int i = 0; i < S::kV; ++i) v[k][i] = (v[k][i] - mean) * rstd * g[i] + b[i];
    }
  }
  if (S::lane() == 0) {
    *mean_out = mean;
    *rstd_out = rstd;
  }
}

// between(): work of every thread of the grid (rows past p.rows included) that needs nothing of the
// row, run while the row's loads are in flight (layernorm_fwd_bits.cuh: the attention keep bits).
template <int kCols, typename Between>
__device__ __forceinline__ void layernorm_fwd_impl(const LayerNormFwdParams& p, Between&& between) {
  using S = LayerNormShape<kCols>;
  const int row = S::row();
  const bool live = row < p.rows;  // a whole warp (warp rows) or block
  const T* x = p.x + static_cast<size_t>(row) * kCols;
  // The row stays packed (one 16-byte vector per k) while between() runs: half the registers of
  // the fp32 values.
  Vec<T, S::kV> raw[S::kPer];
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    const int c = S::col(k);
    if (live && c < kCols) raw[k] = *reinterpret_cast<const Vec<T, S::kV>*>(x + c);
  }
  between();
  if (!live) return;
  float v[S::kPer][S::kV] = {};
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    if (S::col(k) < kCols) {
#pragma unroll
      for (int i = 0; i < S::kV; ++i) v[k][i] = to_f(raw[k].v[i]);
    }
  }
  layernorm_row<kCols>(v, p.gamma, p.beta, p.mean + row, p.rstd + row);
  T* y = p.y + static_cast<size_t>(row) * kCols;
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    const int c = S::col(k);
    if (c < kCols) store_f<T, S::kV>(y + c, v[k]);
  }
}

template <int kCols>
__device__ __forceinline__ void layernorm_fwd_impl(const LayerNormFwdParams& p) {
  layernorm_fwd_impl<kCols>(p, [] {});
}

}  // namespace dskc

// ---------------- layernorm_fwd_bits.cuh ----------------
// layernorm_fwd_bits: Pre-LN's first LayerNorm (layernorm_fwd) and the attention dropout keep bits
// (attn_dropout_bits) in one launch. The two need nothing of each other: the LayerNorm is
// memory-bound (a row per warp, four 16-byte loads per lane at BERT-Large width), the bits are
// ALU-bound (Philox), so each thread issues its row's loads, draws its share of the bit words while
// they are in flight (attn_dropout_bits_strided over the whole LayerNorm grid), then normalizes.
// The words are the ones attn_dropout_bits writes, bit for bit. bits.bits == nullptr: the LayerNorm
// alone (normalize_invertible's re-run in backward without attn_dropout_checkpoint).

namespace dskc {

struct LayerNormFwdBitsParams {
  LayerNormFwdParams ln;
  AttnDropoutBitsParams bits;
};

template <int kCols>
__device__ __forceinline__ void layernorm_fwd_bits_impl(const LayerNormFwdBitsParams& p) {
  layernorm_fwd_impl<kCols>(p.ln, [&] {
    if (p.bits.bits)
      attn_dropout_bits_strided(p.bits, kHeads, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
  });
}

}  // namespace dskc

// ---------------- common/sm90.cuh ----------------
// Hopper (sm_90a) building blocks of the warp-specialized GEMM (templates/gemm_sm90.cuh):
// mbarriers, bulk tensor copies (TMA) and warpgroup MMA (wgmma). Every helper is PTX from the ISA's sm_90 chapter; the bodies compile only for
// sm_90a (__CUDA_ARCH_FEAT_SM90_ALL), elsewhere they are empty so that the templates still compile
// for every arch the CPU suite builds (the plan lists these kernels only for sm_90 targets).
//
// mbarrier phases: a barrier starts in phase 0; `wait(bar, parity)` returns once the phase with that
// parity has completed. A fresh barrier therefore passes wait(bar, 1) at once (the phase "before"
// phase 0 counts as complete), which is how producers start on empty buffers: they wait with the
// parity opposite to the consumers'.
//
// wgmma shared-memory operands: K-major tiles of 64 16-bit elements per row (128 bytes) written by
// TMA with CU_TENSOR_MAP_SWIZZLE_128B, so 16-byte chunk j of row r sits at chunk j ^ (r % 8); the
// descriptor names that layout (swizzle mode 1 = 128B), SBO = 1024 bytes between 8-row groups, LBO
// unused for swizzled K-major operands (1). The tile base must be 1024-byte aligned; the k16 steps
// inside the 64-element row advance the start address by 32 bytes.

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DSKC_SM90A 1
#else
#define DSKC_SM90A 0
#endif

namespace dskc {
namespace sm90 {

template <typename A, typename B>
struct SameType {
  static constexpr bool value = false;
};
template <typename A>
struct SameType<A, A> {
  static constexpr bool value = true;
};

// A CUtensorMap as the kernel sees it (cuda.h's CUtensorMap: 128 bytes, 128-byte aligned; the
// runtime encodes it with cuTensorMapEncodeTiled and passes it inside a __grid_constant__ params
// struct, so its address is in the kernel parameter space, as cp.async.bulk.tensor requires).
struct alignas(128) TmaDescriptor {
  unsigned long long opaque[16];
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
#if DSKC_SM90A
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
// Makes the barrier initializations visible to the other threads and to the async (TMA) proxy.
__device__ __forceinline__ void mbar_init_fence() {
#if DSKC_SM90A
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// One arrival (release semantics: this thread's earlier shared-memory writes are visible to a
// thread whose wait sees the phase complete).
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#if DSKC_SM90A
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}
// One arrival that also expects `bytes` of TMA transactions before the phase can complete.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if DSKC_SM90A
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if DSKC_SM90A
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}

// 2-D bulk tensor copy global -> shared: the box at (inner coordinate c0, outer coordinate c1) of
// the tensor map lands at `dst` and completes `bytes` on `bar`. Rows past the tensor's end are
// zero-filled.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const TmaDescriptor* map, uint32_t bar, int c0, int c1) {
#if DSKC_SM90A
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::
          "r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
#endif
}
// The same for a 3-D tensor map (coordinates innermost first): the box at (c0, c1, c2); elements
// outside the tensor (e.g. rows past one sequence's end, where dim 1 is the sequence) read as zero.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const TmaDescriptor* map, uint32_t bar, int c0, int c1,
                                            int c2) {
#if DSKC_SM90A
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
#endif
}
__device__ __forceinline__ void tma_prefetch_descriptor(const TmaDescriptor* map) {
#if DSKC_SM90A
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#endif
}
// A 4-byte asynchronous copy global -> shared (cp.async, not the bulk engine): `bytes` = 4 copies the
// word, 0 writes zero (the source is not read). Completion is tracked per thread by
// cp_async_mbar_arrive.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, uint32_t bytes) {
#if DSKC_SM90A
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
#endif
}
// One arrival on `bar` once every cp.async this thread issued before has landed (.noinc: the arrival
// counts against the count the barrier was initialized with).
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t bar) {
#if DSKC_SM90A
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#endif
}

// 2-D bulk tensor copy shared -> global: the box at `src` (the layout a load of the same box would
// leave: 128-byte rows, swizzled) to (c0, c1) of the tensor map; rows past the tensor's end are not
// written. One commit group per `tma_store_commit`; `tma_store_wait_read<N>` returns once all but the
// newest N groups of this thread have read their shared memory (it may be overwritten), and
// `tma_store_wait<0>` once every store of this thread is complete. Threads that wrote the box with
// ordinary stores must `fence_proxy_async` (and synchronize with the issuing thread) first.
__device__ __forceinline__ void tma_store_2d(const TmaDescriptor* map, uint32_t src, int c0, int c1) {
#if DSKC_SM90A
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1)
               : "memory");
#endif
}
// 3-D form of tma_store_2d: elements outside the tensor are not written.
__device__ __forceinline__ void tma_store_3d(const TmaDescriptor* map, uint32_t src, int c0, int c1, int c2) {
#if DSKC_SM90A
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
#endif
}
__device__ __forceinline__ void tma_store_commit() {
#if DSKC_SM90A
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
template <int kPending>
__device__ __forceinline__ void tma_store_wait_read() {
#if DSKC_SM90A
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
#endif
}
template <int kPending>
__device__ __forceinline__ void tma_store_wait() {
#if DSKC_SM90A
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}
__device__ __forceinline__ void fence_proxy_async() {
#if DSKC_SM90A
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Four 8x8 16-bit matrices from registers into shared memory (lanes 8j..8j+7 address the rows of
// matrix j; lane l holds row l/4, columns 2(l%4), +1 of each: the accumulator fragment layout).
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
#if DSKC_SM90A
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
#endif
}
// 16 bytes from shared memory (a shared-window address), ordered after earlier barriers' waits.
__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}
// Its inverse: the same addresses give every lane back the pairs it would store.
__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t (&r)[4]) {
#if DSKC_SM90A
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
#endif
}
// Warp-specialized register split: a warpgroup gives registers back to the block's pool (.dec) or
// takes them (.inc, waits until the pool has them); every warp of the warpgroup executes it.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
#if DSKC_SM90A
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
#if DSKC_SM90A
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
// Named barriers (ids 1-15; 0 is __syncthreads): bar.sync waits until kCount threads have arrived
// at barrier kId, bar.arrive arrives without waiting.
template <int kId, int kCount>
__device__ __forceinline__ void named_sync() {
#if DSKC_SM90A
  asm volatile("bar.sync %0, %1;\n" ::"n"(kId), "n"(kCount) : "memory");
#endif
}
template <int kId, int kCount>
__device__ __forceinline__ void named_arrive() {
#if DSKC_SM90A
  asm volatile("bar.arrive %0, %1;\n" ::"n"(kId), "n"(kCount) : "memory");
#endif
}
// The 128 threads of math warpgroup wg (0 or 1): named barrier 1 + wg.
__device__ __forceinline__ void warpgroup_sync(int wg) { wg == 0 ? named_sync<1, 128>() : named_sync<2, 128>(); }
// Hand-over between the two math warpgroups (named barriers 3 + wg, 256 threads): warpgroup `wg`
// waits for its turn (turn_wait) until the other one has called turn_give(wg).
__device__ __forceinline__ void turn_wait(int wg) { wg == 0 ? named_sync<3, 256>() : named_sync<4, 256>(); }
__device__ __forceinline__ void turn_give(int wg) { wg == 0 ? named_arrive<3, 256>() : named_arrive<4, 256>(); }

// A kernel's compile-time cluster size (x CTAs) where the arch has clusters (sm_90+); the generated
// source uses it for cluster kernels (compiler/codegen.cpp), which also compile standalone for sm_80.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define DSKC_CLUSTER_DIMS(x)
#else
#define DSKC_CLUSTER_DIMS(x) __cluster_dims__(x, 1, 1)
#endif

// Thread-block clusters: the cluster-wide barrier (every thread of every CTA of the cluster arrives,
// then waits; arrive and wait alternate per thread), and 16-byte stores into a peer CTA's shared
// memory (distributed shared memory: `addr` in this CTA's shared window, mapped to CTA `rank`).
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if DSKC_SM90A
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_arrive_release() {
#if DSKC_SM90A
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if DSKC_SM90A
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void st_cluster_f4(uint32_t addr, uint32_t rank, float4 v) {
#if DSKC_SM90A
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(remote), "f"(v.x), "f"(v.y), "f"(v.z),
               "f"(v.w)
               : "memory");
#endif
}

// Shared-memory matrix descriptor of a K-major, 128B-swizzled operand tile starting at `addr`.
__device__ __forceinline__ uint64_t wgmma_desc_k128(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

// The same layout read N-major (B = [k][n] with n contiguous: 64-element rows of 128 bytes, one
// row per k, 128B-swizzled as TMA writes a [k rows][64 columns] box), for wgmma's transposed-B
// form (imm-tnsp-b = 1). Canonical layout ((8,8,m),(8,k)):((1,8,LBO),(64,SBO)) in elements: with
// N = 64 there is one 64-wide block (the LBO stride is never used) and SBO = 1024 bytes between
// 8-row groups of k; both fields are set to 1024. A k16 step advances the start by 16 rows (2048 B).
__device__ __forceinline__ uint64_t wgmma_desc_mn128(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1024 >> 4) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

// Pins accumulator registers in program order around the asynchronous wgmmas: the compiler may not
// move their reads (the epilogue) above a wgmma_wait, nor their writes (zeroing) below a wgmma.
template <int kN>
__device__ __forceinline__ void fence_operands(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void wgmma_fence() {
#if DSKC_SM90A
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if DSKC_SM90A
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#if DSKC_SM90A
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}

#define DSKC_F8(d, i)                                                                                       \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
// The 64 accumulator operands of an m64n128 wgmma.
#define DSKC_WGMMA_D64                                                                                          \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "  \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "    \
  "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define DSKC_F64(d) \
  DSKC_F8(d, 0), DSKC_F8(d, 8), DSKC_F8(d, 16), DSKC_F8(d, 24), DSKC_F8(d, 32), DSKC_F8(d, 40), DSKC_F8(d, 48), DSKC_F8(d, 56)

// D[64x128] += A[64x16] · B[128x16]ᵀ, both K-major in shared memory (descriptors), fp32 accumulate. Accumulator layout (PTX ISA, wgmma D fragments): thread t of the
// warpgroup, w = t / 32, l = t % 32, holds for each 8-column group g (0-15) d[4g], d[4g+1] = (row
// 16w + l/4, cols 8g + 2(l%4), +1) and d[4g+2], d[4g+3] = the same columns of row 16w + l/4 + 8.
template <typename E>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
#if DSKC_SM90A
  if constexpr (SameType<E, __half>::value) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " DSKC_WGMMA_D64 ", %64, %65, 1, 1, 1, 0, 0;\n"
        : DSKC_F64(d)
        : "l"(desc_a), "l"(desc_b));
  } else {
    static_assert(SameType<E, __nv_bfloat16>::value, "wgmma operands are fp16 or bf16");
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " DSKC_WGMMA_D64 ", %64, %65, 1, 1, 1, 0, 0;\n"
        : DSKC_F64(d)
        : "l"(desc_a), "l"(desc_b));
  }
#endif
}

// The 32 accumulator operands of an m64n64 wgmma.
#define DSKC_WGMMA_D32                                                                                         \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define DSKC_F32(d) DSKC_F8(d, 0), DSKC_F8(d, 8), DSKC_F8(d, 16), DSKC_F8(d, 24)

// D[64x64] (+)= A[64x16] · B[64x16]ᵀ, both K-major in shared memory; `accumulate` = 0 overwrites D
// (scale-d). kTnsp = 1: both read M/N-major instead (wgmma_desc_mn128: A stored [k][m] with m
// contiguous, B [k][n] with n contiguous; imm-tnsp-a = imm-tnsp-b = 1), D[64x64] (+)= A · B[16x64].
// D layout: thread t, w = t / 32, l = t % 32 holds for 8-column group j (0-7) d[4j], d[4j+1]
// = (row 16w + l/4, cols 8j + 2(l%4), +1) and d[4j+2], d[4j+3] = row + 8.
template <typename E, int kTnsp = 0>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  static_assert(kTnsp == 0 || kTnsp == 1, "imm-tnsp is 0 or 1");
#if DSKC_SM90A
  if constexpr (SameType<E, __half>::value) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " DSKC_WGMMA_D32 ", %32, %33, p, 1, 1, %35, %35;\n}\n"
        : DSKC_F32(d)
        : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTnsp));
  } else {
    static_assert(SameType<E, __nv_bfloat16>::value, "wgmma operands are fp16 or bf16");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " DSKC_WGMMA_D32 ", %32, %33, p, 1, 1, %35, %35;\n}\n"
        : DSKC_F32(d)
        : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTnsp));
  }
#endif
}
// D[64x64] += A[64x16] · B[16x64], A from registers (four 16-bit pairs per thread in the layout of
// mma.m16n8k16's A fragment, warp w holding rows 16w..16w+15: the accumulator layout above, packed
// per k16 step), B N-major in shared memory (wgmma_desc_mn128, imm-tnsp-b = 1).
template <typename E>
__device__ __forceinline__ void wgmma_m64n64k16_rs_tn(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
#if DSKC_SM90A
  if constexpr (SameType<E, __half>::value) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " DSKC_WGMMA_D32 ", {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
        : DSKC_F32(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  } else {
    static_assert(SameType<E, __nv_bfloat16>::value, "wgmma operands are fp16 or bf16");
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " DSKC_WGMMA_D32 ", {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
        : DSKC_F32(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  }
#endif
}

}  // namespace sm90
}  // namespace dskc

// ---------------- attn_flash_fwd_wgmma.cuh ----------------
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
// K/V rows read as zeros) in shared memory once. Each thread loads its two rows' keep words of the tile
// from global memory before issuing the tile's products and first uses them after S is complete (a use
// before would stall the warp on the loads ahead of its wgmmas; bench/NOTES.md v20 (d)). Query rows past
// S are not stored.

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
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      sm90::wgmma_m64n64k16_ss<E>(s, sm90::wgmma_desc_k128(q_tile + 32 * kk), sm90::wgmma_desc_k128(k_tile(it) + 32 * kk),
                                  kk);
    sm90::wgmma_commit();
  };
  auto issue_pv = [&](int it) {
    const uint32_t v_tile = k_tile(it) + F::kTileBytes;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) sm90::wgmma_m64n64k16_rs_tn<E>(o, pa[kk], sm90::wgmma_desc_mn128(v_tile + 2048 * kk));
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

  // Normalize, write O and the logsumexp (the mma.sync kernel's code).
  flash::store_rows<E, kDropout, 8>(reinterpret_cast<E*>(p.ctx), p.lse, l, m, rows, seq, b, h, bh, t,
                                    [&](int j, int r) { return make_float2(o[4 * j + 2 * r], o[4 * j + 2 * r + 1]); });
#endif
}

}  // namespace dskc

// ---------------- bias_dropout_residual_layernorm_fwd.cuh ----------------
// bias_dropout_residual_layernorm_fwd: s = resid + dropout(x + bias); y = LayerNorm(s).
// One warp per row (one block for wide rows; register-resident: LayerNormShape). Used after the
// attention output projection (both LayerNorm placements) and after the FFN in Post-LN. s is the
// residual stream (saved or scratch per the plan), y the normalized output; mean/rstd saved for
// backward.

namespace dskc {

struct BiasDropoutResidualLnParams {
  const T* x;      // [rows, kCols] linear-layer output (no bias yet)
  const T* bias;   // [kCols]
  const T* resid;  // [rows, kCols]
  T* s;            // [rows, kCols] resid + dropout(x + bias)
  const T* gamma;  // [kCols]
  const T* beta;   // [kCols]
  T* y;            // [rows, kCols] LayerNorm(s)
  float* mean;     // [rows]
  float* rstd;     // [rows]
  int rows;
  DropoutArgs rng;
};

template <int kCols, bool kDropout, uint32_t kStream>
__device__ __forceinline__ void bias_dropout_residual_layernorm_fwd_impl(
    const BiasDropoutResidualLnParams& p) {
  using S = LayerNormShape<kCols>;
  const int row = S::row();
  if (row >= p.rows) return;
  const size_t base = static_cast<size_t>(row) * kCols;
  float v[S::kPer][S::kV];
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    const int c = S::col(k);
    if (c < kCols) {
      float x[S::kV], b[S::kV], r[S::kV];
      load_f<T, S::kV>(p.x + base + c, x);
      load_f<T, S::kV>(p.bias + c, b);
      load_f<T, S::kV>(p.resid + base + c, r);
      if constexpr (kDropout) {
        bool keep[S::kV];
        dropout_keep_vec<S::kV>(p.rng, kStream, base + c, kHiddenDropoutThreshold, keep);
#pragma unroll
        for (int i = 0; i < S::kV; ++i) x[i] = keep[i] ? (x[i] + b[i]) * kHiddenDropoutScale : 0.f;
      } else {
#pragma unroll
        for (int i = 0; i < S::kV; ++i) x[i] += b[i];
      }
#pragma unroll
      for (int i = 0; i < S::kV; ++i) v[k][i] = round_to<T>(r[i] + x[i]);  // as stored in s
      store_f<T, S::kV>(p.s + base + c, v[k]);
    }
  }
  layernorm_row<kCols>(v, p.gamma, p.beta, p.mean + row, p.rstd + row);
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    const int c = S::col(k);
    if (c < kCols) store_f<T, S::kV>(p.y + base + c, v[k]);
  }
}

}  // namespace dskc

// ---------------- common/gelu.cuh ----------------
// GELU and its derivative: exact (erf, BERT's) or the tanh approximation (DeepSpeed's kernel),
// matching PyTorch's F.gelu(approximate="none"|"tanh").
// The exact form needs the normal CDF Φ(x) = erfc(−x/√2)/2. CUDA's erff (a branch per magnitude
// range, ~25 instructions) made bias_gelu_fwd/_bwd issue-bound rather than memory-bound, so Φ
// comes from erfc(z) = t·exp(−z² + P(t)), t = 1/(1 + z/2), z = |x|/√2, with P the degree-9
// Chebyshev fit of Numerical Recipes' erfcc: fractional error below 1.2e-7 for every z ≥ 0, so
// the tails (x ≪ 0, where GELU is tiny) keep their relative accuracy; one reciprocal and one
// exponential, no branch. The reduced-precision intrinsics add a few ulp (tests/gpu/test_layer_numerics
// checks GELU and GELU′ over [−12, 12] against erfc in double).
// In base-2 form for the MUFU unit: Φ(−|x|) = t·2^(P₂(t) − x²·log2(e)/2), where P₂ = P·log2(e) − 1
// carries the factor 1/2 in its constant, and φ(x) = 2^(−x²·log2(e)/2 + log2(1/√(2π))): no multiply
// by log2(e) or by the constants outside the exponentials, and the derivative shares x² (ncu: both
// GELU passes were issue-bound, 83-86% of issue slots, bench/NOTES.md v25). The reciprocal and the
// exponentials are the flush-to-zero forms (common/fast_math.cuh: one MUFU instruction each, where
// the IEEE-denormal forms __fdividef / __expf compile to a range check and rescale around it). That
// flushes only results below 2^-126: GELU(x) and φ(x) for x < −13.2, where |GELU| < 2e-38 (0 in fp16
// anyway; bf16 subnormals).

namespace dskc {

// Φ(x), given x2 = x·x, from Φ(−|x|) = erfc(|x|/√2)/2.
__device__ __forceinline__ float normal_cdf(float x, float x2) {
  const float t = rcp_approx(fmaf(fabsf(x), 0.353553385f, 1.f));  // 1/(1 + z/2)
  float q = 0.246517301f;  // P·log2(e), constant term − 1
  q = fmaf(q, t, -1.18611491f);
  q = fmaf(q, t, 2.14747453f);
  q = fmaf(q, t, -1.63775313f);
  q = fmaf(q, t, 0.402321577f);
  q = fmaf(q, t, -0.268756866f);
  q = fmaf(q, t, 0.139630049f);
  q = fmaf(q, t, 0.539700627f);
  q = fmaf(q, t, 1.44272923f);
  q = fmaf(q, t, -2.82574821f);
  const float h = t * exp2_approx(fmaf(x2, -0.721347511f, q));  // −z²·log2(e) = −x²·log2(e)/2
  return x >= 0.f ? 1.f - h : h;
}

__device__ __forceinline__ float normal_cdf(float x) { return normal_cdf(x, x * x); }

template <bool kTanh>
__device__ __forceinline__ float gelu(float x) {
  if constexpr (kTanh) {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;
    return 0.5f * x * (1.f + tanhf(k0 * (x + k1 * x * x * x)));
  } else {
    return x * normal_cdf(x);
  }
}

template <bool kTanh>
__device__ __forceinline__ float gelu_grad(float x) {
  if constexpr (kTanh) {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;
    const float u = k0 * (x + k1 * x * x * x);
    const float t = tanhf(u);
    return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * k0 * (1.f + 3.f * k1 * x * x);
  } else {
    const float x2 = x * x;
    const float cdf = normal_cdf(x, x2);
    const float pdf = exp2_approx(fmaf(x2, -0.721347511f, -1.32574809f));  // e^(−x²/2)/√(2π)
    return fmaf(x, pdf, cdf);
  }
}

}  // namespace dskc

// ---------------- gemm_sm90.cuh ----------------
// gemm_sm90: dskc's Hopper GEMM C = A·Bᵀ. The FFN's two GELU GEMMs with the GELU fused into the
// epilogue (cuBLASLt has no erf-GELU epilogue, its GELU is the tanh form, and the separate bias_gelu
// passes cost a read and a write of the [B·S, I] activations each), and the forward's other linear
// GEMMs with plain epilogues (DSKC_LINEAR_GEMM=sm90):
//   kBiasGelu       (gemm_inter_fwd):    h = A·Bᵀ + bias, written to `out`; g = GELU(h) to `gelu`
//   kBiasGeluNoPre  (inference):         only g
//   kDGelu          (gemm_output_dgrad): dh = (A·Bᵀ) ⊙ GELU'(h), h read from `pre`, written to `out`
//   kDGeluStoreGelu (gelu_checkpoint):   the same, and g = GELU(h) to `gelu`
//   kBias           (gemm_qkv_fwd):      A·Bᵀ + bias to `out`
//   kPlain          (gemm_attn_out_fwd, gemm_output_fwd; with DSKC_DGRAD_GEMM=sm90 the backward's
//                   gemm_inter_dgrad, gemm_attn_out_dgrad, gemm_qkv_dgrad): A·Bᵀ to `out`
//   kBiasDropoutResidual (gemm_output_fwd with DSKC_OUTPUT_GEMM=fused, Pre-LN): out = r + dropout(A·Bᵀ
//                   + bias), r (the attention residual sum) read from `pre`, the hidden dropout of
//                   the FFN output drawn as bias_dropout_residual_fwd does (the product rounded to T
//                   first, then the same fp32 arithmetic: bitwise the same layer output)
// A is [m, kK] and B [kN, kK], both row-major (K contiguous): C = A·Bᵀ is the layout of
// x·Wᵀ with W = [out, in] as stored; the data gradients dY·W take the transposed weight
// (templates/weight_transpose.cuh). Values round exactly as on the cuBLASLt + bias_gelu path: the
// product (+ bias) is rounded to T once, and the GELU (or its derivative) is the same device
// function of that rounded value (common/gelu.cuh).
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
//     into one of its three 16 KB shared-memory regions in the TMA boxes' swizzled layout, a rolled
//     pass over each warp's own rows applies GELU / GELU' with 16-byte shared loads and stores, and
//     one thread stores the regions by TMA (64 x 64 boxes; rows past m are not written). The
//     backward's h tile arrives by TMA into two of the regions while the tile's mainloop runs; dh
//     overwrites it in place.
// Registers: __launch_bounds__(384, 1) gives every thread 168, enough for the 128 accumulators.
// Measured (bench/NOTES.md v17, v18): the mainloop alone runs at ~775 TFLOP/s on the FFN shapes
// (cuBLASLt: ~650), with the stores ~625, but the GELU / GELU' arithmetic of every element, though
// overlapped with the other warpgroup's mainloop, slows it (~0.03 ms a GEMM), so cuBLASLt + the
// bias_gelu passes stay the default. (v17's kernel: both warpgroups on one 128 x 256 tile and three epilogue warps.)

namespace dskc {

struct GemmEpi {
  static constexpr int kBiasGelu = 0;
  static constexpr int kBiasGeluNoPre = 1;
  static constexpr int kDGelu = 2;
  static constexpr int kDGeluStoreGelu = 3;
  static constexpr int kBias = 4;
  static constexpr int kPlain = 5;
  static constexpr int kBiasDropoutResidual = 6;
  // The epilogues without an elementwise pass (kBias, kPlain) need two shared-memory regions per math
  // warpgroup instead of three, which leaves room for a fifth pipeline stage.
  static constexpr bool plain(int epi) { return epi == kBias || epi == kPlain; }
  // ... and kBiasDropoutResidual, whose pass works in registers on the staged residual.
  static constexpr bool two_regions(int epi) { return plain(epi) || epi == kBiasDropoutResidual; }
};

// Shapes; compiler/plan.cpp mirrors kBlockM, kBlockN, kThreads and smem_bytes (static_asserts in
// the generated source).
struct GemmSm90Tile {
  static constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 64;
  static constexpr int kThreads = 384;
  static constexpr int kABytes = kBlockM * kBlockK * 2;  // one stage of A (128 rows x 128 bytes)
  static constexpr int kBBytes = kBlockN * kBlockK * 2;
  // Epilogue TMA boxes: 64 columns (128 bytes, swizzled) x 64 rows; a 64-row half of a tile of one
  // tensor ("region") is two boxes; each math warpgroup has three regions with a GELU epilogue (the
  // backward: the h tile's two halves and the products), two with a plain one (the tile's halves).
  static constexpr int kBoxRows = 64, kBoxBytes = kBoxRows * 128, kHalfBytes = 2 * kBoxBytes;
  static constexpr int stages(int epi) { return GemmEpi::two_regions(epi) ? 5 : 4; }
  static constexpr int epi_bytes(int epi) { return (GemmEpi::two_regions(epi) ? 2 : 3) * kHalfBytes; }
  static constexpr int barriers(int epi) { return 2 * stages(epi) + 2; }
  // + 1024: the stages and boxes need 1024-byte alignment (128B swizzle) and the dynamic base has less.
  static constexpr int smem_bytes(int epi) {
    return 1024 + stages(epi) * (kABytes + kBBytes) + 2 * epi_bytes(epi) + 8 * barriers(epi);
  }
};
static_assert(GemmSm90Tile::smem_bytes(GemmEpi::kBiasGelu) <= 227 * 1024 &&
                  GemmSm90Tile::smem_bytes(GemmEpi::kPlain) <= 227 * 1024,
              "gemm_sm90 needs more shared memory than an SM has");

struct GemmSm90Params {
  sm90::TmaDescriptor a;     // A [m, kK], box kBlockK x kBlockM
  sm90::TmaDescriptor b;     // B [kN, kK], box kBlockK x kBlockN
  sm90::TmaDescriptor out;   // [m, kN] h (kBiasGelu), dh (kDGelu*) or C (kBias, kPlain), 64 x 64 boxes (stores)
  sm90::TmaDescriptor gelu;  // [m, kN] GELU(h) (kBiasGelu*, kDGeluStoreGelu), 64 x 64 boxes (stores)
  sm90::TmaDescriptor pre;   // [m, kN] the saved pre-activation h (kDGelu*), 64 x 64 boxes (loads)
  const T* bias;             // [kN] (kBiasGelu*, kBias, kBiasDropoutResidual)
  int m;
  DropoutArgs rng;           // kBiasDropoutResidual: the FFN output's hidden dropout
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
struct EpiHasBias {  // the epilogues that add a bias
  static constexpr bool value = kEpi == GemmEpi::kBiasGelu || kEpi == GemmEpi::kBiasGeluNoPre || kEpi == GemmEpi::kBias;
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

template <int kN, int kK, int kEpi>
__device__ __forceinline__ void gemm_sm90_impl(const GemmSm90Params& p) {
#if DSKC_SM90A
  using G = GemmSm90Tile;
  using gemm_detail::frag_addr;
  static_assert(kN % G::kBlockN == 0 && kK % G::kBlockK == 0, "gemm_sm90 needs N % 128 == 0 and K % 64 == 0");
  constexpr bool kBias = gemm_detail::EpiHasBias<kEpi>::value;
  // h (kDGelu*) or the residual (kBiasDropoutResidual) by TMA into two regions during the mainloop
  constexpr bool kLoadsPre =
      kEpi == GemmEpi::kDGelu || kEpi == GemmEpi::kDGeluStoreGelu || kEpi == GemmEpi::kBiasDropoutResidual;
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
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (threadIdx.x == 0) {
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
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int m0 = tile_m0(tile), n0 = tile_n0(tile);
        for (int kb = 0; kb < kKBlocks; ++kb) {
          sm90::mbar_wait(empty(stage), phase ^ 1u);
          sm90::mbar_arrive_expect_tx(full(stage), G::kABytes + G::kBBytes);
          sm90::tma_load_2d(s_a + stage * G::kABytes, &p.a, full(stage), kb * G::kBlockK, m0);
          sm90::tma_load_2d(s_b + stage * G::kBBytes, &p.b, full(stage), kb * G::kBlockK, n0);
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1u;
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
  for (int j = c, tile = blockIdx.x + c * gridDim.x; tile < tiles; j += 2, tile += 2 * gridDim.x) {
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
      const uint32_t a = s_a + stage * G::kABytes, b = s_b + stage * G::kBBytes;
#pragma unroll
      for (int k = 0; k < G::kBlockK / 16; ++k) {
        const uint64_t db = sm90::wgmma_desc_k128(b + 32 * k);
        sm90::wgmma_m64n128k16<T>(acc0, sm90::wgmma_desc_k128(a + 32 * k), db);
        sm90::wgmma_m64n128k16<T>(acc1, sm90::wgmma_desc_k128(a + 64 * 128 + 32 * k), db);
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
    if (tile + gridDim.x < tiles) sm90::turn_give(1 - c);  // the other warpgroup has a next tile
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
    // GELU(src) -> dst, chunk by chunk (src == dst: in place).
    auto gelu_pass = [&](uint32_t src, uint32_t dst) {
#pragma unroll 1
      for (int it = 0; it < 8; ++it) {
        const uint32_t o = chunk_off(it);
        const Vec<T, 8> h = vec_at(src + o);
        Vec<T, 8> g;
#pragma unroll
        for (int e = 0; e < 8; ++e) g.v[e] = from_f<T>(gelu<kGeluTanh>(to_f(h.v[e])));
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
    } else if constexpr (kEpi == GemmEpi::kBiasGelu) {
      // h0 -> region 0, GELU(h0) -> 1; h1 -> 2, GELU(h1) -> 0 once h0's stores have read it.
      regions_free();
      stage_half(acc0, region(0));
      gelu_pass(region(0), region(1));
      publish();
      if (t == 0) {
        store_half(&p.out, region(0), n0, m0);
        store_half(&p.gelu, region(1), n0, m0);
      }
      stage_half(acc1, region(2));
      if (t == 0) sm90::tma_store_wait_read<1>();
      sm90::warpgroup_sync(c);
      gelu_pass(region(2), region(0));
      publish();
      if (t == 0) {
        store_half(&p.out, region(2), n0, m0 + 64);
        store_half(&p.gelu, region(0), n0, m0 + 64);
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
          for (int e = 0; e < 8; ++e) {
            const float x = to_f(h.v[e]);
            d.v[e] = from_f<T>(to_f(v.v[e]) * gelu_grad<kGeluTanh>(x));
            if constexpr (kG) g.v[e] = from_f<T>(gelu<kGeluTanh>(x));
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

// ---------------- bias_dropout_residual_fwd.cuh ----------------
// bias_dropout_residual_fwd: out = resid + dropout(x + bias), elementwise over [rows, kCols]
// with 16-byte vectors and a grid-stride loop. Pre-LN's final residual add after the FFN.

namespace dskc {

struct BiasDropoutResidualParams {
  const T* x;      // [rows, kCols] linear-layer output (no bias yet)
  const T* bias;   // [kCols]
  const T* resid;  // [rows, kCols]
  T* out;          // [rows, kCols]
  int rows;
  DropoutArgs rng;
};

template <int kCols, bool kDropout, uint32_t kStream>
__device__ __forceinline__ void bias_dropout_residual_fwd_impl(const BiasDropoutResidualParams& p) {
  constexpr int kV = VecWidth<T, kCols>::value;
  for_each_vec<T, kCols>(p.rows, [&](size_t e) {
    const int c = static_cast<int>(e % kCols);
    float x[kV], b[kV], r[kV];
    load_f<T, kV>(p.x + e, x);
    load_f<T, kV>(p.bias + c, b);
    load_f<T, kV>(p.resid + e, r);
    if constexpr (kDropout) {
      bool keep[kV];
      dropout_keep_vec<kV>(p.rng, kStream, e, kHiddenDropoutThreshold, keep);
#pragma unroll
      for (int i = 0; i < kV; ++i) x[i] = r[i] + (keep[i] ? (x[i] + b[i]) * kHiddenDropoutScale : 0.f);
    } else {
#pragma unroll
      for (int i = 0; i < kV; ++i) x[i] = r[i] + x[i] + b[i];
    }
    store_f<T, kV>(p.out + e, x);
  });
}

}  // namespace dskc

// ---------------- dropout_bias_grad.cuh ----------------
// dropout_bias_grad: backward of y = dropout(x + bias): dx = mask·dy/(1−p) (regenerated from
// the counter RNG; written over dy's copy in dx) and per-block partial bias gradients Σ dx.
// Without dropout (the QKV bias) it only sums columns and writes nothing else. fp16/bf16 layers,
// whose bias gradients cuBLASLt sums, run only the masking: the elementwise dropout_bwd_impl below.

namespace dskc {

struct DropoutBiasGradParams {
  const T* dy;  // [rows, kCols]
  T* dx;        // [rows, kCols] masked gradient (dropout variants only; may alias dy)
  float* part;  // [grad_parts(rows), kCols]
  int rows;
  DropoutArgs rng;
};

template <int kCols, bool kDropout, uint32_t kStream>
__device__ __forceinline__ void dropout_bias_grad_impl(const DropoutBiasGradParams& p) {
  using R = RowTile<kCols>;
  constexpr int kV = R::kV, kPer = R::kPer;
  float acc[kPer][kV];
#pragma unroll
  for (int k = 0; k < kPer; ++k)
#pragma unroll
    for (int i = 0; i < kV; ++i) acc[k][i] = 0.f;
  const int row0 = blockIdx.x * kGradRowsPerBlock;
  const int row_end = min(row0 + kGradRowsPerBlock, p.rows);
  for (int row = row0; row < row_end; ++row) {
    const size_t base = static_cast<size_t>(row) * kCols;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = R::col(k);
      if (c < kCols) {
        float d[kV];
        load_f<T, kV>(p.dy + base + c, d);
        if constexpr (kDropout) {
          bool keep[kV];
          dropout_keep_vec<kV>(p.rng, kStream, base + c, kHiddenDropoutThreshold, keep);
#pragma unroll
          for (int i = 0; i < kV; ++i) d[i] = keep[i] ? d[i] * kHiddenDropoutScale : 0.f;
          store_f<T, kV>(p.dx + base + c, d);
#pragma unroll
          for (int i = 0; i < kV; ++i) d[i] = round_to<T>(d[i]);
        }
#pragma unroll
        for (int i = 0; i < kV; ++i) acc[k][i] += d[i];
      }
    }
  }
  float* part = p.part + static_cast<size_t>(blockIdx.x) * kCols;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = R::col(k);
    if (c < kCols) {
#pragma unroll
      for (int i = 0; i < kV; ++i) part[c + i] = acc[k][i];
    }
  }
}

// dropout_bwd: the masking alone (dropout_bias_grad_impl's dx, without the bias partials), as an
// elementwise pass: 16-byte vectors, a grid-stride loop over the whole tensor, so each thread has
// one load in flight per vector instead of eight rows of a tile one after another.
template <int kCols, uint32_t kStream>
__device__ __forceinline__ void dropout_bwd_impl(const DropoutBiasGradParams& p) {
  constexpr int kV = VecWidth<T, kCols>::value;
  for_each_vec<T, kCols>(p.rows, [&](size_t e) {
    float d[kV];
    load_f<T, kV>(p.dy + e, d);
    bool keep[kV];
    dropout_keep_vec<kV>(p.rng, kStream, e, kHiddenDropoutThreshold, keep);
#pragma unroll
    for (int i = 0; i < kV; ++i) d[i] = keep[i] ? d[i] * kHiddenDropoutScale : 0.f;
    store_f<T, kV>(p.dx + e, d);
  });
}

}  // namespace dskc

// ---------------- bias_gelu_bwd.cuh ----------------
// bias_gelu_bwd: dh = dg · GELU'(h) written over dg, plus per-block partial sums of dh (the
// inter_b gradient; param_grad_reduce finishes it) unless the weight-gradient GEMM's BGRADB
// epilogue sums it (kPartials false). h is the saved pre-activation (x·Wᵀ + b).
// kStoreGelu (gelu_checkpoint): also writes g = GELU(h), the output_w gradient's operand that
// forward did not keep, from the h values this pass reads anyway (no separate recompute pass).

namespace dskc {

struct BiasGeluBwdParams {
  T* dg;        // [rows, kCols] in: d(GELU output), out: d(pre-activation)
  const T* h;   // [rows, kCols] saved pre-activation
  T* g;         // [rows, kCols] GELU(h) (kStoreGelu)
  float* part;  // [grad_parts(rows), kCols]
  int rows;
};

// One vector of kV elements at element e: dh = dg · GELU'(h) over dg (returned in d, unrounded;
// stored rounded) and with kStoreGelu g = GELU(h).
template <int kV, bool kStoreGelu>
__device__ __forceinline__ void gelu_bwd_vec(const BiasGeluBwdParams& p, size_t e, float (&d)[kV]) {
  float h[kV];
  load_f<T, kV>(p.dg + e, d);
  load_f<T, kV>(p.h + e, h);
  if constexpr (kStoreGelu) {
    float g[kV];
#pragma unroll
    for (int i = 0; i < kV; ++i) g[i] = gelu<kGeluTanh>(h[i]);
    store_f<T, kV>(p.g + e, g);
  }
#pragma unroll
  for (int i = 0; i < kV; ++i) d[i] *= gelu_grad<kGeluTanh>(h[i]);
  store_f<T, kV>(p.dg + e, d);
}

template <int kCols, bool kPartials = true, bool kStoreGelu = false>
__device__ __forceinline__ void bias_gelu_bwd_impl(const BiasGeluBwdParams& p) {
  using R = RowTile<kCols>;
  constexpr int kV = R::kV, kPer = R::kPer;
  float acc[kPer][kV];
#pragma unroll
  for (int k = 0; k < kPer; ++k)
#pragma unroll
    for (int i = 0; i < kV; ++i) acc[k][i] = 0.f;
  const int row0 = blockIdx.x * kGradRowsPerBlock;
  const int row_end = min(row0 + kGradRowsPerBlock, p.rows);
  for (int row = row0; row < row_end; ++row) {
    const size_t base = static_cast<size_t>(row) * kCols;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = R::col(k);
      if (c < kCols) {
        float d[kV];
        gelu_bwd_vec<kV, kStoreGelu>(p, base + c, d);
#pragma unroll
        for (int i = 0; i < kV; ++i) acc[k][i] += round_to<T>(d[i]);  // dh as stored
      }
    }
  }
  if constexpr (!kPartials) return;
  float* part = p.part + static_cast<size_t>(blockIdx.x) * kCols;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = R::col(k);
    if (c < kCols) {
#pragma unroll
      for (int i = 0; i < kV; ++i) part[c + i] = acc[k][i];
    }
  }
}

// bias_gelu_bwd_elem: the same dh (and kStoreGelu's g) without the bias partials, for the layers
// whose inter_b gradient cuBLASLt sums: an elementwise pass over 16-byte vectors in a grid-stride
// loop (one vector per thread at BERT-Large), like dropout_bwd_impl. The tiles above walk each
// block's eight rows one after another (the loads of a row wait behind the previous row's GELU′
// arithmetic and stores), which only the partial sums need.
template <int kCols, bool kStoreGelu = false>
__device__ __forceinline__ void bias_gelu_bwd_elem_impl(const BiasGeluBwdParams& p) {
  constexpr int kV = VecWidth<T, kCols>::value;
  for_each_vec<T, kCols>(p.rows, [&](size_t e) {
    float d[kV];
    gelu_bwd_vec<kV, kStoreGelu>(p, e, d);
  });
}

}  // namespace dskc

// ---------------- layernorm_bwd.cuh ----------------
// layernorm_bwd: dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = dy·gamma, for rows of kCols, plus
// partial dgamma = Σ dy·x̂ and dbeta = Σ dy per block (param_grad_reduce finishes them).
// x̂ comes from the saved input and mean/rstd, or — with normalize_invertible — from the saved
// output: x̂ = (y − beta)/gamma. The residual variant adds a gradient to dy before (Post-LN)
// or to dx after (Pre-LN) so the residual branch costs no extra pass. kDropOut (the attention
// LayerNorm of fp16/bf16 layers with hidden dropout) also writes the gradient through the dropout
// before it, dx_drop = Z·round(dx)/(1−p) with Z regenerated from stream kDropStream: what the
// standalone dropout_bias_grad pass would write next, bit for bit, without reading dx back.

namespace dskc {

enum LnResidual { kLnNoResidual = 0, kLnAddToDy = 1, kLnAddToDx = 2 };

struct LayerNormBwdParams {
  const T* dy;        // [rows, kCols]
  const T* residual;  // [rows, kCols] added to dy or dx (per LnResidual), else unused
  const T* xy;        // [rows, kCols] LayerNorm input x, or output y when invertible
  const T* gamma;     // [kCols]
  const T* beta;      // [kCols]
  const float* mean;  // [rows] (unused when invertible)
  const float* rstd;  // [rows]
  T* dx;              // [rows, kCols] (may alias dy)
  float* part;        // [grad_parts(rows), 2, kCols]: dgamma then dbeta partials
  int rows;
  T* dx_drop;         // [rows, kCols] dropout backward of dx (kDropOut only; may alias residual)
  DropoutArgs rng;    // (kDropOut only)
};

// Stores kV elements of dx at element e and, with kDropOut, the gradient through the dropout
// before the LayerNorm: dx_drop = Z·round(dx)/(1−p), Z regenerated from stream kDropStream.
template <int kV, bool kDropOut, uint32_t kDropStream>
__device__ __forceinline__ void store_dx(const LayerNormBwdParams& p, size_t e, float (&dx)[kV]) {
  store_f<T, kV>(p.dx + e, dx);
  if constexpr (kDropOut) {
    bool keep[kV];
    dropout_keep_vec<kV>(p.rng, kDropStream, e, kHiddenDropoutThreshold, keep);
#pragma unroll
    for (int i = 0; i < kV; ++i) dx[i] = keep[i] ? round_to<T>(dx[i]) * kHiddenDropoutScale : 0.f;
    store_f<T, kV>(p.dx_drop + e, dx);
  }
}

// dst[0..N) = v (first) or += v, in 16-byte pieces where N allows.
template <int N>
__device__ __forceinline__ void acc_add(float* dst, const float (&v)[N], bool first) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      float4* d = reinterpret_cast<float4*>(dst + i);
      float4 a = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
      if (!first) {
        const float4 o = *d;
        a = make_float4(o.x + a.x, o.y + a.y, o.z + a.z, o.w + a.w);
      }
      *d = a;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) dst[i] = first ? v[i] : dst[i] + v[i];
  }
}

// Threads of a layernorm_bwd block. Rows of at most 128 vectors (LayerNormShape's warp rows) with
// kLnBwdWarpRows: four warps, two rows each (the block's kGradRowsPerBlock rows, so the partials
// and param_grad_reduce are the same); else RowTile's block per row.
template <int kCols>
struct LayerNormBwdShape {
  static constexpr bool kWarpRows = kLnBwdWarpRows && LayerNormShape<kCols>::kWarpRows;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarpRows ? 32 * kWarps : RowTile<kCols>::kThreads;
};

// A row per warp: each lane holds kPer 16-byte vectors of the row's dy, x/y (and residual), all
// loaded at once and kept packed until used; the two row sums are warp shuffles (no block barrier
// per row). dgamma / dbeta: each warp adds its rows' dy·x̂ and dy into its own slice of shared
// memory, then the block sums the four slices in a fixed order into its partial row (deterministic,
// like the block-per-row form, but not bitwise equal to it: the sums are grouped differently).
template <int kCols, bool kInvertible, int kResidual, bool kDropOut, uint32_t kDropStream>
__device__ __forceinline__ void layernorm_bwd_warp_rows(const LayerNormBwdParams& p) {
  const int block = blockIdx.x;
  using S = LayerNormShape<kCols>;
  using B = LayerNormBwdShape<kCols>;
  constexpr int kV = S::kV, kPer = S::kPer, kWarps = B::kWarps;
  constexpr int kRowsPerWarp = kGradRowsPerBlock / kWarps;
  static_assert(kGradRowsPerBlock % kWarps == 0, "whole rows per warp");
  using V = Vec<T, kV>;
  __shared__ alignas(16) float acc[kWarps][2][kCols];  // per warp: dgamma, dbeta over its rows
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  auto col = [&](int k) { return (lane + k * 32) * kV; };
  V gam[kPer], bet[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k)
    if (col(k) < kCols) {
      gam[k] = *reinterpret_cast<const V*>(p.gamma + col(k));
      if constexpr (kInvertible) bet[k] = *reinterpret_cast<const V*>(p.beta + col(k));
    }
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int row = block * kGradRowsPerBlock + warp * kRowsPerWarp + r;
    if (row >= p.rows) {  // past the last row: the slice still needs zeros
      if (r == 0)
#pragma unroll
        for (int k = 0; k < kPer; ++k)
          if (col(k) < kCols)
#pragma unroll
            for (int i = 0; i < kV; ++i) acc[warp][0][col(k) + i] = acc[warp][1][col(k) + i] = 0.f;
      continue;
    }
    const size_t base = static_cast<size_t>(row) * kCols;
    V dyv[kPer], xv[kPer], rv[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k)
      if (col(k) < kCols) {
        dyv[k] = *reinterpret_cast<const V*>(p.dy + base + col(k));
        xv[k] = *reinterpret_cast<const V*>(p.xy + base + col(k));
        if constexpr (kResidual != kLnNoResidual) rv[k] = *reinterpret_cast<const V*>(p.residual + base + col(k));
      }
    const float rstd = p.rstd[row];
    float mean = 0.f;
    if constexpr (!kInvertible) mean = p.mean[row];
    // dy (with a kLnAddToDy residual) and x̂ of element i of vector k.
    auto dy_at = [&](int k, int i) {
      float d = to_f(dyv[k].v[i]);
      if constexpr (kResidual == kLnAddToDy) d += to_f(rv[k].v[i]);
      return d;
    };
    auto xh_at = [&](int k, int i) {
      if constexpr (kInvertible) return (to_f(xv[k].v[i]) - to_f(bet[k].v[i])) / to_f(gam[k].v[i]);
      else return (to_f(xv[k].v[i]) - mean) * rstd;
    };
    float s1 = 0.f, s2 = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k)
      if (col(k) < kCols) {
        float pg[kV], dd[kV];
#pragma unroll
        for (int i = 0; i < kV; ++i) {
          dd[i] = dy_at(k, i);
          const float xh = xh_at(k, i), g = dd[i] * to_f(gam[k].v[i]);
          s1 += g;
          s2 += g * xh;
          pg[i] = dd[i] * xh;
        }
        acc_add<kV>(&acc[warp][0][col(k)], pg, r == 0);
        acc_add<kV>(&acc[warp][1][col(k)], dd, r == 0);
      }
    s1 = warp_sum(s1);
    s2 = warp_sum(s2);
    const float mg = s1 * (1.f / kCols), mgx = s2 * (1.f / kCols);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = col(k);
      if (c < kCols) {
        float dx[kV];
#pragma unroll
        for (int i = 0; i < kV; ++i) {
          dx[i] = rstd * (dy_at(k, i) * to_f(gam[k].v[i]) - mg - xh_at(k, i) * mgx);
          if constexpr (kResidual == kLnAddToDx) dx[i] += to_f(rv[k].v[i]);
        }
        store_dx<kV, kDropOut, kDropStream>(p, base + c, dx);
      }
    }
  }
  __syncthreads();
  float* part = p.part + static_cast<size_t>(block) * 2 * kCols;
  // dgamma then dbeta columns, four at a time where the row width allows (16-byte aligned).
  constexpr int kStep = kCols % 4 == 0 ? 4 : 1;
  using F = Vec<float, kStep>;
  for (int c = kStep * threadIdx.x; c < 2 * kCols; c += kStep * B::kThreads) {
    const float* a = &acc[0][0][0] + c;
    F v = *reinterpret_cast<const F*>(a);
#pragma unroll
    for (int w = 1; w < kWarps; ++w) {
      const F o = *reinterpret_cast<const F*>(a + w * 2 * kCols);
#pragma unroll
      for (int i = 0; i < kStep; ++i) v.v[i] += o.v[i];
    }
    *reinterpret_cast<F*>(part + c) = v;
  }
}

template <int kCols, bool kInvertible, int kResidual, bool kDropOut, uint32_t kDropStream>
__device__ __forceinline__ void layernorm_bwd_block_rows(const LayerNormBwdParams& p) {
  using R = RowTile<kCols>;
  constexpr int kV = R::kV, kPer = R::kPer, kThreads = R::kThreads;
  constexpr int kBytes = kV * static_cast<int>(sizeof(T));
  constexpr int kIn = kResidual == kLnNoResidual ? 2 : 3;  // dy, x/y (, residual)
  constexpr bool kStage = (kBytes == 4 || kBytes == 8 || kBytes == 16) && 2 * kIn * kPer * kThreads * kBytes <= 24576;
  using V = Vec<T, kV>;
  __shared__ V stage[kStage ? 2 : 1][kIn][kPer][kStage ? kThreads : 1];
  __shared__ float2 scratch[kThreads / 32];
  float gam[kPer][kV], bet[kPer][kV], dg[kPer][kV], db[kPer][kV];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = R::col(k);
#pragma unroll
    for (int i = 0; i < kV; ++i) dg[k][i] = db[k][i] = 0.f;
    if (c < kCols) {
      load_f<T, kV>(p.gamma + c, gam[k]);
      if constexpr (kInvertible) load_f<T, kV>(p.beta + c, bet[k]);
    }
  }
  const int row0 = blockIdx.x * kGradRowsPerBlock;
  const int row_end = min(row0 + kGradRowsPerBlock, p.rows);
  // The row's input `which` (0 dy, 1 x/y, 2 residual) at column c, from the stage or memory.
  const T* const src[3] = {p.dy, p.xy, p.residual};
  auto stage_row = [&](int row, int buf) {
    const size_t base = static_cast<size_t>(row) * kCols;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = R::col(k);
      if (c < kCols)
#pragma unroll
        for (int w = 0; w < kIn; ++w) cp_async<kBytes>(&stage[buf][w][k][threadIdx.x], src[w] + base + c);
    }
    cp_async_commit();
  };
  auto input = [&](int buf, int which, int k, size_t base, int c, float (&out)[kV]) {
    if constexpr (kStage) {
      const V v = stage[buf][which][k][threadIdx.x];
#pragma unroll
      for (int i = 0; i < kV; ++i) out[i] = to_f(v.v[i]);
    } else {
      load_f<T, kV>(src[which] + base + c, out);
    }
  };
  if (row0 >= row_end) return;
  if constexpr (kStage) stage_row(row0, 0);
  float rstd_next = p.rstd[row0], mean_next = 0.f;
  if constexpr (!kInvertible) mean_next = p.mean[row0];
  for (int row = row0, it = 0; row < row_end; ++row, ++it) {
    const int buf = it & 1;
    const size_t base = static_cast<size_t>(row) * kCols;
    const float rstd = rstd_next, mean = mean_next;
    if (row + 1 < row_end) {
      rstd_next = p.rstd[row + 1];
      if constexpr (!kInvertible) mean_next = p.mean[row + 1];
    }
    if constexpr (kStage) {
      if (row + 1 < row_end) {
        stage_row(row + 1, buf ^ 1);
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
    }
    float dy[kPer][kV], xh[kPer][kV];
    float s1 = 0.f, s2 = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = R::col(k);
      if (c < kCols) {
        input(buf, 0, k, base, c, dy[k]);
        if constexpr (kResidual == kLnAddToDy) {
          float r[kV];
          input(buf, 2, k, base, c, r);
#pragma unroll
          for (int i = 0; i < kV; ++i) dy[k][i] += r[i];
        }
        input(buf, 1, k, base, c, xh[k]);
#pragma unroll
        for (int i = 0; i < kV; ++i) {
          if constexpr (kInvertible) {
            xh[k][i] = (xh[k][i] - bet[k][i]) / gam[k][i];
          } else {
            xh[k][i] = (xh[k][i] - mean) * rstd;
          }
          const float g = dy[k][i] * gam[k][i];
          s1 += g;
          s2 += g * xh[k][i];
          dg[k][i] += dy[k][i] * xh[k][i];
          db[k][i] += dy[k][i];
        }
      }
    }
    const float2 sums = block_sum2<kThreads>(s1, s2, scratch);
    const float mg = sums.x * (1.f / kCols), mgx = sums.y * (1.f / kCols);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = R::col(k);
      if (c < kCols) {
        float dx[kV];
#pragma unroll
        for (int i = 0; i < kV; ++i) dx[i] = rstd * (dy[k][i] * gam[k][i] - mg - xh[k][i] * mgx);
        if constexpr (kResidual == kLnAddToDx) {
          float r[kV];
          input(buf, 2, k, base, c, r);
#pragma unroll
          for (int i = 0; i < kV; ++i) dx[i] += r[i];
        }
        store_dx<kV, kDropOut, kDropStream>(p, base + c, dx);
      }
    }
  }
  float* part = p.part + static_cast<size_t>(blockIdx.x) * 2 * kCols;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = R::col(k);
    if (c < kCols) {
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        part[c + i] = dg[k][i];
        part[kCols + c + i] = db[k][i];
      }
    }
  }
}

template <int kCols, bool kInvertible, int kResidual, bool kDropOut = false, uint32_t kDropStream = 0>
__device__ __forceinline__ void layernorm_bwd_impl(const LayerNormBwdParams& p) {
  if constexpr (LayerNormBwdShape<kCols>::kWarpRows)
    layernorm_bwd_warp_rows<kCols, kInvertible, kResidual, kDropOut, kDropStream>(p);
  else
    layernorm_bwd_block_rows<kCols, kInvertible, kResidual, kDropOut, kDropStream>(p);
}

}  // namespace dskc

// ---------------- attn_flash_bwd_dot.cuh ----------------
// attn_flash_bwd_dot: D = rowsum(dO ⊙ O) per (batch, head, query row), fp32 [B·heads·S], the
// softmax-backward term the fused attention backward needs: with P_drop = P ⊙ Z (Z the scaled
// dropout mask) and O = P_drop·V, Σ_j P_ij·dP_ij = Σ_j P_ij Z_ij (dO_i·V_j) = dO_i·O_i.
// 8 lanes per row, each summing d/8 adjacent elements (a 128-byte row per 8 lanes at d = 64);
// 16 rows per block; grid (ceil(S / 16), B·heads).
// With kDqAtomic (stochastic_mode) it also zeroes what attn_flash_bwd_dkdvdq accumulates into: each
// lane the fp32 dQ accumulator elements at the [B·S, H] positions of the O and dO elements it reads,
// and block (0, bh) the head's ticket.

namespace dskc {

struct AttnFlashDotParams {
  const T* ctx;   // [B*S, H] O (forward output of attention)
  const T* dctx;  // [B*S, H] dO
  float* dot;     // [B*heads*S] out: D
  float* dq_acc;         // [B*S, H] fp32 out: zeroed (kDqAtomic only; else unused)
  uint32_t* dq_tickets;  // [B*heads] out: zeroed (kDqAtomic only; else unused)
  int batch;
  int seq;
};

// between(): work of every thread of the grid that needs nothing of the rows, run while the row
// loads are in flight (attn_flash_bwd_dot_bits.cuh: the attention keep bits).
template <typename E, FlashDq kDq, typename Between>
__device__ __forceinline__ void attn_flash_bwd_dot_impl(const AttnFlashDotParams& p, Between&& between) {
  static_assert(sizeof(E) == 2 && kHeadDim % 16 == 0, "fused attention runs on fp16/bf16, head dim % 16 == 0");
  using F = FlashDotTile;
  constexpr int kPer = kHeadDim / F::kLanesPerRow;  // even: kHeadDim % 16 == 0
  const int i = blockIdx.x * F::kRows + threadIdx.x / F::kLanesPerRow;
  const int part = threadIdx.x % F::kLanesPerRow;
  const int bh = blockIdx.y, b = bh / kHeads, h = bh % kHeads;
  const size_t off = (static_cast<size_t>(b) * p.seq + i) * kHidden + h * kHeadDim + part * kPer;
  E ov[kPer], dv[kPer];
  if (i < p.seq) {
    const E* o = reinterpret_cast<const E*>(p.ctx) + off;
    const E* d = reinterpret_cast<const E*>(p.dctx) + off;
#pragma unroll
    for (int c = 0; c < kPer; ++c) {
      ov[c] = o[c];
      dv[c] = d[c];
    }
  }
  between();
  float acc = 0.f;
  if (i < p.seq) {
#pragma unroll
    for (int c = 0; c < kPer; c += 2) acc = flash::dot2_acc(acc, to_f(ov[c]), to_f(dv[c]), to_f(ov[c + 1]), to_f(dv[c + 1]));
    if constexpr (kDq == kDqAtomic) {
      if constexpr (kPer % 4 == 0) {
#pragma unroll
        for (int c = 0; c < kPer; c += 4)
          *reinterpret_cast<float4*>(p.dq_acc + off + c) = make_float4(0.f, 0.f, 0.f, 0.f);
      } else {
#pragma unroll
        for (int c = 0; c < kPer; c += 2) *reinterpret_cast<float2*>(p.dq_acc + off + c) = make_float2(0.f, 0.f);
      }
    }
  }
  if constexpr (kDq == kDqAtomic)
    if (blockIdx.x == 0 && threadIdx.x == 0) p.dq_tickets[bh] = 0u;
  // Every lane takes part in the shuffles (rows past the end contribute nothing).
#pragma unroll
  for (int s = 1; s < F::kLanesPerRow; s <<= 1) acc += __shfl_xor_sync(0xffffffffu, acc, s);
  if (i < p.seq && part == 0) p.dot[static_cast<size_t>(bh) * p.seq + i] = acc;
}

template <typename E, FlashDq kDq = kDqPerQueryTile>
__device__ __forceinline__ void attn_flash_bwd_dot_impl(const AttnFlashDotParams& p) {
  attn_flash_bwd_dot_impl<E, kDq>(p, [] {});
}

}  // namespace dskc

// ---------------- attn_flash_bwd_wgmma.cuh ----------------
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

namespace dskc {

// Shapes and the shared-memory map (byte offsets from a 1024-aligned base); compiler/plan.cpp mirrors
// kThreads, kKeys and smem_bytes (flash_wg_bwd_* there; static_asserts in the generated source).
template <int kWG, bool kDqFused = false, int kCluster = 1>
struct FlashWgBwdTile {
  static_assert(kWG == 1 || kWG == 2, "one or two math warpgroups");
  static_assert(kCluster == 1 || (kCluster == 2 && kWG == 1 && kDqFused),
                "clusters of two one-warpgroup blocks exchange dQ shares (kDqFused)");
  static constexpr int kThreads = 128 * kWG;
  static constexpr int kKeys = 64 * kWG;  // keys per block
  static constexpr int kQueries = 64;     // queries per stage
  static constexpr int kStages = 3;
  static constexpr int kTileBytes = 64 * 128;  // a 64 x 64 16-bit tile, 128-byte rows
  static constexpr int kKV = 0;                                    // K, V of warpgroup c: tiles 2c, 2c + 1
  static constexpr int kStage0 = kKV + 2 * kWG * kTileBytes;       // stage s: Q, dO tiles
  static constexpr int kDs0 = kStage0 + kStages * 2 * kTileBytes;  // dSᵀ regions: 2 per warpgroup
  // Per stage, the query tile's L, D (fp32, as stored) and keep words (per query, the words of the
  // warpgroups' keys: 2 per warpgroup), copied by the refilling warp with cp.async (zero past S).
  static constexpr int kRowVals = 2 + 2 * kWG;                          // 4-byte values per query
  static constexpr int kRows0 = kDs0 + 2 * kWG * kTileBytes;
  static constexpr int kRowBytes = kRowVals * kQueries * 4;              // per stage
  // kDqFused with two key halves: the 64 x 64 fp32 dQ share handed over by the other half (two
  // warpgroups: one slot per warpgroup; a cluster of two blocks: the slot the peer block writes).
  static constexpr int kXchg0 = kRows0 + kStages * kRowBytes;
  static constexpr int kXchgBytes = !kDqFused ? 0 : kWG == 2 ? 2 * 64 * 64 * 4 : kCluster == 2 ? 64 * 64 * 4 : 0;
  static constexpr int kMask0 = kXchg0 + kXchgBytes;               // the block's key mask (fp32, × log2 e)
  static constexpr int kCount0 = kMask0 + kKeys * 4;               // per stage: warps done with it (mod 4·kWG)
  static constexpr int kBars0 = kCount0 + (4 * kStages + 7) / 8 * 8;  // mbarriers: 8-byte aligned
  static constexpr int kBars = kStages + 1;  // full[s], kv
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
  const T* mask;             // [B, S] additive
  const float* lse;          // [B*heads*S] forward logsumexp L
  const float* dot;          // [B*heads*S] D = rowsum(dO ⊙ O) (unless FlashWgBwdTile::kDotFused)
  const uint32_t* bits;      // [B*heads, S, ceil(S/32)] dropout keep bits (kDropout only)
  T* dqkv;                   // [B*S, 3H] out: dK | dV columns of each head
  int batch;
  int seq;
};

template <typename E, bool kDropout, int kWG, bool kDqFused = false, int kCluster = 1>
__device__ __forceinline__ void attn_flash_bwd_wgmma_impl(const AttnFlashBwdWgParams& p) {
#if DSKC_SM90A
  static_assert(sizeof(E) == 2, "wgmma attention runs on fp16/bf16 only");
  static_assert(kHeadDim == 64, "the wgmma attention backward is built for head dim 64 (128-byte tile rows)");
  using F = FlashWgBwdTile<kWG, kDqFused, kCluster>;
  extern __shared__ unsigned char attn_wg_smem[];
  const uint32_t base = (sm90::smem_u32(attn_wg_smem) + 1023u) & ~1023u;
  unsigned char* const smem_ptr = attn_wg_smem - sm90::smem_u32(attn_wg_smem);  // + a shared address = its pointer
  auto full = [&](int s) { return base + F::kBars0 + 8u * s; };
  const uint32_t kv_bar = base + F::kBars0 + 8u * F::kStages;
  float* const mask_s = reinterpret_cast<float*>(smem_ptr + base + F::kMask0);
  int* const done_s = reinterpret_cast<int*>(smem_ptr + base + F::kCount0);

  const int seq = p.seq;
  const int j0 = blockIdx.x * F::kKeys;
  const int bh = blockIdx.y, b = bh / kHeads, h = bh % kHeads;
  const int tiles = (seq + F::kQueries - 1) / F::kQueries;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // kDqFused: which of the two key halves of the sequence the warpgroup holds (its block's warpgroup
  // index, or its block's rank in the cluster); 0 where one warpgroup holds every key.
  const int part = kWG == 2 ? warp / 4 : kCluster == 2 ? static_cast<int>(blockIdx.x % 2) : 0;
  // Q and dO of query tile `it` into stage it % kStages (one thread); kDotFused: O too, into the dSᵀ
  // region of the step that walks tile `it` (step (it − part) mod tiles = (it + part) % tiles).
  auto load_stage = [&](int it) {
    const int s = it % F::kStages;
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
  auto load_rows = [&](int it) {
    const int s = it % F::kStages;
    const uint32_t dst = base + F::kRows0 + s * F::kRowBytes;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int q = lane + 32 * r, i = it * F::kQueries + q;
      const uint32_t bytes = i < seq ? 4u : 0u;
      const int ic = min(i, seq - 1);
      sm90::cp_async_4(dst + 4 * q, lse_g + ic, bytes);
      if constexpr (!F::kDotFused) sm90::cp_async_4(dst + 4 * (F::kQueries + q), dot_g + ic, bytes);
      if constexpr (kDropout)
#pragma unroll
        for (int x = 0; x < 2 * kWG; ++x)  // the words of keys j0 + 32x .. + 31
          sm90::cp_async_4(dst + 4 * ((2 + x) * F::kQueries + q),
                           bits_g + static_cast<size_t>(ic) * words + min(j0 / 32 + x, words - 1), bytes);
    }
    sm90::cp_async_mbar_arrive(full(s));
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < F::kStages; ++s) {
      sm90::mbar_init(full(s), 1 + 32);  // the TMA's expect_tx arrival + the 32 lanes' cp.async arrivals
      done_s[s] = 0;
    }
    sm90::mbar_init(kv_bar, 1);
    sm90::mbar_init_fence();
    sm90::tma_prefetch_descriptor(&p.qkv);
    sm90::tma_prefetch_descriptor(&p.dctx);
    if constexpr (F::kDotFused) sm90::tma_prefetch_descriptor(&p.ctx);
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

  // ---- math warpgroup c: keys j0 + 64c + 16w + g (+8) ----
  const int c = warp / 4, w = warp % 4, g = lane / 4, t = lane % 4, tid = threadIdx.x % 128;
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

  for (int it = 0; it < tiles; ++it) {
    const int tq = kDqFused ? (it + part) % tiles : it;  // the query tile of this step
    const int i0 = tq * F::kQueries, stage = tq % F::kStages;
    const uint32_t phase = (tq / F::kStages) & 1u;
    const uint32_t q_tile = base + F::kStage0 + 2 * stage * F::kTileBytes, do_tile = q_tile + F::kTileBytes;
    sm90::mbar_wait(full(stage), phase);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      sm90::wgmma_m64n64k16_ss<E>(st, sm90::wgmma_desc_k128(k_tile + 32 * kk), sm90::wgmma_desc_k128(q_tile + 32 * kk), kk);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      sm90::wgmma_m64n64k16_ss<E>(dpt, sm90::wgmma_desc_k128(v_tile + 32 * kk), sm90::wgmma_desc_k128(do_tile + 32 * kk),
                                  kk);
    sm90::wgmma_commit();
    float* const rows_s = reinterpret_cast<float*>(smem_ptr + base + F::kRows0 + stage * F::kRowBytes);
    if constexpr (F::kDotFused) {
      // While the products run: the tile's D = rowsum(dO ⊙ O) into the stage's D slot, 8 lanes per query
      // row (lane x sums the row's 16-byte chunk x: attn_flash_bwd_dot's lanes, order and arithmetic),
      // from the O tile in this step's dSᵀ region and the dO tile (both 128B-swizzled). Rows past S are
      // zero in both (TMA fill), so D = 0 there as the copied value was.
      const uint32_t o_tile = base + F::kDs0 + (it & 1) * F::kTileBytes;
      float* const dot_w = rows_s + F::kQueries;
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
    }
    sm90::wgmma_wait<0>();  // this tile's Sᵀ, dPᵀ and the previous tile's dK/dV products
    sm90::fence_operands(st);
    sm90::fence_operands(dpt);
    sm90::fence_operands(dk);
    sm90::fence_operands(dv);
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
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float2 lj = *reinterpret_cast<const float2*>(lse_s + 8 * j);
      const float2 dj = *reinterpret_cast<const float2*>(dot_s + 8 * j);
      uint2 kj = make_uint2(0u, 0u);
      if constexpr (kDropout) kj = *reinterpret_cast<const uint2*>(keep_s + 8 * j);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float lq = (e & 1) ? lj.y : lj.x, dq = (e & 1) ? dj.y : dj.x;
        // P = 2^(Sᵀ·scale·log2 e + mask·log2 e − L·log2 e)
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
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      pa[kk][0] = flash::pack2<E>(st[8 * kk], st[8 * kk + 1]);
      pa[kk][1] = flash::pack2<E>(st[8 * kk + 2], st[8 * kk + 3]);
      pa[kk][2] = flash::pack2<E>(st[8 * kk + 4], st[8 * kk + 5]);
      pa[kk][3] = flash::pack2<E>(st[8 * kk + 6], st[8 * kk + 7]);
      sa[kk][0] = flash::pack2<E>(dpt[8 * kk], dpt[8 * kk + 1]);
      sa[kk][1] = flash::pack2<E>(dpt[8 * kk + 2], dpt[8 * kk + 3]);
      sa[kk][2] = flash::pack2<E>(dpt[8 * kk + 4], dpt[8 * kk + 5]);
      sa[kk][3] = flash::pack2<E>(dpt[8 * kk + 6], dpt[8 * kk + 7]);
    }
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) sm90::wgmma_m64n64k16_rs_tn<E>(dv, pa[kk], sm90::wgmma_desc_mn128(do_tile + 2048 * kk));
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) sm90::wgmma_m64n64k16_rs_tn<E>(dk, sa[kk], sm90::wgmma_desc_mn128(q_tile + 2048 * kk));
    sm90::wgmma_commit();

    // dSᵀ of the tile into region it % 2 (free once the store issued two tiles ago has read it), then
    // by TMA. (Per-warp 64 x 16 stores without the two warpgroup barriers measured no faster.)
    // kDqFused: no store; the region is the M-major A operand of the tile's dQ share dS·K instead.
    const uint32_t region = base + F::kDs0 + (2 * c + (it & 1)) * F::kTileBytes;
    if (!kDqFused && it >= 2) {
      if (tid == 0) sm90::tma_store_wait_read<1>();
      sm90::warpgroup_sync(c);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = 16 * w + ((lane >> 3) & 1) * 8 + (lane & 7);
      const int chunk = 2 * i + (lane >> 4);
      sm90::stmatrix_x4(region + row * 128 + ((chunk ^ (lane & 7)) << 4), sa[i]);
    }
    sm90::fence_proxy_async();
    sm90::warpgroup_sync(c);
    if constexpr (kDqFused) {
      // dq = dS·K over the warpgroup's 64 keys: A = dS read M-major from the region (row = key),
      // B = K read N-major (row = key).
      sm90::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        sm90::wgmma_m64n64k16_ss<E, 1>(dq, sm90::wgmma_desc_mn128(region + 2048 * kk),
                                       sm90::wgmma_desc_mn128(k_tile + 2048 * kk), kk);
      sm90::wgmma_commit();
    } else if (tid == 0) {
      sm90::tma_store_3d(&p.ds, region, i0, j0 + 64 * c, bh);
      sm90::tma_store_commit();
    }
  }
  sm90::wgmma_wait<0>();
  sm90::fence_operands(dk);
  sm90::fence_operands(dv);
  if constexpr (kDqFused) {
    sm90::fence_operands(dq);
    // The last tile's share: with two tiles each half's last tile is the other's first, whose share
    // is in this half's xchg slot once both have passed the barrier.
    if constexpr (kWG == 2 || kCluster == 2) {
      if (tiles == 2) {
        if constexpr (kCluster == 2) {
          sm90::cluster_arrive_release();
          sm90::cluster_wait();
        } else {
          __syncthreads();
        }
        const int slot = kWG == 2 ? 1 - c : 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float4 o = xchg[(slot * 8 + i) * 128 + tid];
          dq[4 * i] += o.x;
          dq[4 * i + 1] += o.y;
          dq[4 * i + 2] += o.z;
          dq[4 * i + 3] += o.w;
        }
      }
    }
    if (tiles == 2 || part == 0) {
      const int tq = (tiles - 1 + part) % tiles;
      const size_t ldq = 3 * static_cast<size_t>(kHidden);
      E* dq_g = reinterpret_cast<E*>(p.dqkv) + static_cast<size_t>(b) * seq * ldq + h * kHeadDim + 2 * t;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = tq * F::kQueries + 16 * w + g + 8 * r;
        if (i >= seq) continue;
        E* row = dq_g + static_cast<size_t>(i) * ldq;
#pragma unroll
        for (int n = 0; n < 8; ++n) flash::store2<E>(row + n * 8, dq[4 * n + 2 * r] * scale, dq[4 * n + 2 * r + 1] * scale);
      }
    }
  } else if (tid == 0) {
    sm90::tma_store_wait<0>();
  }

  // dK = scale·dSᵀ·Q, dV = (1/(1−p))·(P ⊙ Z)ᵀ·dO into grad_qkv (rows past S are not written).
  const float v_scale = kDropout ? kAttnDropoutScale : 1.f;
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
#endif
}

}  // namespace dskc

// ---------------- param_grad_reduce.cuh ----------------
// param_grad_reduce: sums float partials [parts, kArrays, kCols] over parts, in a fixed order,
// into kArrays parameter gradients of kCols elements (bias grads: 1 array; LayerNorm: gamma and
// beta). A block owns tiles of kTileCols = 16 columns of one array (grid-stride over the tiles,
// so any grid.x is correct; the runtime launches one block per tile): its 256 threads cover the
// tile with 16-byte loads where kCols % 4 == 0 (4 threads across, 64 partial rows at a time) or
// 4-byte loads otherwise (16 across, 16 rows), keep four loads in flight, and the per-thread sums
// are combined through shared memory by one thread per column in thread order. Every order is
// fixed by the thread mapping alone, so the result is bitwise reproducible run to run. (The
// earlier 32-column tiles with one load in flight per thread left BERT-Large's LayerNorm reduction
// at 64 blocks, latency-bound: ~0.02 ms for 8 MiB of partials.)

namespace dskc {

struct ParamGradReduceParams {
  const float* part;  // [parts, kArrays, kCols]
  T* out0;            // [kCols] first array's gradient
  T* out1;            // [kCols] second array's gradient (kArrays == 2)
  int parts;
};

struct ParamGradReduceTile {
  static constexpr int kThreads = 256;
  static constexpr int kTileCols = 16;
};

template <int kCols, int kArrays>
__device__ __forceinline__ void param_grad_reduce_impl(const ParamGradReduceParams& p) {
  using G = ParamGradReduceTile;
  constexpr int kV = kCols % 4 == 0 ? 4 : 1;  // floats per load
  constexpr int kLanes = G::kTileCols / kV;   // threads across a tile
  constexpr int kPar = G::kThreads / kLanes;  // partial rows read at a time
  constexpr size_t kStride = static_cast<size_t>(kArrays) * kCols;  // floats between partial rows
  __shared__ float acc[kPar][G::kTileCols + 1];
  const int tx = threadIdx.x % kLanes, ty = threadIdx.x / kLanes;
  const int array = blockIdx.y;
  for (int tile = blockIdx.x; tile * G::kTileCols < kCols; tile += gridDim.x) {
    const int col = tile * G::kTileCols + tx * kV;  // kV == 4: kCols % 4 == 0, so col + 3 < kCols too
    float s[kV];
#pragma unroll
    for (int v = 0; v < kV; ++v) s[v] = 0.f;
    if (col < kCols) {
      const float* src = p.part + static_cast<size_t>(array) * kCols + col;
      auto add = [&](int i) {
        float x[kV];
        load_f<float, kV>(src + static_cast<size_t>(i) * kStride, x);
#pragma unroll
        for (int v = 0; v < kV; ++v) s[v] += x[v];
      };
      int i = ty;
      for (; i + 3 * kPar < p.parts; i += 4 * kPar) {
        float x[4][kV];
#pragma unroll
        for (int u = 0; u < 4; ++u) load_f<float, kV>(src + static_cast<size_t>(i + u * kPar) * kStride, x[u]);
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
          for (int v = 0; v < kV; ++v) s[v] += x[u][v];
      }
      for (; i < p.parts; i += kPar) add(i);
    }
#pragma unroll
    for (int v = 0; v < kV; ++v) acc[ty][tx * kV + v] = s[v];
    __syncthreads();
    const int c = tile * G::kTileCols + threadIdx.x;
    if (threadIdx.x < G::kTileCols && c < kCols) {
      float t = 0.f;
      for (int j = 0; j < kPar; ++j) t += acc[j][threadIdx.x];
      T* out = array == 0 ? p.out0 : p.out1;
      out[c] = from_f<T>(t);
    }
    __syncthreads();
  }
}

}  // namespace dskc

// ================ kernels ================
using namespace dskc;

// layernorm_fwd_norm (forward pass): LayerNorm(norm_w, norm_b) of the layer input + the attention dropout keep mask (Philox) as bits for attn_flash_fwd, kept for backward (DSKC_ATTN_MASK=ln)
// launch: block 128, grid = ceil(B·S / rows per block) (a warp or a block per token row)
static_assert(LayerNormShape<kHidden>::kThreads == 128, "dskc plan and template disagree on layernorm_fwd_norm's block size");
static_assert(LayerNormShape<kHidden>::kRowsPerBlock == 4, "dskc plan and template disagree on layernorm_fwd_norm's rows per block");
static_assert(sizeof(LayerNormFwdBitsParams) == 88, "LayerNormFwdBitsParams must match runtime/kernel_params.h");
extern "C" __global__ void __launch_bounds__(128) layernorm_fwd_norm(const LayerNormFwdBitsParams p) {
  layernorm_fwd_bits_impl<kHidden>(p);
}

// attn_flash_fwd (forward pass): fused attention on warpgroup MMA (Q, K/V by TMA in 2 stages): Q·Kᵀ/√d + mask, online softmax, attention dropout (mask from the keep bits), ·V into the context + row logsumexp (P is not stored)
// launch: block 128, grid = (ceil(S / rows per tile), B·heads) (one tile of one head per block)
static_assert(FlashWgFwdTile<2>::kThreads == 128, "dskc plan and template disagree on attn_flash_fwd's block size");
static_assert(FlashWgFwdTile<2>::kRows == 64, "dskc plan and template disagree on attn_flash_fwd's rows per tile");
static_assert(FlashWgFwdTile<2>::smem_bytes == 44064, "dskc plan and template disagree on attn_flash_fwd's dynamic shared memory");
static_assert(sizeof(AttnFlashFwdWgParams) == 256, "AttnFlashFwdWgParams must match runtime/kernel_params.h");
extern "C" __global__ void __launch_bounds__(128, FlashWgFwdTile<2>::kMinBlocks) attn_flash_fwd(const __grid_constant__ AttnFlashFwdWgParams p) {
  attn_flash_fwd_wgmma_impl<T, kAttnDropoutOn, 2>(p);
}

// bias_dropout_residual_layernorm_fwd_attn (forward pass): attn_ob bias + hidden dropout + residual add + LayerNorm(attn_nw, attn_nb)
// launch: block 128, grid = ceil(B·S / rows per block) (a warp or a block per token row)
static_assert(LayerNormShape<kHidden>::kThreads == 128, "dskc plan and template disagree on bias_dropout_residual_layernorm_fwd_attn's block size");
static_assert(LayerNormShape<kHidden>::kRowsPerBlock == 4, "dskc plan and template disagree on bias_dropout_residual_layernorm_fwd_attn's rows per block");
static_assert(sizeof(BiasDropoutResidualLnParams) == 96, "BiasDropoutResidualLnParams must match runtime/kernel_params.h");
extern "C" __global__ void __launch_bounds__(128) bias_dropout_residual_layernorm_fwd_attn(const BiasDropoutResidualLnParams p) {
  bias_dropout_residual_layernorm_fwd_impl<kHidden, kHiddenDropoutOn, dskc_rng::kStreamAttnOutput>(p);
}

// gemm_inter_fwd (forward pass): intermediate GEMM ln_attn_out·inter_wᵀ (TMA + wgmma) + inter_b + GELU (erf) in the epilogue; writes h and GELU(h)
// launch: block 384, grid = min(SMs, output tiles) (persistent: each block walks tiles)
static_assert(GemmSm90Tile::kThreads == 384, "dskc plan and template disagree on gemm_inter_fwd's block size");
static_assert(GemmSm90Tile::kBlockM == 128, "dskc plan and template disagree on gemm_inter_fwd's rows per block");
static_assert(GemmSm90Tile::kBlockN == 128, "dskc plan and template disagree on gemm_inter_fwd's tile columns");
static_assert(GemmSm90Tile::smem_bytes(GemmEpi::kBiasGelu) == 230480, "dskc plan and template disagree on gemm_inter_fwd's dynamic shared memory");
static_assert(sizeof(GemmSm90Params) == 768, "GemmSm90Params must match runtime/kernel_params.h");
extern "C" __global__ void __launch_bounds__(384, 1) gemm_inter_fwd(const __grid_constant__ GemmSm90Params p) {
  gemm_sm90_impl<kInter, kHidden, GemmEpi::kBiasGelu>(p);
}

// bias_dropout_residual_fwd_ffn (forward pass): output_b bias + hidden dropout + residual add (layer output)
// launch: block 256, grid-stride over 16-byte vectors
static_assert(256 == 256, "dskc plan and template disagree on bias_dropout_residual_fwd_ffn's block size");
static_assert(sizeof(BiasDropoutResidualParams) == 56, "BiasDropoutResidualParams must match runtime/kernel_params.h");
extern "C" __global__ void __launch_bounds__(256) bias_dropout_residual_fwd_ffn(const BiasDropoutResidualParams p) {
  bias_dropout_residual_fwd_impl<kHidden, kHiddenDropoutOn, dskc_rng::kStreamFfnOutput>(p);
}

// dropout_bias_grad_ffn_out (backward pass): hidden dropout backward (mask regenerated; output_b bias gradient by a column-sum GEMM)
// launch: block 256, grid-stride over 16-byte vectors
static_assert(256 == 256, "dskc plan and template disagree on dropout_bias_grad_ffn_out's block size");
static_assert(sizeof(DropoutBiasGradParams) == 48, "DropoutBiasGradParams must match runtime/kernel_params.h");
extern "C" __global__ void __launch_bounds__(256) dropout_bias_grad_ffn_out(const DropoutBiasGradParams p) {
  dropout_bwd_impl<kHidden, dskc_rng::kStreamFfnOutput>(p);
}

// bias_gelu_bwd (backward pass): GELU backward (inter_b gradient by a column-sum GEMM)
// launch: block 256, grid-stride over 16-byte vectors
static_assert(256 == 256, "dskc plan and template disagree on bias_gelu_bwd's block size");
static_assert(sizeof(BiasGeluBwdParams) == 40, "BiasGeluBwdParams must match runtime/kernel_params.h");
extern "C" __global__ void __launch_bounds__(256) bias_gelu_bwd(const BiasGeluBwdParams p) {
  bias_gelu_bwd_elem_impl<kInter>(p);
}

// layernorm_bwd_attn (backward pass): LayerNorm(attn_nw, attn_nb) backward + residual gradient added after + gamma/beta partials + the attention output's hidden dropout backward (mask regenerated)
// launch: block 128, grid = ceil(B·S / kGradRowsPerBlock) (row tiles)
static_assert(LayerNormBwdShape<kHidden>::kThreads == 128, "dskc plan and template disagree on layernorm_bwd_attn's block size");
static_assert(sizeof(LayerNormBwdParams) == 104, "LayerNormBwdParams must match runtime/kernel_params.h");
extern "C" __global__ void __launch_bounds__(128) layernorm_bwd_attn(const LayerNormBwdParams p) {
  layernorm_bwd_impl<kHidden, kNormalizeInvertible, kLnAddToDx, true, dskc_rng::kStreamAttnOutput>(p);
}

// attn_flash_bwd_dot (backward pass): D = rowsum(dO ⊙ O) per attention row for the fused backward
// launch: block 128, grid = (ceil(S / rows per tile), B·heads) (one tile of one head per block)
static_assert(FlashDotTile::kThreads == 128, "dskc plan and template disagree on attn_flash_bwd_dot's block size");
static_assert(FlashDotTile::kRows == 16, "dskc plan and template disagree on attn_flash_bwd_dot's rows per tile");
static_assert(sizeof(AttnFlashDotParams) == 48, "AttnFlashDotParams must match runtime/kernel_params.h");
extern "C" __global__ void __launch_bounds__(128) attn_flash_bwd_dot(const AttnFlashDotParams p) {
  attn_flash_bwd_dot_impl<T>(p);
}

// attn_flash_bwd_dkdv (backward pass): fused attention backward on warpgroup MMA (1 warpgroup of 64 keys per block, Q/dO by TMA in 3 stages): dK, dV per key tile + dSᵀ into grad_scores by TMA for the dQ GEMM (P recomputed from Q, K and the logsumexp, dropout mask from the saved bits; no atomics)
// launch: block 128, grid = (ceil(S / rows per tile), B·heads) (one tile of one head per block)
static_assert(FlashWgBwdTile<1>::kThreads == 128, "dskc plan and template disagree on attn_flash_bwd_dkdv's block size");
static_assert(FlashWgBwdTile<1>::kKeys == 64, "dskc plan and template disagree on attn_flash_bwd_dkdv's rows per tile");
static_assert(FlashWgBwdTile<1>::smem_bytes == 86320, "dskc plan and template disagree on attn_flash_bwd_dkdv's dynamic shared memory");
static_assert(sizeof(AttnFlashBwdWgParams) == 640, "AttnFlashBwdWgParams must match runtime/kernel_params.h");
extern "C" __global__ void __launch_bounds__(128, FlashWgBwdTile<1>::kMinBlocks) attn_flash_bwd_dkdv(const __grid_constant__ AttnFlashBwdWgParams p) {
  attn_flash_bwd_wgmma_impl<T, kAttnDropoutOn, 1>(p);
}

// layernorm_bwd_norm (backward pass): LayerNorm(norm_w, norm_b) backward + residual gradient added after + gamma/beta partials
// launch: block 128, grid = ceil(B·S / kGradRowsPerBlock) (row tiles)
static_assert(LayerNormBwdShape<kHidden>::kThreads == 128, "dskc plan and template disagree on layernorm_bwd_norm's block size");
static_assert(sizeof(LayerNormBwdParams) == 104, "LayerNormBwdParams must match runtime/kernel_params.h");
extern "C" __global__ void __launch_bounds__(128) layernorm_bwd_norm(const LayerNormBwdParams p) {
  layernorm_bwd_impl<kHidden, false, kLnAddToDx>(p);
}

// param_grad_reduce_layernorm (backward pass): sums LayerNorm gamma/beta gradient partials
// launch: block 256, grid = (ceil(cols / 16), arrays)
static_assert(256 == 256, "dskc plan and template disagree on param_grad_reduce_layernorm's block size");
static_assert(sizeof(ParamGradReduceParams) == 32, "ParamGradReduceParams must match runtime/kernel_params.h");
extern "C" __global__ void __launch_bounds__(256) param_grad_reduce_layernorm(const ParamGradReduceParams p) {
  param_grad_reduce_impl<kHidden, 2>(p);
}
