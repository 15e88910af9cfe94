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
  FlashTiles,   // fused attention: grid = (ceil(S / rows_per_block), B·heads)
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
  int rows_per_block = 1;     // AttnRows: attention rows per block; FlashTiles: rows per tile
  std::string rows_check = "";  // FlashTiles: constexpr expression for rows_per_block (static_assert'ed)
};

// Tokens: B·S·width elements; Scores: B·S·heads·padded S; RowStats: B·S; RowTiles: partial-sum
// rows × width; HeadRows: B·heads·S (width = heads), e.g. the fused attention's row logsumexp;
// HeadRowWords: B·heads·S·ceil(S/32) (width = heads), the fused attention's dropout keep bits.
enum class Extent { Tokens, Scores, RowStats, RowTiles, HeadRows, HeadRowWords };

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
  // Attention runs as the fused kernels attn_flash_* (no P / dropout(P) kept; the row logsumexp
  // attn_lse instead) rather than batched GEMMs + attn_softmax_dropout_*.
  bool fused_attention = false;
  // Fused attention with attention dropout in training and without attn_dropout_checkpoint: the
  // forward saves the keep mask as bits (attn_dropout_bits) and the backward kernels read them;
  // otherwise the backward regenerates the mask with Philox (kAttnDropoutBits in the config header).
  bool attn_dropout_bits = false;
};

// Which attention implementation a plan uses. The fused one needs fp16/bf16, a head dim that is a
// multiple of 16 and at most 128, and batch_size·heads <= 65535 (grid.y); other layers always use
// the unfused path.
enum class AttentionPath {
  FromEnvironment,      // DSKC_ATTENTION=unfused forces the unfused path; unset, "auto" or "fused": as below
  FusedWhereSupported,  // fused whenever the layer supports it
  Unfused,              // batched GEMMs + softmax kernels (for comparison and debugging)
};
struct PlanOptions {
  AttentionPath attention = AttentionPath::FromEnvironment;
};

LayerPlan make_plan(const LayerConfig& cfg, const PlanOptions& opt = {});
bool fused_attention_supported(const LayerConfig& cfg);
// Reads DSKC_ATTENTION (unset, "", "auto", "fused" -> FusedWhereSupported; "unfused" -> Unfused);
// any other value is an Error(Config) naming the variable.
AttentionPath attention_path_from_env();

// Rows of attention scores are padded to a multiple of this many elements (16-byte aligned).
constexpr int kSeqPadElems = 8;
inline int padded_seq(int seq) { return (seq + kSeqPadElems - 1) / kSeqPadElems * kSeqPadElems; }
constexpr int kGradRowsPerBlock = 8;  // must match templates/common/row_tiles.cuh
inline int grad_parts(int rows) { return (rows + kGradRowsPerBlock - 1) / kGradRowsPerBlock; }
// 32-bit words per attention row of the dropout keep bits (templates/common/flash.cuh keep_words).
inline int keep_words(int seq) { return (seq + 31) / 32; }

// Mirrors of the templates' launch-shape rules (checked by static_assert in generated source).
int vec_width(DType t, int cols);
int row_threads(int vecs);
int attn_rows_per_block(DType t, int max_seq);  // mirrors templates/common/attn_rows.cuh
// Mirrors templates/common/flash.cuh: warps of the fused attention backward kernels.
inline int flash_bwd_warps(int head_dim) { return head_dim <= 64 ? 4 : 2; }

std::string config_hash(const LayerConfig& cfg);

}  // namespace dskc
