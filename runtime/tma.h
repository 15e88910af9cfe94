// TMA (bulk tensor copy) descriptors for gemm_sm90's tensors, encoded on the host with the
// driver's cuTensorMapEncodeTiled: a row-major [rows, k] matrix of 16-bit elements (row stride
// `ld` elements) copied in boxes of 64 (k) x box_rows with the 128-byte swizzle that wgmma's
// K-major shared-memory descriptors expect (templates/common/sm90.cuh) and the epilogue's stmatrix
// addressing assumes. Rows past `rows` read as zero and are not written.
#pragma once
#include <cuda.h>

#include "compiler/config.h"

namespace dskc {

CUtensorMap tma_kmajor_128b(CUdeviceptr base, DType t, int rows, int k, int ld, int box_rows);

}  // namespace dskc
