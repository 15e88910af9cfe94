// model/params: parameter and gradient bookkeeping of the CUDA backend, all over fp32 master
// buffers:
//   cast_params          dst (T) = src (fp32 master)          master -> layer/head weights
//   accumulate           dst (fp32) += src (T), acc_add rule   layer / GEMM gradients
//   widen                dst (fp32) = src (T)                  all-reduced gradients back
//   add_pair             dst (fp32) = T(a + b)                 two ranks' gradients summed
//                        (trainer/peer_sum.h): the correctly rounded T sum, as a T all-reduce
//   colsum_accumulate    dst[c] += Σ_rows src[r, c]            bias gradients (fixed order)
//   grouped_rows_part / grouped_rows_finish  dst[target[g]] += Σ_{r in group g} src[r]
//                        embedding-table gradients: the host groups token rows by id and cuts each
//                        group into pieces of at most 64 rows; part[p] = the sum of piece p (one
//                        block each), then each group adds its pieces' sums in order. No atomics,
//                        deterministic even for repeated ids, and a group of thousands of rows
//                        (padding, a token type) no longer runs on one block
//   grouped_rows_compact dst[u] = T(Σ_{r in group[u]} src[r])  the same sums for a list of
//                        rows (the union of the ranks' token ids; group -1: zeros), compact
//   scatter_add_rows     dst[target[u]] += src[u] (T), acc_add  the summed compact rows back
//   sumsq_partial / reduce_partials  Σ x² in double over a table of ranges (fp32 accumulators or
//                        T gradients): a FIXED number of blocks per range, grid-stride within it,
//                        then one block adds the partials in order (deterministic two-stage)
//   adam_step / lamb_stage1 / lamb_stage2  trainer/optimizer.h's updates (Adam in fp32 math)
//   adam_multi           adam_step over every parameter tensor in one launch (a table of
//                        segments of the flat buffers), writing the compute copies too; with
//                        dtype_grads, the layers' segments read their T gradients directly
//                        (one micro-batch per step: the fp32 accumulator would be 0 + g)
// Grid-stride loops use gridDim.x, so results depend only on the launch's grid size.
#pragma once
#include "dskc_config.cuh"
#include "common/model_util.cuh"

