// LayerPlan: what the generated module contains and what the runtime keeps. From a validated
// LayerConfig it lists the forward and backward kernels (name, op/template, what each fuses,
// the template instantiation, launch block size) and the tensors forward keeps for backward
// under the memory flags, with exact bytes for any (batch, seq). The runtime allocates exactly
// these tensors, so `dskc inspect --memory` is what a layer really holds.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/config.h"

namespace dskc {

enum class Pass { Forward, Backward };

// How a kernel's grid is sized at launch time (the runtime computes it from batch and seq).
enum class GridKind {
  Rows,         // one block per token row: grid = B·S
  AttnRows,     // warps own attention rows: grid = ceil(B·heads·S / rows_per_block)
  Elementwise,  // grid-stride over vectors: grid = min(ceil(vectors / block), 65535)
  RowTiles,     // kGradRowsPerBlock rows per block: grid = ceil(B·S / kGradRowsPerBlock)
  ColumnTiles,  // param_grad_reduce: grid = (ceil(cols / 32), arrays), block 256
};

struct KernelInfo {
  std::string name;           // kernel symbol, e.g. "layernorm_bwd_attn"
  std::string op;             // template file stem, e.g. "layernorm_bwd"
  std::string params_type;    // params struct in the template
  std::string instantiation;  // e.g. "layernorm_bwd_impl<kHidden, kNormalizeInvertible, kLnAddToDx>"
  std::string fuses;          // one line: what the kernel does
  std::string shape_check;    // constexpr expression for the block size (static_assert'ed)
  Pass pass = Pass::Forward;
  GridKind grid = GridKind::Rows;
  int block = 0;              // threads per block
  int cols = 0;               // columns per row (Elementwise / RowTiles / ColumnTiles)
  int vec = 1;                // elements per vector (Elementwise)
  int arrays = 1;             // ColumnTiles: arrays reduced
  int rows_per_block = 1;     // AttnRows: attention rows per block
};

enum class Extent { Tokens, Scores, RowStats, RowTiles };

struct TensorInfo {
  std::string name;    // e.g. "qkv"
  std::string shape;   // e.g. "[B, S, 3H]"
  Extent extent = Extent::Tokens;
  int64_t width = 0;   // elements per token (Tokens); heads (Scores)
  int elem_bytes = 0;
  std::string why;     // what backward needs it for
  int64_t bytes(int batch, int seq) const;
};

struct LayerPlan {
  LayerConfig cfg;
  std::string config_hash;            // sha256 of the canonical config JSON (first 16 hex)
  std::vector<KernelInfo> kernels;    // forward kernels first, then backward, in launch order
  std::vector<TensorInfo> saved;      // kept from forward to backward (training only)
  std::vector<TensorInfo> workspace;  // scratch, reused across layers and passes
  int64_t activation_bytes(int batch, int seq) const;
  int64_t activation_bytes() const { return activation_bytes(cfg.batch_size, cfg.max_seq_length); }
  int64_t workspace_bytes(int batch, int seq) const;
  const KernelInfo* find_kernel(const std::string& name) const;
  const TensorInfo* find_saved(const std::string& name) const;
  // fp16/bf16: bias gradients come from the weight-gradient GEMMs' cuBLASLt BGRADB epilogue;
  // fp32: from partial column sums (dropout_bias_grad, bias_gelu_bwd) + param_grad_reduce.
  bool bias_grad_in_gemm = false;
};

LayerPlan make_plan(const LayerConfig& cfg);

// Rows of attention scores are padded to a multiple of this many elements (16-byte aligned).
constexpr int kSeqPadElems = 8;
inline int padded_seq(int seq) { return (seq + kSeqPadElems - 1) / kSeqPadElems * kSeqPadElems; }
constexpr int kGradRowsPerBlock = 8;  // must match templates/common/row_tiles.cuh
inline int grad_parts(int rows) { return (rows + kGradRowsPerBlock - 1) / kGradRowsPerBlock; }

// Mirrors of the templates' launch-shape rules (checked by static_assert in generated source).
int vec_width(DType t, int cols);
int row_threads(int vecs);
int attn_rows_per_block(DType t, int max_seq);  // mirrors templates/common/attn_rows.cuh

std::string config_hash(const LayerConfig& cfg);

}  // namespace dskc
