// Host mirrors of the plain layer's kernel params structs (templates/plain/*.cuh), passed by
// value to cuLaunchKernel. Member order and types must match the device structs exactly; sizes
// are pinned here and in the generated source (compiler/plain_codegen.cpp).
#pragma once
#include <cstdint>

#include "runtime/kernel_params.h"

namespace dskc::pkp {

using Ptr = const void*;
using MPtr = void*;

struct BiasAdd {
  Ptr x, bias;
  MPtr y;
  uint64_t n;
  int cols;
};
struct Add {
  Ptr a, b;
  MPtr y;
  uint64_t n;
};
struct Dropout {
  Ptr x;
  MPtr y;
  uint64_t n;
  kp::DropoutArgs rng;
  uint32_t stream;
};
struct GeluFwd {
  Ptr x;
  MPtr y;
  uint64_t n;
};
struct GeluBwd {
  Ptr dy, x;
  MPtr dx;
  uint64_t n;
};
struct MaskAdd {
  MPtr scores;
  Ptr mask;
  int batch, heads, seq;
};
struct ColSum {
  Ptr x;
  MPtr out;
  int rows, cols;
};
struct LnFwd {
  Ptr x, gamma, beta;
  MPtr y;
  float *mean, *rstd;
  int rows, cols;
};
struct LnBwd {
  Ptr dy, x;
  const float *mean, *rstd;
  Ptr gamma;
  MPtr dx;
  int rows, cols;
};
struct LnParamGrad {
  Ptr dy, x;
  const float *mean, *rstd;
  MPtr dgamma, dbeta;
  int rows, cols;
};
struct SoftmaxFwd {
  Ptr x;
  MPtr y;
  int rows, cols;
};
struct SoftmaxBwd {
  Ptr dy, y;
  MPtr dx;
  int rows, cols;
};
struct Heads {
  Ptr src;
  MPtr dst;
  int batch, seq, heads, head_dim, ld, col0;
};

static_assert(sizeof(BiasAdd) == 40);
static_assert(sizeof(Add) == 32);
static_assert(sizeof(Dropout) == 48);
static_assert(sizeof(GeluFwd) == 24);
static_assert(sizeof(GeluBwd) == 32);
static_assert(sizeof(MaskAdd) == 32);
static_assert(sizeof(ColSum) == 24);
static_assert(sizeof(LnFwd) == 56);
static_assert(sizeof(LnBwd) == 56);
static_assert(sizeof(LnParamGrad) == 56);
static_assert(sizeof(SoftmaxFwd) == 24);
static_assert(sizeof(SoftmaxBwd) == 32);
static_assert(sizeof(Heads) == 40);

}  // namespace dskc::pkp
