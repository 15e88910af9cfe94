// Gemm implementation: row-major C = op(A)·op(B) is computed as column-major Cᵀ = op(B)ᵀ·op(A)ᵀ,
// i.e. cuBLAS sees (B, A) swapped with m = N, n = M. cuBLASLt plans (descriptors + the
// heuristic's algorithm) are cached per shape.
#include "runtime/gemm.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "compiler/env_choice.h"
#include "compiler/errors.h"
#include "runtime/cublas_api.h"
#include "runtime/driver.h"

namespace dskc {

namespace {
cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}
cublasOperation_t op(bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }
}  // namespace

std::vector<int> splitk_counts(int k) {
  constexpr int kMinPartDepth = 256;
  std::vector<int> out;
  for (int splits : {2, 3, 4})
    if (k >= splits * kMinPartDepth) out.push_back(splits);
  return out;
}

struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (desc) blas().cublasLtMatmulDescDestroy(desc);
    if (a) blas().cublasLtMatrixLayoutDestroy(a);
    if (b) blas().cublasLtMatrixLayoutDestroy(b);
    if (c) blas().cublasLtMatrixLayoutDestroy(c);
  }
};

Gemm::Gemm(Context& ctx, DType dtype, bool autotune)
    : ctx_(ctx),
      dtype_(dtype),
      autotune_(autotune),
      tune_log_(autotune && env_choice("DSKC_GEMM_TUNE_LOG", false, {{"0", false}, {"1", true}},
                                       "\"1\" (print each autotuned GEMM's timings) or \"0\"")) {}
Gemm::~Gemm() = default;

