// Single-MUFU-instruction forms of 2^x and 1/x: the flush-to-zero approximations
// (ex2.approx.ftz, rcp.approx.ftz). exp2f / __expf and __fdividef are the IEEE-denormal forms,
// which compile to a range check and a rescale around the MUFU op (bench/NOTES.md v25: they made
// the GELU passes issue-bound). Inputs and results below 2^-126 flush to zero.
#pragma once

namespace dskc {

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace dskc
