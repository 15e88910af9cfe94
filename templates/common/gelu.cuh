// GELU and its derivative: exact (erf, BERT's) or the tanh approximation (DeepSpeed's kernel),
// matching PyTorch's F.gelu(approximate="none"|"tanh").
// The exact form needs the normal CDF Φ(x) = erfc(−x/√2)/2. CUDA's erff (a branch per magnitude
// range, ~25 instructions) made bias_gelu_fwd/_bwd issue-bound rather than memory-bound, so Φ
// comes from erfc(z) = t·exp(−z² + P(t)), t = 1/(1 + z/2), z = |x|/√2, with P the degree-9
// Chebyshev fit of Numerical Recipes' erfcc: fractional error below 1.2e-7 for every z ≥ 0, so
// the tails (x ≪ 0, where GELU is tiny) keep their relative accuracy; one reciprocal and one
// exponential, no branch. GELU itself (the forward's epilogue) takes a degree-7 minimax fit of
// the same form over the z that matter (x ≥ −13.3; below, GELU flushes to 0), fractional error
// 6.3e-7, and max(x, 0) − |x|·Φ(−|x|), one FMA after the tail: four instructions fewer per element
// (bench/NOTES.md v42). GELU′ keeps degree 9: its zero near x = −0.75 leaves only an absolute
// error bound of 2e-7, which the degree-7 fit's ~1.4e-7 in Φ there would nearly use up. The reduced-precision intrinsics add a few ulp (tests/gpu/test_layer_numerics
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

// Φ(−|x|) = erfc(|x|/√2)/2, given x2 = x·x: t·2^(P₂(t) − x²·log2(e)/2), P₂ of degree kDeg (9 or 7).
// P₂ = P·log2(e) with the constant term − 1, highest degree first: Numerical Recipes' erfcc (degree
// 9) or the minimax fit over t ≥ 0.175, x ≥ −13.3 (degree 7, fractional error of erfc 6.3e-7).
template <int kDeg>
__device__ __forceinline__ float normal_tail(float x, float x2) {
  static_assert(kDeg == 9 || kDeg == 7, "normal_tail: degree 9 or 7");
  constexpr float p9[10] = {0.246517301f,  -1.18611491f, 2.14747453f, -1.63775313f, 0.402321577f,
                            -0.268756866f, 0.139630049f, 0.539700627f, 1.44272923f,  -2.82574821f};
  constexpr float p7[8] = {-0.262958133f, 1.05008805f, -1.38346294f, 0.447220096f,
                           -0.026025882f, 0.558726349f, 1.4422092f,  -2.82579764f};
  const float* const c = kDeg == 9 ? p9 : p7;
  const float t = rcp_approx(fmaf(fabsf(x), 0.353553385f, 1.f));  // 1/(1 + z/2)
  float q = c[0];
#pragma unroll
  for (int i = 1; i <= kDeg; ++i) q = fmaf(q, t, c[i]);
  return t * exp2_approx(fmaf(x2, -0.721347511f, q));  // −z²·log2(e) = −x²·log2(e)/2
}

// Φ(x), given x2 = x·x.
__device__ __forceinline__ float normal_cdf(float x, float x2) {
  const float h = normal_tail<9>(x, x2);
  return x >= 0.f ? 1.f - h : h;
}

__device__ __forceinline__ float normal_cdf(float x) { return normal_cdf(x, x * x); }

namespace gelu_detail {
// The tanh form's pieces: u = √(2/π)·(x + 0.044715·x³), GELU = x·(1 + tanh u)/2 and its derivative
// given t = tanh u.
constexpr float kTanhK0 = 0.7978845608028654f, kTanhK1 = 0.044715f;
__device__ __forceinline__ float tanh_arg(float x) { return kTanhK0 * (x + kTanhK1 * x * x * x); }
__device__ __forceinline__ float tanh_gelu(float x, float t) { return 0.5f * x * (1.f + t); }
__device__ __forceinline__ float tanh_gelu_grad(float x, float t) {
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kTanhK0 * (1.f + 3.f * kTanhK1 * x * x);
}
// x·Φ(x) = max(x, 0) − |x|·Φ(−|x|): one FMA after the tail, no select.
__device__ __forceinline__ float erf_gelu(float x, float tail) { return fmaf(-fabsf(x), tail, fmaxf(x, 0.f)); }
// Φ(x) + x·φ(x), given Φ(−|x|) and x².
__device__ __forceinline__ float erf_gelu_grad(float x, float x2, float tail) {
  const float cdf = x >= 0.f ? 1.f - tail : tail;
  const float pdf = exp2_approx(fmaf(x2, -0.721347511f, -1.32574809f));  // e^(−x²/2)/√(2π)
  return fmaf(x, pdf, cdf);
}
}  // namespace gelu_detail

template <bool kTanh>
__device__ __forceinline__ float gelu(float x) {
  if constexpr (kTanh)
    return gelu_detail::tanh_gelu(x, tanhf(gelu_detail::tanh_arg(x)));
  else
    return gelu_detail::erf_gelu(x, normal_tail<7>(x, x * x));
}

template <bool kTanh>
__device__ __forceinline__ float gelu_grad(float x) {
  if constexpr (kTanh) {
    return gelu_detail::tanh_gelu_grad(x, tanhf(gelu_detail::tanh_arg(x)));
  } else {
    const float x2 = x * x;
    return gelu_detail::erf_gelu_grad(x, x2, normal_tail<9>(x, x2));
  }
}

// GELU(x) and GELU′(x) from one tail (one tanh): gemm_sm90's GELU′ epilogues and the forward epilogue
// that saves GELU′(h) for them (GemmEpi::kBiasGeluSaveGrad). GELU is gelu<kTanh>(x), bitwise (the
// same expressions); GELU′ takes the degree-7 tail of the erf form (Φ within 3.2e-7 absolute) where
// gelu_grad takes degree 9: these callers round it to fp16 / bf16 before they use it, and the
// rounding, not the fit, sets its error. An unused GELU compiles away.
template <bool kTanh>
__device__ __forceinline__ void gelu_and_grad(float x, float& g, float& gp) {
  if constexpr (kTanh) {
    const float t = tanhf(gelu_detail::tanh_arg(x));
    g = gelu_detail::tanh_gelu(x, t);
    gp = gelu_detail::tanh_gelu_grad(x, t);
  } else {
    const float x2 = x * x, tail = normal_tail<7>(x, x2);
    g = gelu_detail::erf_gelu(x, tail);
    gp = gelu_detail::erf_gelu_grad(x, x2, tail);
  }
}

}  // namespace dskc
