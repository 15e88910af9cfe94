// dlopen loader for NCCL (see nccl_api.h).
#include "runtime/nccl_api.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>
#include <string>

#include "compiler/errors.h"
#include "runtime/dl_library.h"

namespace dskc {

namespace {
template <typename F>
void sym(void* lib, F& fn, const char* name) {
  dl::symbol(lib, fn, "libnccl", name, nullptr, ": NCCL too old?");
}
}  // namespace

const NcclApi& nccl() {
  static std::once_flag once;
  static NcclApi api;
  static std::string failure;
  std::call_once(once, [] {
    try {
      void* lib = dl::open("libnccl.so.2", "libnccl.so", "NCCL, needed for multi-GPU training",
                           "install NCCL or add its lib folder to LD_LIBRARY_PATH");
      sym(lib, api.ncclGetVersion, "ncclGetVersion");
      sym(lib, api.ncclGetUniqueId, "ncclGetUniqueId");
      sym(lib, api.ncclCommInitRank, "ncclCommInitRank");
      sym(lib, api.ncclCommDestroy, "ncclCommDestroy");
      sym(lib, api.ncclCommAbort, "ncclCommAbort");
      sym(lib, api.ncclCommGetAsyncError, "ncclCommGetAsyncError");
      sym(lib, api.ncclAllReduce, "ncclAllReduce");
      sym(lib, api.ncclGetErrorString, "ncclGetErrorString");
      sym(lib, api.ncclGetLastError, "ncclGetLastError");
    } catch (const Error& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) throw Error(ErrorKind::Device, failure);
  return api;
}

void throw_nccl_error(ncclResult_t r, const char* call, const char* file, int line) {
  const NcclApi& n = nccl();
  const char* last = n.ncclGetLastError(nullptr);
  throw Error(ErrorKind::Device, fmt::format("{} failed: {} ({}:{}){}{}", call, n.ncclGetErrorString(r), file, line,
                                             last && *last ? ": " : "", last ? last : ""));
}

}  // namespace dskc
