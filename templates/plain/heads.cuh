// plain/heads: the attention's head split and merge (PyTorch's view + permute + contiguous):
//   to_heads    dst[b, h, s, e] = src[b, s, col0 + h·d + e]    src rows of `ld` elements
//   from_heads  dst[b, s, col0 + h·d + e] = src[b, h, s, e]
// Q/K/V come out of the [B, S, 3H] projection with col0 = 0, H, 2H (ld = 3H); the context and
// its gradient use col0 = 0, ld = H; dQ/dK/dV go back into [B, S, 3H] the same way.
#pragma once
#include "dskc_config.cuh"
#include "plain/util.cuh"

namespace dskc {

struct PlainHeadsParams {
  const T* src;
  T* dst;
  int batch, seq, heads, head_dim, ld, col0;
};

// i walks the [B, heads, S, d] tensor; returns the matching offset in the [B, S, ld] tensor.
__device__ __forceinline__ unsigned long long plain_token_offset(const PlainHeadsParams& p, unsigned long long i) {
  const unsigned long long d = static_cast<unsigned long long>(p.head_dim), s = static_cast<unsigned long long>(p.seq);
  const unsigned long long e = i % d, t = (i / d) % s, bh = i / (d * s);
  const unsigned long long h = bh % p.heads, b = bh / p.heads;
  return (b * s + t) * p.ld + p.col0 + h * d + e;
}

__device__ __forceinline__ void to_heads_impl(const PlainHeadsParams& p) {
  const unsigned long long n = static_cast<unsigned long long>(p.batch) * p.heads * p.seq * p.head_dim;
  DSKC_PLAIN_STRIDE(i, n) p.dst[i] = p.src[plain_token_offset(p, i)];
}

__device__ __forceinline__ void from_heads_impl(const PlainHeadsParams& p) {
  const unsigned long long n = static_cast<unsigned long long>(p.batch) * p.heads * p.seq * p.head_dim;
  DSKC_PLAIN_STRIDE(i, n) p.dst[plain_token_offset(p, i)] = p.src[i];
}

}  // namespace dskc
