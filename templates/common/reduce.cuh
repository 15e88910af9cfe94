// Warp and block reductions (float). Block reductions need kThreads % 32 == 0 and a shared
// scratch of kThreads / 32 floats; every thread receives the result.
#pragma once

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