namespace dskc {

struct CastParams {
  const float* src;  // [n]
  T* dst;            // [n]
  unsigned long long n;
};

struct AccumulateParams {
  const T* src;  // [n]
  float* dst;    // [n]
  unsigned long long n;
};

struct AddPairParams {
  const T* a;  // [n] this rank's gradients
  const T* b;  // [n] the other rank's
  float* dst;  // [n]
  unsigned long long n;
};

struct ColSumParams {
  const T* src;  // [rows, ld]
  float* dst;    // [cols]
  int rows, cols, ld;
};

struct GroupedRowsPartParams {
  const float* src;    // [rows, kH]
  const int* member;   // source rows, grouped
  const int* piece;    // [pieces + 1] piece p owns member[piece[p] .. piece[p+1])
  float* part;         // [pieces, kH] the pieces' sums (workspace)
  int pieces;
};

struct GroupedRowsFinishParams {
  const float* part;         // [pieces, kH]
  const int* target;         // [groups] destination row of each group
  const int* group_piece;    // [groups + 1] group g owns pieces group_piece[g] .. group_piece[g+1]
  float* dst;                // [*, kH] fp32 accumulator
  int groups;
};

struct GroupedRowsCompactParams {
  const float* src;   // [rows, kH]
  const int* group;   // [n] this rank's group of compact row u, -1 when it has none
  const int* start;   // [groups + 1] group g owns member[start[g] .. start[g+1])
  const int* member;
  T* dst;             // [n, kH]
  int n;
};

struct ScatterRowsParams {
  const T* src;       // [n, kH]
  const int* target;  // [n] destination row of each
  float* dst;         // [*, kH] fp32 accumulator
  int n;
};

// A range of sumsq_partial: n elements from x, fp32 (f32 != 0) or T; x 16-byte aligned.
struct SumSqRange {
  const void* x;
  unsigned long long n;
  int f32, pad;
};
static_assert(sizeof(SumSqRange) == 24, "trainer/bert_cuda_params.h mkp::SumSqRange");

struct SumSqParams {
  const SumSqRange* ranges;  // [gridDim.x / parts]
  double* part;              // [gridDim.x]: block b sums its share of range b / parts
  int parts;                 // blocks per range
};

struct ReducePartialsParams {
  const double* part;  // [parts · stride]
  double* out;         // [stride]: out[k] = Σ_i part[i·stride + k]
  int parts, stride;
};

struct AdamParams {
  float* p;
  const float* g;
  float* m;
  float* v;
  double gmul, beta1, beta2, bc1, sqrt_bc2, eps, lr, wd;
  unsigned long long n;
};

// One parameter tensor of adam_multi: its place in the flat fp32 buffers (masters, gradients and
// moments share offsets), its compute copy, whether it decays, its first chunk of the grid, and,
// for an encoder layer's tensor, the layer's own T gradient (read instead of the accumulator when
// AdamMultiParams::dtype_grads is set; nullptr otherwise).
struct AdamSegment {
  unsigned long long offset, n, first_chunk;
  T* dst;
  const T* gsrc;
  int decay;
  int parts;  // the Lamb stage-1 table: the tensor's blocks (first_chunk is its first block); 0 otherwise
};
static_assert(sizeof(AdamSegment) == 48, "trainer/bert_cuda_params.h mkp::AdamSegment");

struct AdamMultiParams {
  float* p;
  const float* g;
  float* m;
  float* v;
  const AdamSegment* segs;  // by first_chunk, ascending
  double gmul, beta1, beta2, bc1, sqrt_bc2, eps, lr, wd;
  unsigned long long chunk;  // elements per block
  int n_segs;
  int dtype_grads;  // segments with gsrc read it (as 0 + g: the accumulator model_accumulate_first writes)
};

struct LambParams {
  float* p;
  const float* g;
  float* m;
  float* v;
  double* part;  // [parts, 2]: Σ p², Σ u² per block of stage 1
  double gmul, beta1, beta2, eps, wd, step_size, max_coeff, min_coeff;
  unsigned long long n;
  int parts;  // stage 1's grid size
};

// Lamb over every tensor in three launches (stage 1, the trust ratios, stage 2), bitwise the
// per-tensor kernels': stage 1 runs each tensor's `parts` blocks (segs1, first_chunk = its first
// block) over the same elements in the same order as the per-tensor stage 1 with grid = parts, so
// the partials, the trust ratio and every update are the same numbers; stage 2 walks segs2 (the
// one-launch Adam's table: 2048-element chunks) and writes the compute copies too.
struct LambMultiParams {
  float* p;
  const float* g;
  float* m;
  float* v;
  const AdamSegment* segs1;  // by first_chunk (= first stage-1 block), ascending; parts set
  const AdamSegment* segs2;  // by first_chunk (2048-element chunks), ascending
  double* part;              // [Σ parts, 2]: Σ p², Σ u² per stage-1 block
  double* trust;             // [n_segs]
  double gmul, beta1, beta2, eps, wd, step_size, max_coeff, min_coeff;
  unsigned long long chunk;  // stage 2's elements per block
  int n_segs;
  int dtype_grads;  // segments with gsrc read it (as 0 + g), as AdamMultiParams
};

#define DSKC_GRID_STRIDE(i, n)                                                                   \
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(kModelThreads) + threadIdx.x; \
       i < (n); i += static_cast<unsigned long long>(gridDim.x) * kModelThreads)

__device__ __forceinline__ void cast_params_impl(const CastParams& p) {
  DSKC_GRID_STRIDE(i, p.n) p.dst[i] = from_f<T>(p.src[i]);
}

