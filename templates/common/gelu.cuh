// GELU and its derivative: exact (erf, BERT's) or the tanh approximation (DeepSpeed's kernel),
// matching PyTorch's F.gelu(approximate="none"|"tanh").
#pragma once

namespace dskc {

template <bool kTanh>
__device__ __forceinline__ float gelu(float x) {
  if constexpr (kTanh) {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;
    return 0.5f * x * (1.f + tanhf(k0 * (x + k1 * x * x * x)));
  } else {
    return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
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
    const float cdf = 0.5f * (1.f + erff(x * 0.7071067811865476f));
    const float pdf = 0.3989422804014327f * expf(-0.5f * x * x);
    return cdf + x * pdf;
  }
}

}  // namespace dskc
