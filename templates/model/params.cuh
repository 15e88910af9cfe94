// model/params: parameter and gradient bookkeeping of the CUDA backend, all over fp32 master
// buffers:
//   cast_params          dst (T) = src (fp32 master)          master -> layer/head weights
//   accumulate           dst (fp32) += src (T), acc_add rule   layer / GEMM gradients
//   widen                dst (fp32) = src (T)                  all-reduced gradients back
//   add_pair             dst (fp32) = T(a + b)                 two ranks' gradients summed
//                        (trainer/peer_sum.h): the correctly rounded T sum, as a T all-reduce
//   colsum_accumulate    dst[c] += Σ_rows src[r, c]            bias gradients (fixed order)
//   grouped_rows_accumulate  dst[target[g]] += Σ_{r in group g} src[r]  embedding-table
//                        gradients: the host groups token rows by id, so no atomics and the
//                        sum is deterministic even for repeated ids
//   grouped_rows_compact dst[u] = T(Σ_{r in group[u]} src[r])  the same sums for a list of
//                        rows (the union of the ranks' token ids; group -1: zeros), compact
//   scatter_add_rows     dst[target[u]] += src[u] (T), acc_add  the summed compact rows back
//   sumsq_partial / reduce_partials  Σ x² in double: grid-stride over a FIXED grid, then one
//                        block adds the partials in order (deterministic two-stage)
//   adam_step / lamb_stage1 / lamb_stage2  trainer/optimizer.h's updates in double
//   adam_multi           adam_step over every parameter tensor in one launch (a table of
//                        segments of the flat buffers), writing the compute copies too
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

struct GroupedRowsParams {
  const float* src;    // [rows, kH]
  const int* target;   // [groups] destination row of each group
  const int* start;    // [groups + 1] group g owns member[start[g] .. start[g+1])
  const int* member;   // source rows, grouped
  float* dst;          // [*, kH] fp32 accumulator
  int groups;
};

