// Host mirrors of the model module's params structs (templates/model/*.cuh), passed by value
// to cuLaunchKernel. Member order and types must match the device structs exactly; the sizes
// are pinned here and by static_asserts in the generated source (compiler/model_codegen.cpp),
// so host and device cannot drift apart silently.
#pragma once
#include <cstdint>

#include "runtime/kernel_params.h"

namespace dskc::mkp {

using Ptr = const void*;
using MPtr = void*;
using kp::DropoutArgs;

struct EmbeddingFwd {
  Ptr input_ids, segment_ids, word, pos, type, gamma, beta;
  float *sum, *mean, *rstd;
  MPtr out;
  DropoutArgs rng;
  int rows, seq;
};
struct LnFwd {
  Ptr x, gamma, beta;
  MPtr y;
  float *mean, *rstd;
  int rows;
};
struct LnBwd {
  MPtr dy;
  Ptr x;
  const float *mean, *rstd;
  Ptr gamma, gelu_in;
  MPtr dx;
  DropoutArgs rng;
  int rows;
};
struct LnParamGrad {
  Ptr dy, x;
  const float *mean, *rstd;
  float *dgamma, *dbeta, *part;
  int rows, chunk_rows;
};
struct GatherRows {
  Ptr src;
  const int* idx;
  MPtr dst;
  int n;
};
struct Activation {
  Ptr x;
  MPtr y;
  uint64_t n;
};
struct Xent {
  MPtr logits;
  const int* labels;
  float* loss;
  float coef;
  int rows, cols, ld;
};
struct Nsp {
  Ptr pooled, w, b;
  const int* labels;
  float *loss, *dl;
  MPtr dpooled;
  float coef;
  int batch;
};
struct NspParamGrad {
  Ptr pooled;
  const float* dl;
  float *dw, *db;
  int batch;
};
struct HeadScatter {
  MPtr dy;
  Ptr dcls, dhm;
  const int *pred_start, *pred_rows;
  int seq;
};
struct Cast {
  const float* src;
  MPtr dst;
  uint64_t n;
};
struct Accumulate {
  Ptr src;
  float* dst;
  uint64_t n;
};
struct AddPair {
  Ptr a, b;
  float* dst;
  uint64_t n;
};
struct ColSum {
  Ptr src;
  float* dst;
  int rows, cols, ld;
};
struct GroupedRowsPart {
  const float* src;
  const int *member, *piece;
  float* part;
  int pieces;
};
struct GroupedRowsFinish {
  const float* part;
  const int *target, *group_piece;
  float* dst;
  int groups;
};
struct GroupedRowsCompact {
  const float* src;
  const int *group, *start, *member;
  MPtr dst;
  int n;
};
struct ScatterRows {
  Ptr src;
  const int* target;
  float* dst;
  int n;
};
struct SumSqRange {
  const void* x;
  uint64_t n;
  int32_t f32, pad;
};
struct SumSq {
  const SumSqRange* ranges;
  double* part;
  int32_t parts;
};
struct ReducePartials {
  const double* part;
  double* out;
  int parts, stride;
};
struct Adam {
  float* p;
  const float* g;
  float *m, *v;
  double gmul, beta1, beta2, bc1, sqrt_bc2, eps, lr, wd;
  uint64_t n;
};
struct AdamSegment {
  uint64_t offset, n, first_chunk;
  MPtr dst;
  const void* gsrc;
  int32_t decay, parts;  // parts: the Lamb stage-1 table's blocks of the tensor (0 in Adam's)
};
struct AdamMulti {
  float* p;
  const float* g;
  float *m, *v;
  const AdamSegment* segs;
  double gmul, beta1, beta2, bc1, sqrt_bc2, eps, lr, wd;
  uint64_t chunk;
  int n_segs;
  int dtype_grads;
};
struct Lamb {
  float* p;
  const float* g;
  float *m, *v;
  double* part;
  double gmul, beta1, beta2, eps, wd, step_size, max_coeff, min_coeff;
  uint64_t n;
  int parts;
};
struct LambMulti {
  float* p;
  const float* g;
  float *m, *v;
  const AdamSegment *segs1, *segs2;
  double *part, *trust;
  double gmul, beta1, beta2, eps, wd, step_size, max_coeff, min_coeff;
  uint64_t chunk;
  int n_segs;
  int dtype_grads;
};

static_assert(sizeof(EmbeddingFwd) == 112);
static_assert(sizeof(LnFwd) == 56);
static_assert(sizeof(LnBwd) == 80);
static_assert(sizeof(LnParamGrad) == 64);
static_assert(sizeof(GatherRows) == 32);
static_assert(sizeof(Activation) == 24);
static_assert(sizeof(Xent) == 40);
static_assert(sizeof(Nsp) == 64);
static_assert(sizeof(NspParamGrad) == 40);
static_assert(sizeof(HeadScatter) == 48);
static_assert(sizeof(Cast) == 24);
static_assert(sizeof(Accumulate) == 24);
static_assert(sizeof(AddPair) == 32);
static_assert(sizeof(ColSum) == 32);
static_assert(sizeof(GroupedRowsPart) == 40);
static_assert(sizeof(GroupedRowsFinish) == 40);
static_assert(sizeof(GroupedRowsCompact) == 48);
static_assert(sizeof(ScatterRows) == 32);
static_assert(sizeof(SumSq) == 24);
static_assert(sizeof(ReducePartials) == 24);
static_assert(sizeof(Adam) == 104);
static_assert(sizeof(SumSqRange) == 24);
static_assert(sizeof(AdamSegment) == 48);
static_assert(sizeof(AdamMulti) == 120);
static_assert(sizeof(Lamb) == 120);
static_assert(sizeof(LambMulti) == 144);

}  // namespace dskc::mkp
