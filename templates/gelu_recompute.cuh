// gelu_recompute: with gelu_checkpoint, backward rebuilds g = GELU(h) from the saved
// pre-activation h for the output_w gradient instead of keeping g from forward.
#pragma once
#include "dskc_config.cuh"
#include "common/gelu.cuh"
#include "common/types.cuh"

namespace dskc {

struct GeluRecomputeParams {
  const T* h;  // [rows, kCols]
  T* g;        // [rows, kCols]
  int rows;
};

template <int kCols>
__device__ __forceinline__ void gelu_recompute_impl(const GeluRecomputeParams& p) {
  constexpr int kV = VecWidth<T, kCols>::value;
  const size_t n_vec = static_cast<size_t>(p.rows) * (kCols / kV);
  for (size_t vi = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; vi < n_vec;
       vi += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float h[kV];
    load_f<T, kV>(p.h + vi * kV, h);
#pragma unroll
    for (int i = 0; i < kV; ++i) h[i] = gelu<kGeluTanh>(h[i]);
    store_f<T, kV>(p.g + vi * kV, h);
  }
}

}  // namespace dskc
