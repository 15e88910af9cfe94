// Session 48 (throwaway): the attention keep-bit words' Philox cost in isolation. One kernel per
// variant, the same work as attn_dropout_bits at (16,512) (B·heads·S·S/32 words, 4 Philox calls
// each): base (as templates/common/philox.cuh + flash::keep8), WIDE (mul.wide.u32 for hi and lo),
// SWAR (the eight compares on the raw words: hi half x >= T<<16, lo half x<<16 >= T<<16), and
// Philox rounds R. Prints ms per launch and whether the words equal base's.
//   nvcc -arch=sm_90 -O3 -o pb philox_bench.cu && ./pb
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>
struct U4 { uint32_t x, y, z, w; };
template <bool kWide>
__device__ __forceinline__ uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  if (kWide) {
    uint64_t p;
    asm("mul.wide.u32 %0, %1, %2;" : "=l"(p) : "r"(a), "r"(b));
    *hi = static_cast<uint32_t>(p >> 32);
    return static_cast<uint32_t>(p);
  }
  *hi = __umulhi(a, b);
  return a * b;
}
template <int kRounds, bool kWide>
__device__ __forceinline__ U4 philox(U4 ctr, uint32_t k0, uint32_t k1) {
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo<kWide>(0xD2511F53u, ctr.x, &hi0);
    uint32_t lo1 = mulhilo<kWide>(0xCD9E8D57u, ctr.z, &hi1);
    ctr = U4{hi1 ^ ctr.y ^ k0, lo1, hi0 ^ ctr.w ^ k1, lo0};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return ctr;
}
__device__ __forceinline__ uint32_t sel(U4 d, int i) { return i == 0 ? d.x : i == 1 ? d.y : i == 2 ? d.z : d.w; }
constexpr uint32_t kT = 6553u;  // floor(0.1 * 2^16)
template <int kRounds, bool kWide, bool kSwar>
__device__ __forceinline__ uint32_t keep8(uint64_t seed, uint32_t step, uint32_t layer, uint64_t g) {
  const U4 d = philox<kRounds, kWide>(U4{static_cast<uint32_t>(g), static_cast<uint32_t>(g >> 32), step, (layer << 4) ^ 1u},
                                      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  uint32_t v = 0;
  if (kSwar) {
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t x = sel(d, w);
      v |= static_cast<uint32_t>((x << 16) >= (kT << 16)) << (2 * w);
      v |= static_cast<uint32_t>(x >= (kT << 16)) << (2 * w + 1);
    }
  } else {
#pragma unroll
    for (int w = 0; w < 8; ++w) v |= static_cast<uint32_t>(((sel(d, w >> 1) >> (16 * (w & 1))) & 0xFFFFu) >= kT) << w;
  }
  return v;
}
template <int kRounds, bool kWide, bool kSwar>
__global__ void bits(uint32_t* out, uint64_t seed, uint32_t step, uint32_t layer, size_t n) {
  for (size_t c = blockIdx.x * size_t(blockDim.x) + threadIdx.x; c < n; c += size_t(gridDim.x) * blockDim.x) {
    const uint64_t g0 = (static_cast<uint64_t>(c) * 32) >> 3;
    uint32_t v = keep8<kRounds, kWide, kSwar>(seed, step, layer, g0);
#pragma unroll
    for (int k = 1; k <= 3; ++k) v |= keep8<kRounds, kWide, kSwar>(seed, step, layer, g0 + k) << (8 * k);
    out[c] = v;
  }
}
template <int kRounds, bool kWide, bool kSwar>
void run(const char* name, uint32_t* d, size_t n, std::vector<uint32_t>* ref) {
  const int blocks = static_cast<int>((n + 255) / 256);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 5; ++i) bits<kRounds, kWide, kSwar><<<blocks, 256>>>(d, 0x1234567890ull, 7, 3, n);
  float best = 1e9f;
  for (int rep = 0; rep < 5; ++rep) {
    cudaEventRecord(a);
    for (int i = 0; i < 20; ++i) bits<kRounds, kWide, kSwar><<<blocks, 256>>>(d, 0x1234567890ull, 7, 3, n);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    best = ms / 20 < best ? ms / 20 : best;
  }
  std::vector<uint32_t> h(n);
  cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost);
  if (ref->empty()) *ref = h;
  size_t ones = 0;
  for (uint32_t w : h) ones += __builtin_popcount(w);
  std::printf("%-16s %.4f ms  same as base: %s  kept %.5f\n", name, best, h == *ref ? "yes" : "no",
              double(ones) / (32.0 * n));
}
int main() {
  const size_t n = size_t(16) * 16 * 512 * 512 / 32;  // (16,512): B·heads·S·S/32 words
  uint32_t* d;
  cudaMalloc(&d, n * 4);
  std::vector<uint32_t> ref;
  for (int round = 0; round < 2; ++round) {
    run<10, false, false>("base", d, n, &ref);
    run<10, true, false>("wide", d, n, &ref);
    run<10, false, true>("swar", d, n, &ref);
    run<10, true, true>("wide+swar", d, n, &ref);
    std::vector<uint32_t> r7;
    run<7, false, false>("rounds7", d, n, &r7);
    run<7, true, true>("rounds7+wide+swar", d, n, &r7);
  }
  return 0;
}
