// Row-major GEMM front end over cuBLASLt (linear layers, with a fused bias epilogue) and cuBLAS
// batched GEMMs (attention, through device pointer arrays so Q/K/V are read in place from the
// [B, S, 3H] projection and the context is written straight into [B, S, H]).
// Convention: C[M,N] = alpha · op(A)[M,K] · op(B)[K,N] + beta · C, all row-major with leading
// dimensions in elements; fp32 accumulation for every dtype.
#pragma once
#include <cuda.h>

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "compiler/config.h"
#include "runtime/context.h"

namespace dskc {

struct GemmShape {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;
};

// Algorithm choice: by default cuBLASLt's first heuristic (the same kernel every run: bitwise
// reproducible). With `autotune` (stochastic_mode) the first call of each shape times up to 8
// heuristic candidates plus split-K variants (2, 3, 4 splits, parts summed out of place in fp32)
// of the first two, where cuBLASLt accepts them (cublasLtMatmulAlgoCheck; they help GEMMs with
// fewer output tiles than SMs, such as the weight gradients), on the real operands, and keeps the fastest if it beats the first
// choice by 2% or more, which may differ between processes; column sums (m = 1) are not tuned.
// Split-K needs an inner dimension of at least 256 per part (splitk_counts): with fewer k than
// parts, cuBLASLt 13.0 accepted algorithm 66 (cluster 2x4x1) with 4 splits of k = 3 (a weight
// gradient at batch 3, seq 1) and its kernel never finished on the H200.
// DSKC_GEMM_TUNE_LOG=1 prints each tuned shape's timings to stderr.
std::vector<int> splitk_counts(int k);

class Gemm {
 public:
  Gemm(Context& ctx, DType dtype, bool autotune = false);
  ~Gemm();
  // C = alpha·op(A)·op(B) + beta·C (+ bias[N] broadcast over rows when bias != 0).
  // bias_grad != 0 (weight gradients, op(A) = dYᵀ): also writes bias_grad[M] = Σ_rows dY, the
  // column sums of A, through cuBLASLt's BGRADB epilogue (fp16/bf16).
  // `lane`: the stream and workspace (default: the Context's main lane). Autotuning times the
  // candidates on the main stream and waits for them before the GEMM is enqueued on `lane`.
  void run(const GemmShape& s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, float alpha = 1.f, float beta = 0.f,
           CUdeviceptr bias = 0, CUdeviceptr bias_grad = 0, const GemmLane* lane = nullptr);
  // The tanh GELU in cuBLASLt's epilogues (cuBLASLt's GELU is the tanh form), beta = 0, for a C
  // whose leading dimension is a multiple of 8 (the aux matrix has C's shape and ld). With a bias:
  // C = GELU(op(A)·op(B) + bias[N]) and aux = op(A)·op(B) + bias (GELU_AUX_BIAS, forward); without:
  // C = (op(A)·op(B)) ⊙ GELU'(aux), aux the forward's pre-activation (DGELU, backward).
  void run_gelu(const GemmShape& s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr bias, CUdeviceptr aux);
  // Batched over device arrays of pointers (count entries each).
  void run_batched(const GemmShape& s, CUdeviceptr a_array, CUdeviceptr b_array, CUdeviceptr c_array, int count,
                   float alpha = 1.f, float beta = 0.f);
  // Batched over equally spaced operands: entry i uses a + i·stride_a, b + i·stride_b,
  // c + i·stride_c (strides in elements; cuBLAS strided-batched GEMM, fp32 accumulation).
  void run_strided_batched(const GemmShape& s, CUdeviceptr a, long long stride_a, CUdeviceptr b, long long stride_b,
                           CUdeviceptr c, long long stride_c, int count, float alpha = 1.f, float beta = 0.f);

 private:
  struct Plan;
  enum class Epilogue { None, Bias, BiasGrad, GeluAuxBias, DGelu };
  Plan& plan_for(const GemmShape& s, Epilogue epi, float beta, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c,
                 CUdeviceptr bias_ptr, CUdeviceptr aux);
  void launch(Plan& p, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, float alpha, float beta, CUdeviceptr bias,
              CUdeviceptr aux, const void* algo, const GemmLane& lane);
  Context& ctx_;
  DType dtype_;
  bool autotune_;
  bool tune_log_;  // DSKC_GEMM_TUNE_LOG=1
  std::map<std::tuple<bool, bool, int, int, int, int, int, int, int, bool>, std::unique_ptr<Plan>> plans_;
};

}  // namespace dskc
