// Double-precision building blocks of the CPU reference layer and the CPU backend's model:
// linear, LayerNorm, GELU, forward and backward. Raw pointers over contiguous row-major
// buffers; loops are blocked over rows so each weight row is reused, and inner loops are
// contiguous axpys that the compiler vectorizes.
// Invariant: every backward ADDS into the parameter gradients it is given (dw, db) and
// overwrites dx.
#pragma once
#include <cstdint>
#include <vector>

#include "compiler/config.h"
#include "templates/common/philox.cuh"

namespace dskc::cpu_ops {

// y[n,o] = b[o] + Σ_i x[n,i]·w[o,i]   (x [n,in], w [out,in], b [out] or nullptr, y [n,out]).
void linear_forward(const double* x, const double* w, const double* b, int n, int in, int out, double* y);
// dx = dy·w (skipped when dx is nullptr); dw += dyᵀ·x; db += Σ_rows dy (skipped when nullptr).
void linear_backward(const double* dy, const double* x, const double* w, int n, int in, int out, double* dx,
                     double* dw, double* db);

// y = (x − mean)/sqrt(var + eps)·w + b per row of h (biased variance); records mean and rstd.
void layer_norm_forward(const double* x, const double* w, const double* b, int n, int h, double eps, double* y,
                        double* mean, double* rstd);
void layer_norm_backward(const double* dy, const double* x, const double* mean, const double* rstd, const double* w,
                         int n, int h, double* dx, double* dw, double* db);

// Keep flags (1 keep, 0 drop) of elements [0, count) of one dropout stream under the shared
// Philox rule, one Philox call per kDrawsPerCall elements as the kernels; empty when ratio <= 0.
std::vector<uint8_t> dropout_keep_mask(const dskc_rng::DropoutKey& key, uint32_t stream, uint64_t count,
                                       double ratio);

double gelu(double x, GeluForm form);
double gelu_grad(double x, GeluForm form);

}  // namespace dskc::cpu_ops