Gemm::Plan& Gemm::plan_for(const GemmShape& s, Epilogue epi, float beta, CUdeviceptr a, CUdeviceptr b,
                           CUdeviceptr c, CUdeviceptr bias_ptr, CUdeviceptr aux) {
  auto key = std::make_tuple(s.trans_a, s.trans_b, s.m, s.n, s.k, s.lda, s.ldb, s.ldc, static_cast<int>(epi),
                             beta != 0.f);
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  auto p = std::make_unique<Plan>();
  const cudaDataType_t t = cuda_type(dtype_);
  // Column-major view: D[m=N, n=M] = op(B)ᵀ[N,K] · op(A)ᵀ[K,M].
  DSKC_CUBLAS(blas().cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = op(s.trans_b), tb = op(s.trans_a);
  DSKC_CUBLAS(blas().cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  DSKC_CUBLAS(blas().cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (epi != Epilogue::None) {
    // Column-major view: BIAS adds along D's rows (our N); BGRADB sums cuBLAS's B (our A) over k.
    // The GELU epilogues' aux matrix has D's shape: [N, M] column-major with C's leading dimension.
    const cublasLtEpilogue_t e = epi == Epilogue::Bias          ? CUBLASLT_EPILOGUE_BIAS
                                 : epi == Epilogue::BiasGrad    ? CUBLASLT_EPILOGUE_BGRADB
                                 : epi == Epilogue::GeluAuxBias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                                                : CUBLASLT_EPILOGUE_DGELU;
    DSKC_CUBLAS(blas().cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)));
    if (epi != Epilogue::DGelu) {
      cudaDataType_t bt = t;
      DSKC_CUBLAS(
          blas().cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
    }
    if (epi == Epilogue::GeluAuxBias || epi == Epilogue::DGelu) {
      DSKC_ASSERT(s.ldc % 8 == 0, "cuBLASLt's GELU aux matrix needs a leading dimension divisible by 8");
      const int64_t ld = s.ldc;
      DSKC_CUBLAS(blas().cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
      // The heuristic reads the pointer's alignment.
      void* ap = reinterpret_cast<void*>(aux);
      DSKC_CUBLAS(
          blas().cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &ap, sizeof(ap)));
    }
  }
  // Stored shapes (column-major rows x cols): B as op's input is [N,K] if !trans_b else [K,N].
  DSKC_CUBLAS(blas().cublasLtMatrixLayoutCreate(&p->a, t, s.trans_b ? s.k : s.n, s.trans_b ? s.n : s.k, s.ldb));
  DSKC_CUBLAS(blas().cublasLtMatrixLayoutCreate(&p->b, t, s.trans_a ? s.m : s.k, s.trans_a ? s.k : s.m, s.lda));
  DSKC_CUBLAS(blas().cublasLtMatrixLayoutCreate(&p->c, t, s.n, s.m, s.ldc));
  cublasLtMatmulPreference_t pref;
  DSKC_CUBLAS(blas().cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = ctx_.lt_workspace_bytes();
  DSKC_CUBLAS(blas().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t res[kCandidates]{};
  int found = 0;
  // Timing runs overwrite C: only when C is not read. Column sums (m = 1, the bias gradients) are
  // memory-bound and take the heuristic's first choice in both modes.
  const bool tune = autotune_ && beta == 0.f && s.m > 1;
  cublasStatus_t st = blas().cublasLtMatmulAlgoGetHeuristic(ctx_.cublaslt(), p->desc, p->a, p->b, p->c, p->c, pref,
                                                     tune ? kCandidates : 1, res, &found);
  blas().cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    throw Error(ErrorKind::Device, fmt::format("cuBLASLt has no algorithm for GEMM m={} n={} k={} ({})", s.m, s.n,
                                               s.k, blas().cublasGetStatusName(st)));
  p->algo = res[0].algo;
  if (tune) {
    // Candidates: the heuristic's list, then split-K variants of its first two entries.
    struct Candidate {
      cublasLtMatmulAlgo_t algo;
      int splits;
    };
    std::vector<Candidate> cand;
    for (int i = 0; i < found; ++i)
      if (res[i].state == CUBLAS_STATUS_SUCCESS) cand.push_back({res[i].algo, 1});
    for (int i = 0; i < std::min(found, 2); ++i) {
      int32_t splitk_ok = 0;
      uint32_t schemes = 0;
      size_t got = 0;
      if (blas().cublasLtMatmulAlgoCapGetAttribute(&res[i].algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splitk_ok,
                                                   sizeof(splitk_ok), &got) != CUBLAS_STATUS_SUCCESS ||
          !splitk_ok)
        continue;
      blas().cublasLtMatmulAlgoCapGetAttribute(&res[i].algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes,
                                               sizeof(schemes), &got);
      // Only algorithms that sum the parts out of place in the compute type (fp32): the in-place
      // scheme orders the parts through counters in the workspace (thread blocks that wait on one
      // another), and no split-K variant has ever won in the layer. The hang that was first blamed
      // on it came from too many splits of a tiny k (splitk_counts).
      if (!(schemes & CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE)) continue;
      const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      for (int32_t splits : splitk_counts(s.k)) {
        cublasLtMatmulAlgo_t algo = res[i].algo;
        cublasLtMatmulHeuristicResult_t check{};
        if (blas().cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                                        sizeof(splits)) != CUBLAS_STATUS_SUCCESS ||
            blas().cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                        sizeof(scheme)) != CUBLAS_STATUS_SUCCESS ||
            blas().cublasLtMatmulAlgoCheck(ctx_.cublaslt(), p->desc, p->a, p->b, p->c, p->c, &algo, &check) !=
                CUBLAS_STATUS_SUCCESS ||
            check.workspaceSize > ws)
          continue;
        cand.push_back({algo, splits});
      }
    }
    const GemmLane main = ctx_.main_lane();
    CUevent e0, e1;
    DSKC_CU(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    DSKC_CU(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    // Each candidate's time is the least of three rounds of 3 runs (after a warm-up), and one
    // replaces the heuristic's first choice only when it is at least 2% faster: run-to-run noise
    // must not pick a slower kernel than the default mode's.
    auto time_of = [&](const cublasLtMatmulAlgo_t& algo) {
      launch(*p, a, b, c, 1.f, 0.f, bias_ptr, aux, &algo, main);  // warm-up
      float least = 1e30f;
      for (int round = 0; round < 3; ++round) {
        DSKC_CU(cuEventRecord(e0, ctx_.stream()));
        for (int r = 0; r < 3; ++r) launch(*p, a, b, c, 1.f, 0.f, bias_ptr, aux, &algo, main);
        DSKC_CU(cuEventRecord(e1, ctx_.stream()));
        DSKC_CU(cuEventSynchronize(e1));
        float ms = 0;
        DSKC_CU(cuEventElapsedTime(&ms, e0, e1));
        least = std::min(least, ms);
      }
      return least / 3;
    };
    const float first = time_of(cand[0].algo);
    float best = first;
    size_t chosen = 0;
    for (size_t i = 1; i < cand.size(); ++i) {
      const float ms = time_of(cand[i].algo);
      if (ms < best && ms < 0.98f * first) {
        best = ms;
        chosen = i;
      }
    }
    p->algo = cand[chosen].algo;
    if (tune_log_)
      fmt::print(stderr,
                 "dskc gemm autotune: m={} n={} k={}{}: heuristic first {:.4f} ms; {} candidates; chosen #{} "
                 "{:.4f} ms{}\n",
                 s.m, s.n, s.k, epi == Epilogue::BiasGrad      ? " (bias gradient)"
                 : epi == Epilogue::Bias        ? " (bias)"
                 : epi == Epilogue::GeluAuxBias ? " (bias + GELU)"
                 : epi == Epilogue::DGelu       ? " (GELU gradient)"
                                                : "",
                 first, cand.size(), chosen, best,
                 cand[chosen].splits > 1 ? fmt::format(" (split-K {})", cand[chosen].splits) : std::string());
    driver().cuEventDestroy(e0);
    driver().cuEventDestroy(e1);
  }
  auto& ref = *p;
  plans_.emplace(key, std::move(p));
  return ref;
}

void Gemm::launch(Plan& p, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, float alpha, float beta, CUdeviceptr bias,
                  CUdeviceptr aux, const void* algo, const GemmLane& lane) {
  if (bias) {
    void* bp = reinterpret_cast<void*>(bias);
    DSKC_CUBLAS(blas().cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)));
  }
  if (aux) {
    void* ap = reinterpret_cast<void*>(aux);
    DSKC_CUBLAS(blas().cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &ap, sizeof(ap)));
  }
  DSKC_CUBLAS(blas().cublasLtMatmul(ctx_.cublaslt(), p.desc, &alpha, reinterpret_cast<const void*>(b), p.a,
                             reinterpret_cast<const void*>(a), p.b, &beta, reinterpret_cast<void*>(c), p.c,
                             reinterpret_cast<void*>(c), p.c, static_cast<const cublasLtMatmulAlgo_t*>(algo),
                             reinterpret_cast<void*>(lane.workspace), lane.workspace_bytes,
                             reinterpret_cast<cudaStream_t>(lane.stream)));
}

void Gemm::run(const GemmShape& s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, float alpha, float beta,
               CUdeviceptr bias, CUdeviceptr bias_grad, const GemmLane* lane) {
  DSKC_ASSERT(!(bias && bias_grad), "a GEMM takes a bias or computes a bias gradient, not both");
  const Epilogue epi = bias ? Epilogue::Bias : bias_grad ? Epilogue::BiasGrad : Epilogue::None;
  const CUdeviceptr vec = bias ? bias : bias_grad;
  Plan& p = plan_for(s, epi, beta, a, b, c, vec, 0);
  launch(p, a, b, c, alpha, beta, vec, 0, &p.algo, lane ? *lane : ctx_.main_lane());
}

void Gemm::run_gelu(const GemmShape& s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr bias,
                    CUdeviceptr aux) {
  DSKC_ASSERT(aux, "the GELU epilogues write (forward) or read (backward) the pre-activation aux matrix");
  Plan& p = plan_for(s, bias ? Epilogue::GeluAuxBias : Epilogue::DGelu, 0.f, a, b, c, bias, aux);
  launch(p, a, b, c, 1.f, 0.f, bias, aux, &p.algo, ctx_.main_lane());
}

void Gemm::run_batched(const GemmShape& s, CUdeviceptr a_array, CUdeviceptr b_array, CUdeviceptr c_array, int count,
                       float alpha, float beta) {
  const cudaDataType_t t = cuda_type(dtype_);
  DSKC_CUBLAS(blas().cublasGemmBatchedEx(ctx_.cublas(), op(s.trans_b), op(s.trans_a), s.n, s.m, s.k, &alpha,
                                  reinterpret_cast<const void* const*>(b_array), t, s.ldb,
                                  reinterpret_cast<const void* const*>(a_array), t, s.lda, &beta,
                                  reinterpret_cast<void* const*>(c_array), t, s.ldc, count, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
}

void Gemm::run_strided_batched(const GemmShape& s, CUdeviceptr a, long long stride_a, CUdeviceptr b,
                               long long stride_b, CUdeviceptr c, long long stride_c, int count, float alpha,
                               float beta) {
  // Column-major view as in run(): Cᵀ = op(B)ᵀ·op(A)ᵀ, so cuBLAS gets (B, A) with m = N, n = M.
  const cudaDataType_t t = cuda_type(dtype_);
  DSKC_CUBLAS(blas().cublasGemmStridedBatchedEx(ctx_.cublas(), op(s.trans_b), op(s.trans_a), s.n, s.m, s.k, &alpha,
                                                reinterpret_cast<const void*>(b), t, s.ldb, stride_b,
                                                reinterpret_cast<const void*>(a), t, s.lda, stride_a, &beta,
                                                reinterpret_cast<void*>(c), t, s.ldc, stride_c, count,
                                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace dskc