struct GroupedRowsCompactParams {
  const float* src;   // [rows, kH]
  const int* group;   // [n] this rank's group of compact row u, -1 when it has none
  const int* start;   // [groups + 1] as GroupedRowsParams
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

struct SumSqParams {
  const float* x;  // [n]
  double* part;    // [gridDim.x]
  unsigned long long n;
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
// moments share offsets), its compute copy, whether it decays, and its first chunk of the grid.
struct AdamSegment {
  unsigned long long offset, n, first_chunk;
  T* dst;
  int decay;
};
static_assert(sizeof(AdamSegment) == 40, "trainer/bert_cuda_params.h mkp::AdamSegment");

struct AdamMultiParams {
  float* p;
  const float* g;
  float* m;
  float* v;
  const AdamSegment* segs;  // by first_chunk, ascending
  double gmul, beta1, beta2, bc1, sqrt_bc2, eps, lr, wd;
  unsigned long long chunk;  // elements per block
  int n_segs;
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

#define DSKC_GRID_STRIDE(i, n)                                                                   \
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(kModelThreads) + threadIdx.x; \
       i < (n); i += static_cast<unsigned long long>(gridDim.x) * kModelThreads)

__device__ __forceinline__ void cast_params_impl(const CastParams& p) {
  DSKC_GRID_STRIDE(i, p.n) p.dst[i] = from_f<T>(p.src[i]);
}

// dst += src (acc_add), or with kAssign dst = src (exact: T -> fp32). Eight elements per step
// with 16-byte accesses when both pointers are 16-byte aligned (the gradient buffers are), the
// rest one by one; elementwise, so the grid does not change the result.
template <bool kAssign>
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
    for (int k = 0; k < kVec; ++k) d[k] = kAssign ? to_f(s[k]) : round_to<T>(d[k] + to_f(s[k]));
    dp[0] = reinterpret_cast<const float4*>(d)[0];
    dp[1] = reinterpret_cast<const float4*>(d)[1];
  }
  const unsigned long long done = nv * kVec;
  DSKC_GRID_STRIDE(i, p.n - done) {
    if constexpr (kAssign)
      p.dst[done + i] = to_f(p.src[done + i]);
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

__device__ __forceinline__ void colsum_accumulate_impl(const ColSumParams& p) {
  const int c = blockIdx.x * kModelThreads + threadIdx.x;
  if (c >= p.cols) return;
  float s = 0.f;
  for (int r = 0; r < p.rows; ++r) s += to_f(p.src[static_cast<size_t>(r) * p.ld + c]);
  acc_add(p.dst + c, s);
}

template <int kH>
__device__ __forceinline__ void grouped_rows_accumulate_impl(const GroupedRowsParams& p) {
  const int g = blockIdx.x;
  if (g >= p.groups) return;
  const int i0 = p.start[g], i1 = p.start[g + 1];
  float* d = p.dst + static_cast<size_t>(p.target[g]) * kH;
  for (int c = threadIdx.x; c < kH; c += kModelThreads) {
    float s = 0.f;
    for (int i = i0; i < i1; ++i) s += p.src[static_cast<size_t>(p.member[i]) * kH + c];
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

__device__ __forceinline__ void sumsq_partial_impl(const SumSqParams& p) {
  double s = 0.0;
  DSKC_GRID_STRIDE(i, p.n) {
    const double x = p.x[i];
    s += x * x;
  }
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

// Adam / AdamW (kAdamW: decoupled decay; else L2: g += wd·p). bc1 and sqrt_bc2 are 1 without
// bias correction. One element: updates m[i], v[i] and returns the new p[i] (the caller stores it).
template <bool kAdamW, typename A>
__device__ __forceinline__ float adam_element(const A& a, double wd, unsigned long long i) {
  const double p = a.p[i];
  double g = a.g[i] * a.gmul;
  if constexpr (!kAdamW) g += wd * p;
  const double m = a.beta1 * a.m[i] + (1.0 - a.beta1) * g;
  const double v = a.beta2 * a.v[i] + (1.0 - a.beta2) * g * g;
  a.m[i] = static_cast<float>(m);
  a.v[i] = static_cast<float>(v);
  double u = (m / a.bc1) / (sqrt(v) / a.sqrt_bc2 + a.eps);
  if constexpr (kAdamW) u += wd * p;
  return static_cast<float>(p - a.lr * u);
}

template <bool kAdamW>
__device__ __forceinline__ void adam_step_impl(const AdamParams& a) {
  DSKC_GRID_STRIDE(i, a.n) a.p[i] = adam_element<kAdamW>(a, a.wd, i);
}

// Block b updates chunk b - first_chunk of the segment whose chunks hold b (binary search), and
// writes each new master value's compute copy as cast_params would.
template <bool kAdamW>
__device__ __forceinline__ void adam_multi_impl(const AdamMultiParams& a) {
  int lo = 0, hi = a.n_segs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (a.segs[mid].first_chunk <= blockIdx.x)
      lo = mid;
    else
      hi = mid - 1;
  }
  const AdamSegment s = a.segs[lo];
  const unsigned long long begin = (blockIdx.x - s.first_chunk) * a.chunk;
  const unsigned long long end = begin + a.chunk < s.n ? begin + a.chunk : s.n;
  const double wd = s.decay ? a.wd : 0.0;
  for (unsigned long long j = begin + threadIdx.x; j < end; j += kModelThreads) {
    const float p = adam_element<kAdamW>(a, wd, s.offset + j);
    a.p[s.offset + j] = p;
    s.dst[j] = from_f<T>(p);
  }
}

// Lamb stage 1: moments, and per-block Σ p² and Σ u² with u = m/(sqrt(v)+eps) + wd·p.
__device__ __forceinline__ void lamb_stage1_impl(const LambParams& a) {
  double ws = 0.0, us = 0.0;
  DSKC_GRID_STRIDE(i, a.n) {
    const double p = a.p[i];
    const double g = a.g[i] * a.gmul;
    const double m = a.beta1 * a.m[i] + (1.0 - a.beta1) * g;
    const double v = a.beta2 * a.v[i] + (1.0 - a.beta2) * g * g;
    a.m[i] = static_cast<float>(m);
    a.v[i] = static_cast<float>(v);
    const double u = m / (sqrt(v) + a.eps) + a.wd * p;
    ws += p * p;
    us += u * u;
  }
  ws = model_block_sum(ws);
  us = model_block_sum(us);
  if (threadIdx.x == 0) {
    a.part[2 * blockIdx.x] = ws;
    a.part[2 * blockIdx.x + 1] = us;
  }
}

// Lamb stage 2: every block adds the partials in the same order (so all agree on the trust
// ratio), then p -= step_size·trust·u with u from the stored moments.
__device__ __forceinline__ void lamb_stage2_impl(const LambParams& a) {
  double ws = 0.0, us = 0.0;
  for (int i = threadIdx.x; i < a.parts; i += kModelThreads) {
    ws += a.part[2 * i];
    us += a.part[2 * i + 1];
  }
  ws = model_block_sum(ws);
  us = model_block_sum(us);
  double trust = 1.0;
  if (ws != 0.0 && us != 0.0) {
    trust = sqrt(ws) / sqrt(us);
    trust = fmin(fmax(trust, a.min_coeff), a.max_coeff);
  }
  DSKC_GRID_STRIDE(i, a.n) {
    const double p = a.p[i];
    const double u = static_cast<double>(a.m[i]) / (sqrt(static_cast<double>(a.v[i])) + a.eps) + a.wd * p;
    a.p[i] = static_cast<float>(p - a.step_size * trust * u);
  }
}

#undef DSKC_GRID_STRIDE

}  // namespace dskc
