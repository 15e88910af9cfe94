// Element types and 16-byte vector access for the generated kernels. T is the layer's storage
// type (float, __half or __nv_bfloat16), chosen by dskc_config.cuh; all arithmetic is in float.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "common/philox.cuh"  // fixed-width integer types

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
