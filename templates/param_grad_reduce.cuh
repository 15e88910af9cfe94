// param_grad_reduce: sums float partials [parts, kArrays, kCols] over parts, in a fixed order,
// into kArrays parameter gradients of kCols elements (bias grads: 1 array; LayerNorm: gamma and
// beta). Block = 32 columns × 8 part-strides, combined through shared memory.
#pragma once
#include "dskc_config.cuh"
#include "common/types.cuh"

namespace dskc {

struct ParamGradReduceParams {
  const float* part;  // [parts, kArrays, kCols]
  T* out0;            // [kCols] first array's gradient
  T* out1;            // [kCols] second array's gradient (kArrays == 2)
  int parts;
};

template <int kCols, int kArrays>
__device__ __forceinline__ void param_grad_reduce_impl(const ParamGradReduceParams& p) {
  __shared__ float acc[8][33];
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
  const int col = blockIdx.x * 32 + tx;
  const int array = blockIdx.y;
  float s = 0.f;
  if (col < kCols) {
    for (int i = ty; i < p.parts; i += 8) s += p.part[(static_cast<size_t>(i) * kArrays + array) * kCols + col];
  }
  acc[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && col < kCols) {
#pragma unroll
    for (int j = 1; j < 8; ++j) s += acc[j][tx];
    T* out = array == 0 ? p.out0 : p.out1;
    out[col] = from_f<T>(s);
  }
}

}  // namespace dskc
