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
#pragma once
#include "common/fast_math.cuh"

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
