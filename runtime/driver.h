// The CUDA driver API, loaded with dlopen at first use (never at program start), so dskc runs on
// machines without an NVIDIA driver (compile, inspect, cache, the CPU backend). Every call goes
// through DSKC_CU(call), which reports the call, file:line and the driver's error name.
#pragma once
#include <cuda.h>

#include <optional>
#include <string>

namespace dskc {

struct DriverApi {
  CUresult (*cuInit)(unsigned int);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncGetAttribute)(int*, CUfunction_attribute, CUfunction);
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int*, CUfunction, int, size_t);
  CUresult (*cuOccupancyMaxActiveClusters)(int*, CUfunction, const CUlaunchConfig*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemGetInfo)(size_t*, size_t*);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuStreamCreate)(CUstream*, unsigned int);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuEventCreate)(CUevent*, unsigned int);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned int);
  CUresult (*cuStreamCreateWithPriority)(CUstream*, unsigned int, int);
  CUresult (*cuCtxGetStreamPriorityRange)(int*, int*);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  // Two-rank gradient sums over copy engines (trainer/peer_sum.h)
  CUresult (*cuDeviceCanAccessPeer)(int*, CUdevice, CUdevice);
  CUresult (*cuDeviceGetPCIBusId)(char*, int, CUdevice);
  CUresult (*cuIpcGetMemHandle)(CUipcMemHandle*, CUdeviceptr);
  CUresult (*cuIpcOpenMemHandle)(CUdeviceptr*, CUipcMemHandle, unsigned int);
  CUresult (*cuIpcCloseMemHandle)(CUdeviceptr);
  CUresult (*cuStreamWaitValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
  CUresult (*cuMemAllocHost)(void**, size_t);
  CUresult (*cuMemFreeHost)(void*);
  // gemm_sm90: its dynamic shared-memory limit and the TMA descriptors of its operands
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                     const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                     CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  // CUDA graphs (runtime/cuda_graph.h)
  CUresult (*cuStreamBeginCapture)(CUstream, CUstreamCaptureMode);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*cuGraphExecUpdate)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo*);
  CUresult (*cuGraphGetNodes)(CUgraph, CUgraphNode*, size_t*);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
};

// Loads libcuda on first call; throws Error(Device) "no NVIDIA driver" when it cannot.
const DriverApi& driver();
// True when a driver loads and reports at least one device (never throws).
bool gpu_available();
// "sm_90" etc. for device 0 (or `device`), nullopt without a GPU (never throws).
std::optional<std::string> detect_gpu_arch(int device = 0);
// The device's PCI bus id ("0000:19:00.0"), how NVML and other processes name it; throws Error(Device).
std::string pci_bus_id(CUdevice dev);

// The driver's name of a result, e.g. "CUDA_ERROR_INVALID_VALUE" ("unknown" without a driver).
std::string cuda_error_name(CUresult r);

[[noreturn]] void throw_cuda_error(CUresult r, const char* call, const char* file, int line);

}  // namespace dskc

#define DSKC_CU(call)                                                                      \
  do {                                                                                     \
    CUresult r_ = ::dskc::driver().call;                                                   \
    if (r_ != CUDA_SUCCESS) ::dskc::throw_cuda_error(r_, #call, __FILE__, __LINE__);       \
  } while (0)
