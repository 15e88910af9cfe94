// dlopen loader for NCCL (see nccl_api.h).
#include "runtime/nccl_api.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>
#include <string>

#include "compiler/errors.h"

namespace dskc {

namespace {
template <typename F>
void sym(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) throw Error(ErrorKind::Device, fmt::format("libnccl has no symbol {}: NCCL too old?", name));
}
}  // namespace

const NcclApi& nccl() {
  static std::once_flag once;
  static NcclApi api;
  static std::string failure;
  std::call_once(once, [] {
    try {
      void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
      if (!lib) lib = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
      if (!lib)
        throw Error(ErrorKind::Device,
                    fmt::format("cannot load libnccl.so.2 (NCCL, needed for multi-GPU training): {}; install NCCL or "
                                "add its lib folder to LD_LIBRARY_PATH",
                                dlerror()));
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
