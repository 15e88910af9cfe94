// plain/elementwise: one simple kernel per elementary op of the plain layer, grid-stride over the
// elements, fp32 math, every result stored in T:
//   bias_add   y[r, c] = x[r, c] + bias[c]                 (in place allowed)
//   add        y = a + b                                   (residual adds; in place allowed)
//   dropout    y = keep ? x·scale : 0 with the Philox keep rule (common/dropout.cuh), element
//              index = the flat index of the tensor (docs/DESIGN.md "Dropout masks"); forward
//              and backward (dx = keep ? dy·scale : 0) are the same kernel
//   gelu_fwd   y = GELU(x);  gelu_bwd  dx = dy·GELU'(x)
//   mask_add   scores[b, h, i, j] += mask[b, j]            (additive attention mask)
//   colsum     out[c] = Σ_r x[r, c]                        (bias gradients; fixed order)
#pragma once
#include "dskc_config.cuh"
#include "common/dropout.cuh"
#include "common/gelu.cuh"
#include "plain/util.cuh"

namespace dskc {

struct PlainBiasAddParams {
  const T* x;        // [n / cols, cols]
  const T* bias;     // [cols]
  T* y;              // [n / cols, cols]
  unsigned long long n;
  int cols;
};

struct PlainAddParams {
  const T* a;
  const T* b;
  T* y;
  unsigned long long n;
};

struct PlainDropoutParams {
  const T* x;
  T* y;
  unsigned long long n;
  DropoutArgs rng;
  unsigned int stream;  // dskc_rng::Stream of the dropout site
};

struct PlainGeluFwdParams {
  const T* x;
  T* y;
  unsigned long long n;
};

struct PlainGeluBwdParams {
  const T* dy;
  const T* x;  // GELU input
  T* dx;
  unsigned long long n;
};

struct PlainMaskAddParams {
  T* scores;       // [batch, heads, seq, seq]
  const T* mask;   // [batch, seq]
  int batch, heads, seq;
};

struct PlainColSumParams {
  const T* x;  // [rows, cols]
  T* out;      // [cols]
  int rows, cols;
};

__device__ __forceinline__ void bias_add_impl(const PlainBiasAddParams& p) {
  DSKC_PLAIN_STRIDE(i, p.n) p.y[i] = from_f<T>(to_f(p.x[i]) + to_f(p.bias[i % p.cols]));
}

__device__ __forceinline__ void add_impl(const PlainAddParams& p) {
  DSKC_PLAIN_STRIDE(i, p.n) p.y[i] = from_f<T>(to_f(p.a[i]) + to_f(p.b[i]));
}

// Each thread handles groups of eight consecutive elements (one Philox call).
template <uint32_t kThreshold>
__device__ __forceinline__ void dropout_impl(const PlainDropoutParams& p, float scale) {
  const unsigned long long groups = (p.n + 7) / 8;
  DSKC_PLAIN_STRIDE(g, groups) {
    const unsigned long long first = g * 8;
    bool keep[8];
    dropout_keep_vec<8>(p.rng, p.stream, first, kThreshold, keep);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const unsigned long long i = first + k;
      if (i < p.n) p.y[i] = from_f<T>(keep[k] ? to_f(p.x[i]) * scale : 0.f);
    }
  }
}

template <bool kTanh>
__device__ __forceinline__ void gelu_fwd_impl(const PlainGeluFwdParams& p) {
  DSKC_PLAIN_STRIDE(i, p.n) p.y[i] = from_f<T>(gelu<kTanh>(to_f(p.x[i])));
}

template <bool kTanh>
__device__ __forceinline__ void gelu_bwd_impl(const PlainGeluBwdParams& p) {
  DSKC_PLAIN_STRIDE(i, p.n) p.dx[i] = from_f<T>(to_f(p.dy[i]) * gelu_grad<kTanh>(to_f(p.x[i])));
}

__device__ __forceinline__ void mask_add_impl(const PlainMaskAddParams& p) {
  const unsigned long long s = static_cast<unsigned long long>(p.seq);
  const unsigned long long n = static_cast<unsigned long long>(p.batch) * p.heads * s * s;
  DSKC_PLAIN_STRIDE(i, n) {
    const unsigned long long j = i % s;                           // key
    const unsigned long long b = i / (static_cast<unsigned long long>(p.heads) * s * s);
    p.scores[i] = from_f<T>(to_f(p.scores[i]) + to_f(p.mask[b * s + j]));
  }
}

__device__ __forceinline__ void colsum_impl(const PlainColSumParams& p) {
  float sum = 0.f, unused = 0.f;
  const T* x = p.x;
  const int cols = p.cols;
  plain_column_sums(
      p.rows, cols,
      [x, cols](int r, int c, float& a, float&) { a += to_f(x[static_cast<size_t>(r) * cols + c]); }, &sum,
      &unused);
  const int c = blockIdx.x * 32 + threadIdx.x;
  if (threadIdx.x < 32 && c < cols) p.out[c] = from_f<T>(sum);
}

}  // namespace dskc
