// NCCL loaded with dlopen at first use, like the driver and cuBLAS (runtime/driver.h,
// runtime/cublas_api.h): single-process dskc never maps libnccl, and a machine without it only
// fails when a multi-process job starts. Call sites use nccl().ncclXxx(...) with the library's
// own signatures; DSKC_NCCL(call) turns a failed call into Error(Device) naming the call, the
// NCCL error string and, where NCCL has one, its last error message.
// The few NCCL 2.x ABI types used are declared here (values from nccl.h), so building dskc needs
// no NCCL headers: machines whose CUDA toolkit lacks nccl.h build the same binary.
#pragma once
#include <cuda.h>

#include <cstddef>

namespace dskc {

using ncclComm_t = struct ncclComm*;
struct ncclUniqueId {
  char internal[128];  // NCCL_UNIQUE_ID_BYTES
};
enum ncclResult_t : int { ncclSuccess = 0, ncclInProgress = 7 };
enum ncclRedOp_t : int { ncclSum = 0, ncclMax = 2 };
enum ncclDataType_t : int { ncclInt32 = 2, ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9 };

struct NcclApi {
  ncclResult_t (*ncclGetVersion)(int*);
  ncclResult_t (*ncclGetUniqueId)(ncclUniqueId*);
  ncclResult_t (*ncclCommInitRank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*ncclCommDestroy)(ncclComm_t);
  ncclResult_t (*ncclCommAbort)(ncclComm_t);
  ncclResult_t (*ncclCommGetAsyncError)(ncclComm_t, ncclResult_t*);
  // cudaStream_t and CUstream are the same handle type.
  ncclResult_t (*ncclAllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, CUstream);
  const char* (*ncclGetErrorString)(ncclResult_t);
  const char* (*ncclGetLastError)(ncclComm_t);
};

// Loads libnccl.so.2 on first call; Error(Device) naming the library when it is missing.
const NcclApi& nccl();

[[noreturn]] void throw_nccl_error(ncclResult_t r, const char* call, const char* file, int line);

}  // namespace dskc

#define DSKC_NCCL(call)                                                                 \
  do {                                                                                  \
    ncclResult_t r_ = ::dskc::nccl().call;                                              \
    if (r_ != ncclSuccess) ::dskc::throw_nccl_error(r_, #call, __FILE__, __LINE__);     \
  } while (0)
