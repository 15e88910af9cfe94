// GELU and its derivative: exact (erf, BERT's) or the tanh approximation (DeepSpeed's kernel),
// matching PyTorch's F.gelu(approximate="none"|"tanh").
// The exact form needs the normal CDF Φ(x) = erfc(−x/√2)/2. CUDA's erff (a branch per magnitude
// range, ~25 instructions) made bias_gelu_fwd/_bwd issue-bound rather than memory-bound, so Φ
// comes from erfc(z) = t·exp(−z² + P(t)), t = 1/(1 + z/2), z = |x|/√2, with P the degree-9
// Chebyshev fit of Numerical Recipes' erfcc: fractional error below 1.2e-7 for every z ≥ 0, so
// the tails (x ≪ 0, where GELU is tiny) keep their relative accuracy; one reciprocal and one
// exponential, no branch. The reduced-precision intrinsics add a few ulp (tests/gpu/test_layer_numerics
// checks GELU and GELU′ over [−12, 12] against erfc in double).
#pragma once

namespace dskc {

__device__ __forceinline__ float normal_cdf(float x) {
  const float z = fabsf(x) * 0.7071067811865476f;
  const float t = __fdividef(1.f, 1.f + 0.5f * z);
  float q = 0.17087277f;
  q = fmaf(q, t, -0.82215223f);
  q = fmaf(q, t, 1.48851587f);
  q = fmaf(q, t, -1.13520398f);
  q = fmaf(q, t, 0.27886807f);
  q = fmaf(q, t, -0.18628806f);
  q = fmaf(q, t, 0.09678418f);
  q = fmaf(q, t, 0.37409196f);
  q = fmaf(q, t, 1.00002368f);
  q = fmaf(q, t, -1.26551223f);
  const float half_erfc = 0.5f * t * __expf(fmaf(-z, z, q));  // erfc(z)/2 = Φ(−|x|)
  return x >= 0.f ? 1.f - half_erfc : half_erfc;
}

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
    const float pdf = 0.3989422804014327f * __expf(-0.5f * x * x);
    return normal_cdf(x) + x * pdf;
  }
}

}  // namespace dskc
