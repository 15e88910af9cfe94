// Context: one GPU's stream, cuBLAS/cuBLASLt handles, a growable scratch buffer shared by every
// layer, and accounting of device memory dskc allocated (with an optional cap, used to emulate a
// smaller GPU in the memory benchmarks). No globals: everything hangs off a Context.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>

#include <cstddef>
#include <string>

namespace dskc {

class Context;

// Owning device allocation (freed on destruction), accounted against its Context.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Context& ctx, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <typename P = void>
  P* as() const { return reinterpret_cast<P*>(ptr_); }

 private:
  Context* ctx_ = nullptr;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

// The driver handle of GPU `device` (-1: device 0) after checking it exists; `device` is set to
// the index used. Error(Device) "no CUDA device: ..." without a driver or GPU, or naming the
// missing index and the GPU count.
CUdevice checked_device(int& device);

// A stream and the cuBLASLt workspace GEMMs on it use: GEMMs on different lanes may run at the
// same time, so each lane has its own workspace.
struct GemmLane {
  CUstream stream = nullptr;
  CUdeviceptr workspace = 0;
  size_t workspace_bytes = 0;
};

class Context {
 public:
  // device -1: the current device if a context is current, else device 0.
  explicit Context(int device = -1);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return device_; }
  CUdevice cu_device() const { return cu_device_; }
  std::string device_name() const;
  CUstream stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cublasLtHandle_t cublaslt() const { return cublaslt_; }
  CUdeviceptr lt_workspace() const { return lt_workspace_.ptr(); }
  size_t lt_workspace_bytes() const { return lt_workspace_.bytes(); }
  void make_current() const;
  // Waits for the main stream (and what it waits for: work a layer put on the side stream is
  // always joined back into the main stream before the layer's call returns).
  void synchronize() const;

  GemmLane main_lane() const { return {stream_, lt_workspace_.ptr(), lt_workspace_.bytes()}; }
  // A second stream with its own 32 MiB cuBLASLt workspace, created on first use: layers put
  // backward work there that may overlap the main stream's (weight-gradient GEMMs, regenerated
  // tensors) and make the main stream wait for it before they return.
  GemmLane side_lane();

  // Shared scratch of at least `bytes` (contents undefined; grows, synchronizing first).
  CUdeviceptr scratch(size_t bytes);

  // Device memory allocated through this Context, and an optional cap (0 = none). An
  // allocation past the cap throws Error(Device) "out of memory (cap ...)".
  size_t allocated_bytes() const { return allocated_; }
  size_t peak_allocated_bytes() const { return peak_; }
  void set_memory_cap(size_t bytes) { cap_ = bytes; }
  size_t memory_cap() const { return cap_; }

  CUdeviceptr allocate(size_t bytes);
  void release(CUdeviceptr p, size_t bytes);

 private:
  int device_ = 0;
  CUdevice cu_device_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublaslt_ = nullptr;
  DeviceBuffer lt_workspace_;
  CUstream side_stream_ = nullptr;
  DeviceBuffer side_workspace_;
  DeviceBuffer scratch_;
  size_t allocated_ = 0, peak_ = 0, cap_ = 0;
};

// Checks a cuBLAS status; reports the call, file:line and the status name.
[[noreturn]] void throw_cublas_error(int status, const char* call, const char* file, int line);

}  // namespace dskc

#define DSKC_CUBLAS(call)                                                            \
  do {                                                                               \
    cublasStatus_t s_ = (call);                                                      \
    if (s_ != CUBLAS_STATUS_SUCCESS) ::dskc::throw_cublas_error(s_, #call, __FILE__, __LINE__); \
  } while (0)
