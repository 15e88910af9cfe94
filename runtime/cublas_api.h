// cuBLAS and cuBLASLt loaded with dlopen at first use, like the driver (runtime/driver.h): the
// dskc binary then starts in milliseconds and never maps the (large) BLAS libraries for
// compile / inspect / cache work. Call sites use blas().cublasXxx(...) with the library's own
// signatures (taken from its headers).
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>

namespace dskc {

struct BlasApi {
#define DSKC_BLAS_FN(name) decltype(&::name) name
  DSKC_BLAS_FN(cublasCreate);
  DSKC_BLAS_FN(cublasDestroy);
  DSKC_BLAS_FN(cublasSetStream);
  DSKC_BLAS_FN(cublasSetWorkspace);
  // Overloaded in the header (a C++ convenience overload): spelled out.
  cublasStatus_t (*cublasGemmBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                        const void*, const void* const[], cudaDataType, int, const void* const[],
                                        cudaDataType, int, const void*, void* const[], cudaDataType, int, int,
                                        cublasComputeType_t, cublasGemmAlgo_t);
  cublasStatus_t (*cublasGemmStridedBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                               const void*, const void*, cudaDataType, int, long long int,
                                               const void*, cudaDataType, int, long long int, const void*, void*,
                                               cudaDataType, int, long long int, int, cublasComputeType_t,
                                               cublasGemmAlgo_t);
  DSKC_BLAS_FN(cublasGetStatusName);
  DSKC_BLAS_FN(cublasLtCreate);
  DSKC_BLAS_FN(cublasLtDestroy);
  DSKC_BLAS_FN(cublasLtMatmul);
  DSKC_BLAS_FN(cublasLtMatmulAlgoGetHeuristic);
  DSKC_BLAS_FN(cublasLtMatmulAlgoCapGetAttribute);
  DSKC_BLAS_FN(cublasLtMatmulAlgoConfigSetAttribute);
  DSKC_BLAS_FN(cublasLtMatmulAlgoCheck);
  DSKC_BLAS_FN(cublasLtMatmulDescCreate);
  DSKC_BLAS_FN(cublasLtMatmulDescDestroy);
  DSKC_BLAS_FN(cublasLtMatmulDescSetAttribute);
  DSKC_BLAS_FN(cublasLtMatmulPreferenceCreate);
  DSKC_BLAS_FN(cublasLtMatmulPreferenceDestroy);
  DSKC_BLAS_FN(cublasLtMatmulPreferenceSetAttribute);
  DSKC_BLAS_FN(cublasLtMatrixLayoutCreate);
  DSKC_BLAS_FN(cublasLtMatrixLayoutDestroy);
#undef DSKC_BLAS_FN
};

// Loads libcublas / libcublasLt on first call; Error(Device) naming the library when missing.
const BlasApi& blas();

}  // namespace dskc
