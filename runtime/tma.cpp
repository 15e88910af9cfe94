// See tma.h.
#include "runtime/tma.h"

#include <fmt/format.h>

#include "compiler/errors.h"
#include "runtime/driver.h"

namespace dskc {

CUtensorMap tma_kmajor_128b(CUdeviceptr base, DType t, int rows, int k, int ld, int box_rows) {
  DSKC_ASSERT(t != DType::F32, "gemm_sm90 operands are fp16 or bf16");
  DSKC_ASSERT(rows > 0 && k % 64 == 0 && ld >= k && ld % 8 == 0 && base % 16 == 0 && box_rows <= 256,
              fmt::format("TMA operand shape rows={} k={} ld={} box_rows={}", rows, k, ld, box_rows));
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2};  // bytes between rows
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  DSKC_CU(cuTensorMapEncodeTiled(&map, t == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                                 2, reinterpret_cast<void*>(base), dims, strides, box, elem_strides,
                                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return map;
}

CUtensorMap tma_rows_3d_128b(CUdeviceptr base, DType t, int cols, int rows, int batches, int ld, int box_rows) {
  const int esize = t == DType::F32 ? 4 : 2;  // 128-byte box rows: 64 16-bit or 32 fp32 elements
  DSKC_ASSERT(cols > 0 && rows > 0 && batches > 0 && ld >= cols && ld * esize % 16 == 0 && base % 16 == 0 &&
                  box_rows <= 256,
              fmt::format("TMA 3-D view cols={} rows={} batches={} ld={} box_rows={}", cols, rows, batches, ld, box_rows));
  CUtensorMap map;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(batches)};
  const cuuint64_t row_bytes = static_cast<cuuint64_t>(ld) * esize;
  const cuuint64_t strides[2] = {row_bytes, row_bytes * static_cast<cuuint64_t>(rows)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(128 / esize), static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUtensorMapDataType dt = t == DType::F32    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                 : t == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                    : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  DSKC_CU(cuTensorMapEncodeTiled(&map, dt, 3, reinterpret_cast<void*>(base), dims, strides, box, elem_strides,
                                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return map;
}

}  // namespace dskc
