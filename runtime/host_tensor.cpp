// Host <-> device copies with dtype conversion (see host_tensor.h).
#include "runtime/host_tensor.h"

#include <cstring>

#include "runtime/driver.h"
#include "runtime/host_float.h"

namespace dskc {

std::vector<uint8_t> to_dtype_bytes(const std::vector<float>& src, DType t) {
  std::vector<uint8_t> out(src.size() * dtype_bytes(t));
  if (t == DType::F32) {
    std::memcpy(out.data(), src.data(), out.size());
  } else {
    auto* h = reinterpret_cast<uint16_t*>(out.data());
    for (size_t i = 0; i < src.size(); ++i)
      h[i] = t == DType::F16 ? float_to_half_bits(src[i]) : float_to_bf16_bits(src[i]);
  }
  return out;
}

std::vector<float> from_dtype_bytes(const void* data, size_t count, DType t) {
  std::vector<float> out(count);
  if (t == DType::F32) {
    std::memcpy(out.data(), data, count * 4);
  } else {
    const auto* h = static_cast<const uint16_t*>(data);
    for (size_t i = 0; i < count; ++i) out[i] = t == DType::F16 ? half_bits_to_float(h[i]) : bf16_bits_to_float(h[i]);
  }
  return out;
}

void upload(Context& ctx, CUdeviceptr dst, const std::vector<float>& src, DType t) {
  auto bytes = to_dtype_bytes(src, t);
  DSKC_CU(cuMemcpyHtoDAsync(dst, bytes.data(), bytes.size(), ctx.stream()));
  ctx.synchronize();
}

std::vector<float> download(Context& ctx, CUdeviceptr src, size_t count, DType t) {
  std::vector<uint8_t> bytes(count * dtype_bytes(t));
  DSKC_CU(cuMemcpyDtoHAsync(bytes.data(), src, bytes.size(), ctx.stream()));
  ctx.synchronize();
  return from_dtype_bytes(bytes.data(), count, t);
}

}  // namespace dskc
