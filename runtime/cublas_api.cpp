// dlopen loader for cuBLAS / cuBLASLt (see cublas_api.h).
#include "runtime/cublas_api.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>
#include <string>

#include "compiler/errors.h"
#include "runtime/dl_library.h"

namespace dskc {

namespace {
void* open_lib(const char* soname, const char* plain) {
  return dl::open(soname, plain, "the CUDA toolkit's cuBLAS", "add the toolkit's lib64 folder to LD_LIBRARY_PATH");
}
template <typename F>
void sym(void* lib, F& fn, const char* name) {
  dl::symbol(lib, fn, "cuBLAS", name);
}
}  // namespace

const BlasApi& blas() {
  static std::once_flag once;
  static BlasApi api;
  static std::string failure;
  std::call_once(once, [] {
    try {
      void* lt = open_lib("libcublasLt.so.13", "libcublasLt.so");
      void* b = open_lib("libcublas.so.13", "libcublas.so");
      sym(b, api.cublasCreate, "cublasCreate_v2");
      sym(b, api.cublasDestroy, "cublasDestroy_v2");
      sym(b, api.cublasSetStream, "cublasSetStream_v2");
      sym(b, api.cublasSetWorkspace, "cublasSetWorkspace_v2");
      sym(b, api.cublasGemmBatchedEx, "cublasGemmBatchedEx");
      sym(b, api.cublasGemmStridedBatchedEx, "cublasGemmStridedBatchedEx");
      sym(b, api.cublasGetStatusName, "cublasGetStatusName");
      sym(lt, api.cublasLtCreate, "cublasLtCreate");
      sym(lt, api.cublasLtDestroy, "cublasLtDestroy");
      sym(lt, api.cublasLtMatmul, "cublasLtMatmul");
      sym(lt, api.cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
      sym(lt, api.cublasLtMatmulAlgoCapGetAttribute, "cublasLtMatmulAlgoCapGetAttribute");
      sym(lt, api.cublasLtMatmulAlgoConfigSetAttribute, "cublasLtMatmulAlgoConfigSetAttribute");
      sym(lt, api.cublasLtMatmulAlgoCheck, "cublasLtMatmulAlgoCheck");
      sym(lt, api.cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate");
      sym(lt, api.cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy");
      sym(lt, api.cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
      sym(lt, api.cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
      sym(lt, api.cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
      sym(lt, api.cublasLtMatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
      sym(lt, api.cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
      sym(lt, api.cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
    } catch (const Error& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) throw Error(ErrorKind::Device, failure);
  return api;
}

}  // namespace dskc
