// Host-side conversions between float and the 16-bit storage formats: IEEE binary16 (fp16) and
// bfloat16, both round-to-nearest-even, with subnormals, infinities and NaN handled as the CUDA
// intrinsics __float2half_rn / __float2bfloat16_rn do (NaN stays NaN, made quiet).
// Doubles convert with one correct rounding: plain double -> float -> half can round twice
// wrongly (1 + 2^-11 + 2^-40 would go to 1.0), so the double -> float step rounds to odd, which
// makes the second rounding exact-as-if-direct whenever the intermediate has >= 2 more bits
// (24 vs 11 or 8, and float subnormals are far finer than half/bf16 ones).
// round_to_dtype(x, t) is the value x takes when stored as t. Header-only, plain C++.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "compiler/config.h"

namespace dskc {

// float -> IEEE binary16 bits, round to nearest even. Overflow gives +-inf.
inline uint16_t float_to_half_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax >= 0x7F800000u) {  // inf or NaN; NaN keeps its top payload bits and is made quiet
    return static_cast<uint16_t>(sign | (ax > 0x7F800000u ? 0x7E00u | ((ax >> 13) & 0x3FFu) : 0x7C00u));
  }
  if (ax >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520 rounds to inf
  if (ax >= 0x38800000u) {  // normal half (>= 2^-14): rebias exponent 127 -> 15, round 13 bits
    uint32_t h = (ax - 0x38000000u) >> 13;
    const uint32_t rem = ax & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry into exponent is correct
    return static_cast<uint16_t>(sign | h);
  }
  if (ax <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25: ties to even gives 0
  // Subnormal half: value = h * 2^-24. Float value = m * 2^(e - 150) with implicit bit in m.
  const uint32_t e = ax >> 23;
  const uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;  // in [14, 24]
  uint32_t h = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (h & 1u))) ++h;  // h == 0x400 is the smallest normal: fine
  return static_cast<uint16_t>(sign | h);
}

// IEEE binary16 bits -> float (exact).
inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu;
  const uint32_t m = h & 0x3FFu;
  if (e == 0x1Fu) return std::bit_cast<float>(sign | 0x7F800000u | (m << 13));
  if (e == 0) {
    const float v = std::ldexp(static_cast<float>(m), -24);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

// float -> bfloat16 bits, round to nearest even. NaN stays NaN (quiet).
inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint32_t rounded = x + 0x7FFFu + ((x >> 16) & 1u);  // overflow carries into inf: correct
  return static_cast<uint16_t>(rounded >> 16);
}

// bfloat16 bits -> float (exact).
inline float bf16_bits_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// double -> float rounding to odd: exact values pass through; otherwise the neighbour (of the
// two floats around x) whose last mantissa bit is 1. Overflow saturates to +-FLT_MAX (odd).
inline float double_to_float_round_odd(double x) {
  float f = static_cast<float>(x);
  if (std::isnan(x) || static_cast<double>(f) == x) return f;
  if (std::isinf(f)) {
    f = std::copysign(std::numeric_limits<float>::max(), f);
  } else if (std::fabs(static_cast<double>(f)) > std::fabs(x)) {
    f = std::nextafter(f, 0.0f);  // truncate toward zero
  }
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

inline uint16_t double_to_half_bits(double x) { return float_to_half_bits(double_to_float_round_odd(x)); }
inline uint16_t double_to_bf16_bits(double x) { return float_to_bf16_bits(double_to_float_round_odd(x)); }

// The value of x after storing it as type t (fp32: round to float; fp16/bf16: to those formats).
inline double round_to_dtype(double x, DType t) {
  switch (t) {
    case DType::F16: return half_bits_to_float(double_to_half_bits(x));
    case DType::BF16: return bf16_bits_to_float(double_to_bf16_bits(x));
    case DType::F32: break;
  }
  return static_cast<float>(x);
}

}  // namespace dskc
