// dlopen-based loader for the CUDA driver API (see driver.h).
#include "runtime/driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>

#include "compiler/errors.h"
#include "runtime/dl_library.h"

namespace dskc {

namespace {
template <typename F>
void load_sym(void* lib, F& fn, const char* name, const char* alt = nullptr) {
  dl::symbol(lib, fn, "libcuda", name, alt, ": driver too old?");
}

DriverApi load_driver() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    throw Error(ErrorKind::Device,
                "no CUDA device: the NVIDIA driver (libcuda.so.1) is not installed on this machine; "
                "use --backend cpu, or run on a machine with an NVIDIA GPU");
  DriverApi d{};
  load_sym(lib, d.cuInit, "cuInit");
  load_sym(lib, d.cuDeviceGetCount, "cuDeviceGetCount");
  load_sym(lib, d.cuDeviceGet, "cuDeviceGet");
  load_sym(lib, d.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  load_sym(lib, d.cuDeviceGetName, "cuDeviceGetName");
  load_sym(lib, d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  load_sym(lib, d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
  load_sym(lib, d.cuCtxSetCurrent, "cuCtxSetCurrent");
  load_sym(lib, d.cuCtxGetCurrent, "cuCtxGetCurrent");
  load_sym(lib, d.cuCtxSynchronize, "cuCtxSynchronize");
  load_sym(lib, d.cuModuleLoadData, "cuModuleLoadData");
  load_sym(lib, d.cuModuleUnload, "cuModuleUnload");
  load_sym(lib, d.cuModuleGetFunction, "cuModuleGetFunction");
  load_sym(lib, d.cuFuncGetAttribute, "cuFuncGetAttribute");
  load_sym(lib, d.cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  load_sym(lib, d.cuOccupancyMaxActiveClusters, "cuOccupancyMaxActiveClusters");
  load_sym(lib, d.cuLaunchKernel, "cuLaunchKernel");
  load_sym(lib, d.cuMemAlloc, "cuMemAlloc_v2");
  load_sym(lib, d.cuMemFree, "cuMemFree_v2");
  load_sym(lib, d.cuMemGetInfo, "cuMemGetInfo_v2");
  load_sym(lib, d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  load_sym(lib, d.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  load_sym(lib, d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  load_sym(lib, d.cuMemsetD8Async, "cuMemsetD8Async");
  load_sym(lib, d.cuStreamCreate, "cuStreamCreate");
  load_sym(lib, d.cuStreamDestroy, "cuStreamDestroy_v2");
  load_sym(lib, d.cuStreamSynchronize, "cuStreamSynchronize");
  load_sym(lib, d.cuEventCreate, "cuEventCreate");
  load_sym(lib, d.cuEventDestroy, "cuEventDestroy_v2");
  load_sym(lib, d.cuEventRecord, "cuEventRecord");
  load_sym(lib, d.cuEventSynchronize, "cuEventSynchronize");
  load_sym(lib, d.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime");
  load_sym(lib, d.cuEventQuery, "cuEventQuery");
  load_sym(lib, d.cuStreamWaitEvent, "cuStreamWaitEvent");
  load_sym(lib, d.cuStreamCreateWithPriority, "cuStreamCreateWithPriority");
  load_sym(lib, d.cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange");
  load_sym(lib, d.cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer");
  load_sym(lib, d.cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId");
  load_sym(lib, d.cuIpcGetMemHandle, "cuIpcGetMemHandle");
  load_sym(lib, d.cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2");
  load_sym(lib, d.cuIpcCloseMemHandle, "cuIpcCloseMemHandle");
  load_sym(lib, d.cuStreamWaitValue32, "cuStreamWaitValue32_v2");
  load_sym(lib, d.cuMemsetD32Async, "cuMemsetD32Async");
  load_sym(lib, d.cuMemAllocHost, "cuMemAllocHost_v2");
  load_sym(lib, d.cuMemFreeHost, "cuMemFreeHost");
  load_sym(lib, d.cuFuncSetAttribute, "cuFuncSetAttribute");
  load_sym(lib, d.cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled");
  load_sym(lib, d.cuStreamBeginCapture, "cuStreamBeginCapture_v2");
  load_sym(lib, d.cuStreamEndCapture, "cuStreamEndCapture");
  load_sym(lib, d.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
  load_sym(lib, d.cuGraphGetNodes, "cuGraphGetNodes");
  load_sym(lib, d.cuGraphExecUpdate, "cuGraphExecUpdate_v2");
  load_sym(lib, d.cuGraphLaunch, "cuGraphLaunch");
  load_sym(lib, d.cuGraphExecDestroy, "cuGraphExecDestroy");
  load_sym(lib, d.cuGraphDestroy, "cuGraphDestroy");
  CUresult r = d.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = "?";
    load_sym(lib, d.cuGetErrorName, "cuGetErrorName");
    d.cuGetErrorName(r, &name);
    throw Error(ErrorKind::Device, fmt::format("no CUDA device: cuInit failed ({})", name));
  }
  load_sym(lib, d.cuGetErrorName, "cuGetErrorName");
  return d;
}
}  // namespace

const DriverApi& driver() {
  static std::once_flag once;
  static DriverApi api;
  static std::string failure;
  static ErrorKind failure_kind = ErrorKind::Device;
  std::call_once(once, [] {
    try {
      api = load_driver();
    } catch (const Error& e) {
      failure = e.what();
      failure_kind = e.kind();
    }
  });
  if (!failure.empty()) throw Error(failure_kind, failure);
  return api;
}

bool gpu_available() {
  try {
    int n = 0;
    return driver().cuDeviceGetCount(&n) == CUDA_SUCCESS && n > 0;
  } catch (const Error&) {
    return false;
  }
}

std::optional<std::string> detect_gpu_arch(int device) {
  if (!gpu_available()) return std::nullopt;
  const auto& d = driver();
  CUdevice dev;
  int major = 0, minor = 0;
  if (d.cuDeviceGet(&dev, device) != CUDA_SUCCESS) return std::nullopt;
  d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  return fmt::format("sm_{}{}", major, minor);
}

std::string pci_bus_id(CUdevice dev) {
  char bus[64] = {};
  DSKC_CU(cuDeviceGetPCIBusId(bus, sizeof(bus), dev));
  return bus;
}

std::string cuda_error_name(CUresult r) {
  const char* name = "unknown";
  try {
    driver().cuGetErrorName(r, &name);
  } catch (...) {
  }
  return name;
}

void throw_cuda_error(CUresult r, const char* call, const char* file, int line) {
  throw Error(ErrorKind::Device, fmt::format("CUDA error {} in {} ({}:{})", cuda_error_name(r), call, file, line));
}

}  // namespace dskc
