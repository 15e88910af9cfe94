// Context implementation (see context.h).
#include "runtime/context.h"

#include <fmt/format.h>

#include "compiler/errors.h"
#include "runtime/cublas_api.h"
#include "runtime/driver.h"

namespace dskc {

DeviceBuffer::DeviceBuffer(Context& ctx, size_t bytes) : ctx_(&ctx), bytes_(bytes) {
  ptr_ = bytes ? ctx.allocate(bytes) : 0;
}
DeviceBuffer::~DeviceBuffer() {
  if (ctx_ && ptr_) ctx_->release(ptr_, bytes_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ctx_(o.ctx_), ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = 0;
  o.bytes_ = 0;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ctx_ && ptr_) ctx_->release(ptr_, bytes_);
    ctx_ = o.ctx_;
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  return *this;
}

void throw_cublas_error(int status, const char* call, const char* file, int line) {
  throw Error(ErrorKind::Device, fmt::format("cuBLAS error {} ({}) in {} ({}:{})",
                                             blas().cublasGetStatusName(static_cast<cublasStatus_t>(status)), status, call,
                                             file, line));
}

CUdevice checked_device(int& device) {
  int count = 0;
  DSKC_CU(cuDeviceGetCount(&count));  // driver(): Error(Device) "no CUDA device: ..." without one
  if (count == 0) throw Error(ErrorKind::Device, "no CUDA device: the driver reports no GPU");
  if (device < 0) device = 0;
  if (device >= count)
    throw Error(ErrorKind::Device,
                fmt::format("local_rank/device {} does not exist: this machine has {} GPU(s)", device, count));
  CUdevice d = 0;
  DSKC_CU(cuDeviceGet(&d, device));
  return d;
}

Context::Context(int device) {
  cu_device_ = checked_device(device);
  device_ = device;
  DSKC_CU(cuDevicePrimaryCtxRetain(&ctx_, cu_device_));
  DSKC_CU(cuCtxSetCurrent(ctx_));
  DSKC_CU(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
  DSKC_CUBLAS(blas().cublasCreate(&cublas_));
  DSKC_CUBLAS(blas().cublasSetStream(cublas_, reinterpret_cast<cudaStream_t>(stream_)));
  DSKC_CUBLAS(blas().cublasLtCreate(&cublaslt_));
  lt_workspace_ = DeviceBuffer(*this, 32u << 20);
  DSKC_CUBLAS(blas().cublasSetWorkspace(cublas_, reinterpret_cast<void*>(lt_workspace_.ptr()), lt_workspace_.bytes()));
}

Context::~Context() {
  try {
    make_current();
    synchronize();
  } catch (...) {
  }
  try {
    if (side_stream_) DSKC_CU(cuStreamSynchronize(side_stream_));
  } catch (...) {
  }
  scratch_ = DeviceBuffer();
  lt_workspace_ = DeviceBuffer();
  side_workspace_ = DeviceBuffer();
  if (side_stream_) driver().cuStreamDestroy(side_stream_);
  if (cublaslt_) blas().cublasLtDestroy(cublaslt_);
  if (cublas_) blas().cublasDestroy(cublas_);
  if (stream_) driver().cuStreamDestroy(stream_);
  if (ctx_) driver().cuDevicePrimaryCtxRelease(cu_device_);
}

std::string Context::device_name() const {
  char name[256] = {0};
  DSKC_CU(cuDeviceGetName(name, sizeof(name), cu_device_));
  return name;
}

void Context::make_current() const { DSKC_CU(cuCtxSetCurrent(ctx_)); }
void Context::synchronize() const { DSKC_CU(cuStreamSynchronize(stream_)); }

GemmLane Context::side_lane() {
  if (!side_stream_) {
    side_workspace_ = DeviceBuffer(*this, lt_workspace_.bytes());
    DSKC_CU(cuStreamCreate(&side_stream_, CU_STREAM_NON_BLOCKING));
  }
  return {side_stream_, side_workspace_.ptr(), side_workspace_.bytes()};
}

CUdeviceptr Context::allocate(size_t bytes) {
  if (cap_ && allocated_ + bytes > cap_)
    throw Error(ErrorKind::Device, fmt::format("out of memory: allocating {:.1f} MiB would exceed the memory cap of "
                                               "{:.1f} MiB ({:.1f} MiB in use)",
                                               bytes / 1048576.0, cap_ / 1048576.0, allocated_ / 1048576.0));
  CUdeviceptr p = 0;
  CUresult r = driver().cuMemAlloc(&p, bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY)
    throw Error(ErrorKind::Device, fmt::format("out of GPU memory allocating {:.1f} MiB ({:.1f} MiB in use by dskc)",
                                               bytes / 1048576.0, allocated_ / 1048576.0));
  if (r != CUDA_SUCCESS) throw_cuda_error(r, "cuMemAlloc", __FILE__, __LINE__);
  allocated_ += bytes;
  peak_ = std::max(peak_, allocated_);
  return p;
}

void Context::release(CUdeviceptr p, size_t bytes) {
  driver().cuMemFree(p);
  allocated_ -= bytes;
}

CUdeviceptr Context::scratch(size_t bytes) {
  if (scratch_.bytes() < bytes) {
    synchronize();
    scratch_ = DeviceBuffer();
    scratch_ = DeviceBuffer(*this, bytes);
  }
  return scratch_.ptr();
}

}  // namespace dskc