// dst += src (acc_add), or with kAssign dst = src (exact: T -> fp32). Eight elements per step
// with 16-byte accesses when both pointers are 16-byte aligned (the gradient buffers are), the
// rest one by one; elementwise, so the grid does not change the result.
// kFromZero (with kAssign): dst = 0 + src, bit for bit what accumulating onto a zeroed accumulator
// gives (−0 becomes +0), without reading it.
template <bool kAssign, bool kFromZero = false>
__device__ __forceinline__ void accumulate_impl(const AccumulateParams& p) {
  constexpr int kVec = 8;
  const bool aligned =
      ((reinterpret_cast<unsigned long long>(p.src) | reinterpret_cast<unsigned long long>(p.dst)) & 15) == 0;
  const unsigned long long nv = aligned ? p.n / kVec : 0;
  DSKC_GRID_STRIDE(v, nv) {
    alignas(16) T s[kVec];
    alignas(16) float d[kVec];
    const uint4* sp = reinterpret_cast<const uint4*>(p.src + v * kVec);
#pragma unroll
    for (int k = 0; k < kVec * static_cast<int>(sizeof(T)) / 16; ++k) reinterpret_cast<uint4*>(s)[k] = sp[k];
    float4* dp = reinterpret_cast<float4*>(p.dst + v * kVec);
    if constexpr (!kAssign) {
      reinterpret_cast<float4*>(d)[0] = dp[0];
      reinterpret_cast<float4*>(d)[1] = dp[1];
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      d[k] = kAssign ? (kFromZero ? onto_zero(s[k]) : to_f(s[k])) : round_to<T>(d[k] + to_f(s[k]));
    dp[0] = reinterpret_cast<const float4*>(d)[0];
    dp[1] = reinterpret_cast<const float4*>(d)[1];
  }
  const unsigned long long done = nv * kVec;
  DSKC_GRID_STRIDE(i, p.n - done) {
    if constexpr (kAssign)
      p.dst[done + i] = kFromZero ? onto_zero(p.src[done + i]) : to_f(p.src[done + i]);
    else
      acc_add(p.dst + done + i, to_f(p.src[done + i]));
  }
}

// dst = round_to<T>(a + b) with the add in fp32. Two T values add exactly in fp32 whenever the
// result can round to a T midpoint (exponents at most T's mantissa bits + 2 apart), so this is
// the correctly rounded T sum, bit for bit what a two-rank T all-reduce gives; and a + b equals
// b + a, so both ranks hold the same bits. 16-byte accesses as in accumulate_impl.
__device__ __forceinline__ void add_pair_impl(const AddPairParams& p) {
  constexpr int kVec = 8;
  const bool aligned = ((reinterpret_cast<unsigned long long>(p.a) | reinterpret_cast<unsigned long long>(p.b) |
                         reinterpret_cast<unsigned long long>(p.dst)) & 15) == 0;
  const unsigned long long nv = aligned ? p.n / kVec : 0;
  DSKC_GRID_STRIDE(v, nv) {
    alignas(16) T a[kVec];
    alignas(16) T b[kVec];
    alignas(16) float d[kVec];
    const uint4* ap = reinterpret_cast<const uint4*>(p.a + v * kVec);
    const uint4* bp = reinterpret_cast<const uint4*>(p.b + v * kVec);
#pragma unroll
    for (int k = 0; k < kVec * static_cast<int>(sizeof(T)) / 16; ++k) {
      reinterpret_cast<uint4*>(a)[k] = ap[k];
      reinterpret_cast<uint4*>(b)[k] = bp[k];
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) d[k] = round_to<T>(to_f(a[k]) + to_f(b[k]));
    float4* dp = reinterpret_cast<float4*>(p.dst + v * kVec);
    dp[0] = reinterpret_cast<const float4*>(d)[0];
    dp[1] = reinterpret_cast<const float4*>(d)[1];
  }
  const unsigned long long done = nv * kVec;
  DSKC_GRID_STRIDE(i, p.n - done) p.dst[done + i] = round_to<T>(to_f(p.a[done + i]) + to_f(p.b[done + i]));
}

// A block owns kColSumCols columns; its warps walk row slices (warp w: rows w, w + kColSumSlices,
// ...), and the slices' sums are added in slice order: a fixed order, so the result is deterministic.
// (One thread per column walking every row left ~120 blocks on the GPU for the decoder bias.)
constexpr int kColSumCols = 32;
constexpr int kColSumSlices = kModelThreads / kColSumCols;

__device__ __forceinline__ void colsum_accumulate_impl(const ColSumParams& p) {
  __shared__ float slice[kColSumSlices][kColSumCols + 1];
  const int lane = threadIdx.x % kColSumCols, w = threadIdx.x / kColSumCols;
  const int c = blockIdx.x * kColSumCols + lane;
  float s = 0.f;
  if (c < p.cols) {
#pragma unroll 4
    for (int r = w; r < p.rows; r += kColSumSlices) s += to_f(p.src[static_cast<size_t>(r) * p.ld + c]);
  }
  slice[w][lane] = s;
  __syncthreads();
  if (w != 0 || c >= p.cols) return;
  float t = 0.f;
  for (int k = 0; k < kColSumSlices; ++k) t += slice[k][lane];
  acc_add(p.dst + c, t);
}

template <int kH>
__device__ __forceinline__ void grouped_rows_part_impl(const GroupedRowsPartParams& p) {
  const int q = blockIdx.x;
  if (q >= p.pieces) return;
  const int i0 = p.piece[q], i1 = p.piece[q + 1];
  for (int c = threadIdx.x; c < kH; c += kModelThreads) {
    float s = 0.f;
    for (int i = i0; i < i1; ++i) s += p.src[static_cast<size_t>(p.member[i]) * kH + c];
    p.part[static_cast<size_t>(q) * kH + c] = s;
  }
}

template <int kH>
__device__ __forceinline__ void grouped_rows_finish_impl(const GroupedRowsFinishParams& p) {
  const int g = blockIdx.x;
  if (g >= p.groups) return;
  const int q0 = p.group_piece[g], q1 = p.group_piece[g + 1];
  float* d = p.dst + static_cast<size_t>(p.target[g]) * kH;
  for (int c = threadIdx.x; c < kH; c += kModelThreads) {
    float s = 0.f;
    for (int q = q0; q < q1; ++q) s += p.part[static_cast<size_t>(q) * kH + c];
    acc_add(d + c, s);
  }
}

template <int kH>
__device__ __forceinline__ void grouped_rows_compact_impl(const GroupedRowsCompactParams& p) {
  const int u = blockIdx.x;
  if (u >= p.n) return;
  const int g = p.group[u];
  const int i0 = g >= 0 ? p.start[g] : 0, i1 = g >= 0 ? p.start[g + 1] : 0;
  T* d = p.dst + static_cast<size_t>(u) * kH;
  for (int c = threadIdx.x; c < kH; c += kModelThreads) {
    float s = 0.f;
    for (int i = i0; i < i1; ++i) s += p.src[static_cast<size_t>(p.member[i]) * kH + c];
    d[c] = from_f<T>(s);
  }
}

template <int kH>
__device__ __forceinline__ void scatter_add_rows_impl(const ScatterRowsParams& p) {
  const int u = blockIdx.x;
  if (u >= p.n) return;
  const T* s = p.src + static_cast<size_t>(u) * kH;
  float* d = p.dst + static_cast<size_t>(p.target[u]) * kH;
  for (int c = threadIdx.x; c < kH; c += kModelThreads) acc_add(d + c, to_f(s[c]));
}

// Σ x² of block b's share of range r (of `parts` blocks): 16-byte loads (__ldg: the pointer comes
// from a table, so the compiler would not know it global), each load's squares added pairwise
// before the running sum; the rest one by one.
template <typename U>
__device__ __forceinline__ double sumsq_share(const SumSqRange& r, unsigned b, unsigned parts) {
  constexpr int kV = 16 / static_cast<int>(sizeof(U));
  union Vec {
    uint4 raw;
    U v[kV];
  };
  const U* x = static_cast<const U*>(r.x);
  const unsigned long long nv = r.n / kV, step = static_cast<unsigned long long>(parts) * blockDim.x;
  double s = 0.0;
  for (unsigned long long i = static_cast<unsigned long long>(b) * blockDim.x + threadIdx.x; i < nv; i += step) {
    Vec v;
    v.raw = __ldg(reinterpret_cast<const uint4*>(x) + i);
    double q[kV];
#pragma unroll
    for (int k = 0; k < kV; ++k) {
      const double e = to_f(v.v[k]);
      q[k] = e * e;
    }
#pragma unroll
    for (int w = 1; w < kV; w *= 2)  // (q0 + q1) + (q2 + q3), ...: a fixed tree
#pragma unroll
      for (int k = 0; k + w < kV; k += 2 * w) q[k] += q[k + w];
    s += q[0];
  }
  const unsigned long long done = nv * kV;
  for (unsigned long long i = static_cast<unsigned long long>(b) * blockDim.x + threadIdx.x; done + i < r.n; i += step) {
    const double e = to_f(__ldg(x + done + i));
    s += e * e;
  }
  return s;
}

__device__ __forceinline__ void sumsq_partial_impl(const SumSqParams& p) {
  const unsigned parts = static_cast<unsigned>(p.parts);
  const SumSqRange r = p.ranges[blockIdx.x / parts];
  double s = r.f32 ? sumsq_share<float>(r, blockIdx.x % parts, parts) : sumsq_share<T>(r, blockIdx.x % parts, parts);
  s = model_block_sum(s);
  if (threadIdx.x == 0) p.part[blockIdx.x] = s;
}

// One block per output k (gridDim.x == stride).
__device__ __forceinline__ void reduce_partials_impl(const ReducePartialsParams& p) {
  const int k = blockIdx.x;
  double s = 0.0;
  for (int i = threadIdx.x; i < p.parts; i += kModelThreads) s += p.part[static_cast<size_t>(i) * p.stride + k];
  s = model_block_sum(s);
  if (threadIdx.x == 0) p.out[k] = s;
}

// Adam / AdamW (kAdamW: decoupled decay; else L2: g += wd·p) on one element, in fp32 math (as
// apex's and DeepSpeed's fused Adam): updates m and v and returns the new p. Every operation is an
// explicitly rounded intrinsic, so the per-tensor and the one-launch kernels, which both call this,
// agree bitwise whatever the compiler contracts around them; the quotient is a product with the
// correctly rounded reciprocal (__fdiv_rn's slow path spills). The double math before spent the
// optimizer's time on FP64 divisions and square roots. inv_bc1 = 1/bc1, inv_sqrt_bc2 = 1/sqrt(bc2);
// both 1 without bias correction.
struct AdamScalars {
  float gmul, beta1, one_minus_beta1, beta2, one_minus_beta2, inv_bc1, inv_sqrt_bc2, eps, lr;
};

template <typename A>
__device__ __forceinline__ AdamScalars adam_scalars(const A& a) {
  return {static_cast<float>(a.gmul),        static_cast<float>(a.beta1), static_cast<float>(1.0 - a.beta1),
          static_cast<float>(a.beta2),       static_cast<float>(1.0 - a.beta2), static_cast<float>(1.0 / a.bc1),
          static_cast<float>(1.0 / a.sqrt_bc2), static_cast<float>(a.eps), static_cast<float>(a.lr)};
}

template <bool kAdamW>
__device__ __forceinline__ float adam_update(const AdamScalars& c, float wd, float p, float g, float& m, float& v) {
  g = __fmul_rn(g, c.gmul);
  if constexpr (!kAdamW) g = __fmaf_rn(wd, p, g);
  m = __fmaf_rn(c.beta1, m, __fmul_rn(c.one_minus_beta1, g));
  v = __fmaf_rn(c.beta2, v, __fmul_rn(c.one_minus_beta2, __fmul_rn(g, g)));
  const float den = __fmaf_rn(__fsqrt_rn(v), c.inv_sqrt_bc2, c.eps);
  float u = __fmul_rn(__fmul_rn(m, c.inv_bc1), __frcp_rn(den));
  if constexpr (kAdamW) u = __fmaf_rn(wd, p, u);
  return __fmaf_rn(-c.lr, u, p);
}

// adam_update on element i of a's flat arrays with gradient g, stored back; returns the new p.
template <bool kAdamW, typename A>
__device__ __forceinline__ float adam_element(const AdamScalars& c, float wd, const A& a, unsigned long long i, float g) {
  float m = a.m[i], v = a.v[i];
  const float p = adam_update<kAdamW>(c, wd, a.p[i], g, m, v);
  a.p[i] = p;
  a.m[i] = m;
  a.v[i] = v;
  return p;
}

template <bool kAdamW>
__device__ __forceinline__ void adam_step_impl(const AdamParams& a) {
  const AdamScalars c = adam_scalars(a);
  const float wd = static_cast<float>(a.wd);
  DSKC_GRID_STRIDE(i, a.n) adam_element<kAdamW>(c, wd, a, i, a.g[i]);
}

// The raw type of four elements of `bytes` each, for one __ldg.
template <int kBytes>
struct Raw4 {
  using type = uint4;
};
template <>
struct Raw4<2> {
  using type = uint2;
};

// The segment of a table (ascending first_chunk) whose blocks hold this block.
__device__ __forceinline__ int segment_of(const AdamSegment* segs, int n_segs) {
  int lo = 0, hi = n_segs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (segs[mid].first_chunk <= blockIdx.x)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// The one-launch optimizers' chunk of segment s for block b: elements [begin, end) of the segment,
// begin = (b - first_chunk)·chunk.
__device__ __forceinline__ unsigned long long chunk_begin(const AdamSegment& s, unsigned long long chunk) {
  return (blockIdx.x - s.first_chunk) * chunk;
}
__device__ __forceinline__ unsigned long long chunk_end(const AdamSegment& s, unsigned long long chunk) {
  const unsigned long long begin = chunk_begin(s, chunk);
  return begin + chunk < s.n ? begin + chunk : s.n;
}
// Four new master values of segment s stored at master[i..i+3] (i = s.offset + j; 16 bytes) and
// their compute copies at s.dst[j..j+3], as cast_params would write them.
__device__ __forceinline__ void store_master4(const AdamSegment& s, float* master, unsigned long long i,
                                              unsigned long long j, float4 p) {
  *reinterpret_cast<float4*>(master + i) = p;
  s.dst[j] = from_f<T>(p.x);
  s.dst[j + 1] = from_f<T>(p.y);
  s.dst[j + 2] = from_f<T>(p.z);
  s.dst[j + 3] = from_f<T>(p.w);
}

// Block b updates chunk b - first_chunk of the segment whose chunks hold b (binary search), and
// writes each new master value's compute copy as cast_params would. A thread owns groups of four
// consecutive elements (16-byte loads of the master, fp32 gradient and moments: segment offsets
// are multiples of kAlignFloats; a layer's T gradients in one 4·sizeof(T)-byte load: its tensors
// start 256-byte aligned), all loaded before any store; a segment's last partial group goes
// element by element.
template <bool kAdamW>
__device__ __forceinline__ void adam_multi_impl(const AdamMultiParams& a) {
  const AdamSegment s = a.segs[segment_of(a.segs, a.n_segs)];
  const T* gs = a.dtype_grads ? s.gsrc : nullptr;
  using Raw = Raw4<sizeof(T)>::type;
  union Vec4 {
    Raw raw;
    T v[4];
  };
  const AdamScalars c = adam_scalars(a);
  const float wd = s.decay ? static_cast<float>(a.wd) : 0.f;
  const unsigned long long end = chunk_end(s, a.chunk);
  for (unsigned long long j = chunk_begin(s, a.chunk) + 4ull * threadIdx.x; j < end; j += 4ull * kModelThreads) {
    const unsigned long long i = s.offset + j;
    if (j + 4 <= end) {
      float4 p = *reinterpret_cast<const float4*>(a.p + i);
      float4 g;
      if (gs) {
        Vec4 t;
        t.raw = __ldg(reinterpret_cast<const Raw*>(gs + j));
        g = make_float4(onto_zero(t.v[0]), onto_zero(t.v[1]), onto_zero(t.v[2]), onto_zero(t.v[3]));
      } else {
        g = *reinterpret_cast<const float4*>(a.g + i);
      }
      float4 m = *reinterpret_cast<const float4*>(a.m + i);
      float4 v = *reinterpret_cast<const float4*>(a.v + i);
      p.x = adam_update<kAdamW>(c, wd, p.x, g.x, m.x, v.x);
      p.y = adam_update<kAdamW>(c, wd, p.y, g.y, m.y, v.y);
      p.z = adam_update<kAdamW>(c, wd, p.z, g.z, m.z, v.z);
      p.w = adam_update<kAdamW>(c, wd, p.w, g.w, m.w, v.w);
      *reinterpret_cast<float4*>(a.m + i) = m;
      *reinterpret_cast<float4*>(a.v + i) = v;
      store_master4(s, a.p, i, j, p);
    } else {
      for (unsigned long long k = j; k < end; ++k) {
        const float g = gs ? onto_zero(__ldg(gs + k)) : a.g[s.offset + k];
        s.dst[k] = from_f<T>(adam_element<kAdamW>(c, wd, a, s.offset + k, g));
      }
    }
  }
}

// Lamb's per-element math in fp32 (as apex's and DeepSpeed's FusedLamb), shared by the per-tensor
// and the multi-tensor kernels; every operation an explicitly rounded intrinsic (as adam_update),
// so both forms agree bitwise whatever the compiler contracts around them. Stage 1: the moments from
// gradient g (stored back), and the update direction u = m/(sqrt(v)+eps) + wd·p whose squares the
// norms sum in double; stage 2: the same u from the stored moments, and the new master value
// p + rate·u with rate = −step_size·trust rounded once. The double math before spent stage 1 on
// FP64 divisions and square roots (bench/NOTES.md t8).
struct LambScalars {
  float gmul, beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
};
template <typename A>
__device__ __forceinline__ LambScalars lamb_scalars(const A& a) {
  return {static_cast<float>(a.gmul),  static_cast<float>(a.beta1),       static_cast<float>(1.0 - a.beta1),
          static_cast<float>(a.beta2), static_cast<float>(1.0 - a.beta2), static_cast<float>(a.eps)};
}
__device__ __forceinline__ float lamb_direction(const LambScalars& c, float wd, float p, float m, float v) {
  return __fmaf_rn(wd, p, __fmul_rn(m, __frcp_rn(__fadd_rn(__fsqrt_rn(v), c.eps))));
}
__device__ __forceinline__ float lamb_moments(const LambScalars& c, float wd, float p, float g, float& m, float& v) {
  g = __fmul_rn(g, c.gmul);
  m = __fmaf_rn(c.beta1, m, __fmul_rn(c.one_minus_beta1, g));
  v = __fmaf_rn(c.beta2, v, __fmul_rn(c.one_minus_beta2, __fmul_rn(g, g)));
  return lamb_direction(c, wd, p, m, v);
}
__device__ __forceinline__ float lamb_rate(double step_size, double trust) {
  return static_cast<float>(-(step_size * trust));
}
__device__ __forceinline__ float lamb_new_p(const LambScalars& c, float wd, float rate, float p, float m, float v) {
  return __fmaf_rn(rate, lamb_direction(c, wd, p, m, v), p);
}
// One stage-1 block's share of a tensor (p, g, m, v at its first element; n elements): block q of
// `parts` takes the groups of four consecutive elements q·threads + t, stepping parts·threads groups
// (16-byte accesses of the fp32 arrays: tensor offsets are multiples of kAlignFloats; a layer's T
// gradients in one 4·sizeof(T)-byte load: its tensors start 256-byte aligned), all four loaded
// before any store; block 0 then takes the n % 4 tail element by element. Adds each element's p²
// and u² into ws, us in that fixed order. kLayer: g is a layer's T gradient, read as 0 + g (what
// the widened accumulator would hold; G = T); else the fp32 accumulator (G = float).
template <bool kLayer, typename G>
__device__ __forceinline__ void lamb_stage1_share(const LambScalars& c, float wd, float* p, const G* g, float* m,
                                                  float* v, unsigned long long n, unsigned long long q,
                                                  unsigned long long parts, double& ws, double& us) {
  using Raw = typename Raw4<sizeof(G)>::type;
  const auto grad = [](G x) -> float {
    if constexpr (kLayer)
      return onto_zero(x);
    else
      return x;
  };
  const auto element = [&](float pe, float ge, float& me, float& ve) {
    const double u = lamb_moments(c, wd, pe, ge, me, ve);
    const double pd = pe;
    ws = __fma_rn(pd, pd, ws);
    us = __fma_rn(u, u, us);
  };
  const unsigned long long groups = n / 4;
  for (unsigned long long j = q * kModelThreads + threadIdx.x; j < groups;
       j += parts * static_cast<unsigned long long>(kModelThreads)) {
    const float4 pv = reinterpret_cast<const float4*>(p)[j];
    float4 mv = reinterpret_cast<const float4*>(m)[j], vv = reinterpret_cast<const float4*>(v)[j];
    union {
      Raw raw;
      G v[4];
    } gv;
    gv.raw = __ldg(reinterpret_cast<const Raw*>(g) + j);
    element(pv.x, grad(gv.v[0]), mv.x, vv.x);
    element(pv.y, grad(gv.v[1]), mv.y, vv.y);
    element(pv.z, grad(gv.v[2]), mv.z, vv.z);
    element(pv.w, grad(gv.v[3]), mv.w, vv.w);
    reinterpret_cast<float4*>(m)[j] = mv;
    reinterpret_cast<float4*>(v)[j] = vv;
  }
  const unsigned long long tail = 4 * groups + threadIdx.x;
  if (q == 0 && tail < n) element(p[tail], grad(g[tail]), m[tail], v[tail]);
}
// The trust ratio from a tensor's stage-1 partials, summed in one fixed order by every caller.
__device__ __forceinline__ double lamb_trust(const double* part, int parts, double min_coeff, double max_coeff) {
  double ws = 0.0, us = 0.0;
  for (int i = threadIdx.x; i < parts; i += kModelThreads) {
    ws += part[2 * i];
    us += part[2 * i + 1];
  }
  ws = model_block_sum(ws);
  us = model_block_sum(us);
  double trust = 1.0;
  if (ws != 0.0 && us != 0.0) {
    trust = sqrt(ws) / sqrt(us);
    trust = fmin(fmax(trust, min_coeff), max_coeff);
  }
  return trust;
}

// Lamb stage 1's end: the block's Σ p² and Σ u², stored as partial pair blockIdx.x.
__device__ __forceinline__ void lamb_store_partials(double* part, double ws, double us) {
  ws = model_block_sum(ws);
  us = model_block_sum(us);
  if (threadIdx.x == 0) {
    part[2 * blockIdx.x] = ws;
    part[2 * blockIdx.x + 1] = us;
  }
}

// Lamb stage 1: moments, and per-block Σ p² and Σ u² (grid = parts: lamb_stage1_share).
__device__ __forceinline__ void lamb_stage1_impl(const LambParams& a) {
  double ws = 0.0, us = 0.0;
  lamb_stage1_share<false>(lamb_scalars(a), static_cast<float>(a.wd), a.p, a.g, a.m, a.v, a.n, blockIdx.x, gridDim.x,
                           ws, us);
  lamb_store_partials(a.part, ws, us);
}

// Lamb stage 2: every block adds the partials in the same order (so all agree on the trust
// ratio), then p += rate·u with u from the stored moments.
__device__ __forceinline__ void lamb_stage2_impl(const LambParams& a) {
  const LambScalars c = lamb_scalars(a);
  const float wd = static_cast<float>(a.wd);
  const float rate = lamb_rate(a.step_size, lamb_trust(a.part, a.parts, a.min_coeff, a.max_coeff));
  DSKC_GRID_STRIDE(i, a.n) a.p[i] = lamb_new_p(c, wd, rate, a.p[i], a.m[i], a.v[i]);
}

// Multi-tensor Lamb stage 1: block b is block q = b - first_chunk of its tensor's `parts`, taking
// the share the per-tensor stage 1's block q takes with grid = parts (lamb_stage1_share).
__device__ __forceinline__ void lamb_multi_stage1_impl(const LambMultiParams& a) {
  const AdamSegment s = a.segs1[segment_of(a.segs1, a.n_segs)];
  const LambScalars c = lamb_scalars(a);
  const float wd = s.decay ? static_cast<float>(a.wd) : 0.f;
  const unsigned long long q = blockIdx.x - s.first_chunk;
  double ws = 0.0, us = 0.0;
  if (a.dtype_grads && s.gsrc != nullptr)
    lamb_stage1_share<true>(c, wd, a.p + s.offset, s.gsrc, a.m + s.offset, a.v + s.offset, s.n, q, s.parts, ws, us);
  else
    lamb_stage1_share<false>(c, wd, a.p + s.offset, a.g + s.offset, a.m + s.offset, a.v + s.offset, s.n, q, s.parts,
                             ws, us);
  lamb_store_partials(a.part, ws, us);
}

// One block per tensor: its trust ratio from its stage-1 partials.
__device__ __forceinline__ void lamb_multi_trust_impl(const LambMultiParams& a) {
  const AdamSegment s = a.segs1[blockIdx.x];
  const double trust = lamb_trust(a.part + 2 * s.first_chunk, s.parts, a.min_coeff, a.max_coeff);
  if (threadIdx.x == 0) a.trust[blockIdx.x] = trust;
}

// Multi-tensor Lamb stage 2: block b updates chunk b - first_chunk of its tensor (16-byte accesses
// where four elements are whole, as adam_multi) and writes the compute copies as cast_params would.
__device__ __forceinline__ void lamb_multi_stage2_impl(const LambMultiParams& a) {
  const int si = segment_of(a.segs2, a.n_segs);
  const AdamSegment s = a.segs2[si];
  const LambScalars c = lamb_scalars(a);
  const float wd = s.decay ? static_cast<float>(a.wd) : 0.f, rate = lamb_rate(a.step_size, a.trust[si]);
  const unsigned long long end = chunk_end(s, a.chunk);
  for (unsigned long long j = chunk_begin(s, a.chunk) + 4ull * threadIdx.x; j < end; j += 4ull * kModelThreads) {
    const unsigned long long i = s.offset + j;
    if (j + 4 <= end) {
      float4 p = *reinterpret_cast<const float4*>(a.p + i);
      const float4 m = *reinterpret_cast<const float4*>(a.m + i);
      const float4 v = *reinterpret_cast<const float4*>(a.v + i);
      p.x = lamb_new_p(c, wd, rate, p.x, m.x, v.x);
      p.y = lamb_new_p(c, wd, rate, p.y, m.y, v.y);
      p.z = lamb_new_p(c, wd, rate, p.z, m.z, v.z);
      p.w = lamb_new_p(c, wd, rate, p.w, m.w, v.w);
      store_master4(s, a.p, i, j, p);
    } else {
      for (unsigned long long k = j; k < end; ++k) {
        const unsigned long long e = s.offset + k;
        a.p[e] = lamb_new_p(c, wd, rate, a.p[e], a.m[e], a.v[e]);
        s.dst[k] = from_f<T>(a.p[e]);
      }
    }
  }
}

#undef DSKC_GRID_STRIDE

}  // namespace dskc
