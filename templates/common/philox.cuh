// Philox4x32-10 counter-based RNG and the dropout keep rule shared by the generated kernels and
// the CPU reference (compiled as plain C++ there), so masks regenerate bit-identically anywhere.
// Keep rule: element `idx` of stream `stream` at training step `step` for layer `layer` under
// `seed` is kept iff its 16-bit draw >= threshold(ratio) = floor(ratio * 2^16) (at most 65535).
// Eight consecutive elements (group idx / 8) share one Philox call: draw idx % 8 = i is the low
// (i even) or high (i odd) half of word i / 2. 16-bit draws halve the Philox work of the 32-bit
// ones (the attention mask kernels are bound by it); the keep probability 1 - threshold / 2^16
// is within 2^-16 of 1 - ratio.
#pragma once
#if defined(__CUDACC_RTC__)
// NVRTC has no C library headers; these are the widths CUDA guarantees.
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define DSKC_HD __host__ __device__ __forceinline__
#else
#define DSKC_HD inline
#endif

namespace dskc_rng {

struct U32x4 {
  uint32_t x, y, z, w;
};

// The 64-bit product a·b as its high and low words. On the device as two 32-bit multiplies
// (mul.hi.u32, mul.lo.u32): from the 64-bit product NVRTC kept the whole Philox state in 64-bit
// registers (mul.lo.s64 of masked operands, 64-bit xors and shifts: ~2x the instructions in
// attn_dropout_bits and every other dropout kernel, bench/NOTES.md v24). The same bits either way.
DSKC_HD uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
#if defined(__CUDA_ARCH__)
  *hi = __umulhi(a, b);
  return a * b;
#else
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
#endif
}

// Philox4x32 with 10 rounds (Salmon et al., SC'11).
DSKC_HD U32x4 philox4x32_10(U32x4 ctr, uint32_t k0, uint32_t k1) {
  const uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  const uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#pragma unroll
#endif
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(kM0, ctr.x, &hi0);
    uint32_t lo1 = mulhilo(kM1, ctr.z, &hi1);
    ctr = U32x4{hi1 ^ ctr.y ^ k0, lo1, hi0 ^ ctr.w ^ k1, lo0};
    k0 += kW0;
    k1 += kW1;
  }
  return ctr;
}

// Streams: which dropout site a draw belongs to.
enum Stream : uint32_t { kStreamAttnProbs = 1, kStreamAttnOutput = 2, kStreamFfnOutput = 3 };

struct DropoutKey {
  uint64_t seed;
  uint32_t layer;
  uint32_t step;
};

// Elements sharing one Philox call.
constexpr int kDrawsPerCall = 8;

// The Philox output for elements [8*group, 8*group+8) of one stream (select_draw picks one).
DSKC_HD U32x4 dropout_draws(DropoutKey key, uint32_t stream, uint64_t group) {
  U32x4 ctr{static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), key.step,
            (key.layer << 4) ^ stream};
  return philox4x32_10(ctr, static_cast<uint32_t>(key.seed), static_cast<uint32_t>(key.seed >> 32));
}

DSKC_HD uint32_t dropout_threshold(double ratio) {
  double t = ratio * 65536.0;
  return t >= 65535.0 ? 65535u : static_cast<uint32_t>(t);
}

DSKC_HD uint32_t select_word(U32x4 d, int i) { return i == 0 ? d.x : i == 1 ? d.y : i == 2 ? d.z : d.w; }
// The 16-bit draw i (0..7) of one Philox output.
DSKC_HD uint32_t select_draw(U32x4 d, int i) { return (select_word(d, i >> 1) >> (16 * (i & 1))) & 0xFFFFu; }

// Scalar form (the CPU reference uses this; kernels use dropout_draws per group of eight).
DSKC_HD bool dropout_keep(DropoutKey key, uint32_t stream, uint64_t idx, uint32_t threshold) {
  return select_draw(dropout_draws(key, stream, idx >> 3), static_cast<int>(idx & 7)) >= threshold;
}

}  // namespace dskc_rng
