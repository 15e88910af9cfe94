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
// A 3-D view [batches][rows][cols] of 16-bit (or fp32) elements (row stride `ld` elements, `rows` rows
// per batch) in boxes of 128 bytes of columns (64 16-bit, 32 fp32) x box_rows rows x 1, 128-byte
// swizzle: a box that crosses the end of one batch's rows reads zeros there (and a store or reduction
// skips them) instead of touching the next batch's. The fused attention backward's per-sequence tiles
// and (fp32) its TMA-reduced dQ accumulator (templates/attn_flash_bwd_wgmma.cuh).
CUtensorMap tma_rows_3d_128b(CUdeviceptr base, DType t, int cols, int rows, int batches, int ld, int box_rows);

}  // namespace dskc
