// Host <-> device tensor copies with dtype conversion (float on the host, the layer's dtype on
// the device). Synchronous on the context's stream.
#pragma once
#include <cuda.h>

#include <vector>

#include "compiler/config.h"
#include "runtime/context.h"

namespace dskc {
void upload(Context& ctx, CUdeviceptr dst, const std::vector<float>& src, DType t);
std::vector<float> download(Context& ctx, CUdeviceptr src, size_t count, DType t);
// Raw bytes of `src` converted to dtype t (fp32/fp16/bf16 little-endian).
std::vector<uint8_t> to_dtype_bytes(const std::vector<float>& src, DType t);
std::vector<float> from_dtype_bytes(const void* data, size_t count, DType t);
}  // namespace dskc
