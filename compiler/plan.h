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
// Columns per param_grad_reduce block (ParamGradReduceTile::kTileCols in
// templates/param_grad_reduce.cuh; the kernel strides over tiles, so this sets only the grid).
constexpr int kReduceTileCols = 16;

enum class GridKind {
  Rows,         // rows_per_block token rows per block (a warp each, or one block per wide row):
                // grid = ceil(B·S / rows_per_block)
  AttnRows,     // warps own attention rows: grid = ceil(B·heads·S / rows_per_block)
  Elementwise,  // grid-stride over vectors: grid = min(ceil(vectors / block), 65535)
  RowTiles,     // kGradRowsPerBlock rows per block: grid = ceil(B·S / kGradRowsPerBlock)
  ColumnTiles,  // param_grad_reduce: grid = (ceil(cols / kReduceTileCols), arrays), block 256
  FlashTiles,   // fused attention: grid = (ceil(S / rows_per_block), B·heads)
  Persistent,   // gemm_sm90: one block per SM (at most one per output tile), each walking tiles of
                // rows_per_block x tile_cols outputs: grid = min(SMs, ceil(B·S / rows_per_block) · cols / tile_cols)
  Fixed,        // a grid fixed by the config (weight_transpose): grid = (grid_x, grid_y)
  FlashHeads,   // persistent fused attention (clusters of two blocks walk the B·heads heads): grid =
                // 2 · min(B·heads, resident clusters, DSKC_ATTN_BWD_PERSIST's cap)
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
  int rows_per_block = 1;     // Rows: token rows per block; AttnRows: attention rows per block; FlashTiles: rows per tile
  std::string rows_check = "";  // Rows, FlashTiles: constexpr expression for rows_per_block (static_assert'ed)
  // Non-empty: __launch_bounds__(block, min_blocks) with this constexpr expression (a template
  // constant, may depend on the arch): caps registers for that many resident blocks per SM.
  std::string min_blocks = "";
  // Persistent: output columns per tile (the GEMM's N is `cols`). Fixed: the grid.
  int tile_cols = 0;
  int grid_x = 0, grid_y = 0;
  // Bytes of dynamic shared memory per block (0: static only); smem_check is the template's
  // constexpr expression for it (static_assert'ed). The runtime raises the kernel's limit to it.
  int dynamic_smem = 0;
  std::string smem_check = "";
  // The params struct is a __grid_constant__ kernel parameter (it holds TMA descriptors, which
  // must live in the parameter space).
  bool grid_constant = false;
  // CTAs per thread-block cluster along x (> 1: __cluster_dims__(cluster, 1, 1); FlashTiles grids
  // are rounded up to whole clusters).
  int cluster = 1;
};

// Tokens: B·S·width elements; Scores: B·S·heads·padded S; RowStats: B·S; RowTiles: partial-sum
// rows × width; HeadRows: B·heads·S (width = heads), e.g. the fused attention's row logsumexp;
// HeadRowWords: B·heads·S·ceil(S/32) (width = heads), the fused attention's dropout keep bits;
// Heads: B·heads (width = heads), e.g. the single-pass attention backward's per-head tickets.
// Fixed: `width` elements whatever the batch and sequence (e.g. a transposed weight).
enum class Extent { Tokens, Scores, RowStats, RowTiles, HeadRows, HeadRowWords, Heads, Fixed };

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
  // fp16/bf16: bias gradients come from cuBLASLt (no partial sums in the kernels): the
  // weight-gradient GEMMs' BGRADB epilogue, or with bias_grad_gemv a column-sum GEMM ones·dY next
  // to each weight gradient; fp32 (and DSKC_BIAS_GRAD=partials): from partial column sums
  // (dropout_bias_grad, bias_gelu_bwd, bias_grad_qkv) + param_grad_reduce.
  bool bias_grad_in_gemm = false;
  bool bias_grad_gemv = false;
  // bias_grad_in_gemm with hidden dropout: layernorm_bwd_attn also writes the gradient through the
  // attention output's dropout (no dropout_bias_grad_attn_out pass).
  bool attn_out_dropout_in_ln = false;
  // Pre-LN with gelu_checkpoint and normalize_invertible in training: the attention block's gradient
  // scratch (the attention output's masked gradient, then the QKV data gradient) is not grad_h_b,
  // which holds d_o for the output_w gradient; under gelu_checkpoint that GEMM starts only after the
  // GELU backward, and layernorm_bwd_attn would wait for it before overwriting d_o. It is
  // normalize_invertible's attn_residual workspace, which backward does not read.
  // DSKC_GELU_CKPT_SCRATCH=shared keeps grad_h_b (A/B).
  bool attn_grad_own_scratch = false;
  // tanh GELU (gelu_approximation "tanh", DeepSpeed's kernel's GELU) in fp16/bf16 with bias
  // gradients from cuBLASLt and no gelu_checkpoint: the GELU runs in cuBLASLt epilogues, where
  // cuBLASLt's GELU is the tanh form: gemm_inter_fwd with GELU_AUX_BIAS writes GELU(h) into
  // ffn_gelu_out and h = x·Wᵀ + b into ffn_pre_gelu, gemm_output_dgrad with DGELU (h as its aux
  // input) writes dh = dg ⊙ GELU'(h); no bias_gelu_fwd / bias_gelu_bwd passes. The same tensors
  // are kept as with the kernels. DSKC_GELU=kernel keeps the kernels (A/B).
  bool gelu_in_gemm = false;
  // Attention runs as the fused kernels attn_flash_* (no P / dropout(P) kept; the row logsumexp
  // attn_lse instead) rather than batched GEMMs + attn_softmax_dropout_*.
  bool fused_attention = false;
  // Fused attention with attention dropout in training (all three false otherwise): the backward
  // kernels read the keep mask as bits, attn_dropout_bits [B, heads, S, ceil(S/32)] uint32 —
  // a saved tensor (attn_keep_bits_saved: no attn_dropout_checkpoint), or under
  // attn_dropout_checkpoint a workspace tensor that attn_dropout_bits_bwd rewrites just before them.
  // The forward draws the mask with Philox inside attn_flash_fwd (and stores the saved bits), or
  // with attn_mask_kernel (DSKC_ATTN_MASK=kernel) reads the bits attn_dropout_bits_fwd writes
  // right before it. kAttnFwdStoresBits / kAttnFwdLoadsBits in the config header.
  bool attn_keep_bits = false;
  bool attn_keep_bits_saved = false;
  bool attn_mask_kernel = false;
  // With attn_mask_kernel in Pre-LN (DSKC_ATTN_MASK=ln, the default): the bits kernel's work runs
  // inside the first LayerNorm's launch instead (layernorm_fwd_norm is layernorm_fwd_bits: its
  // memory-bound rows and the ALU-bound Philox words overlap; no attn_dropout_bits_fwd). Under
  // attn_dropout_checkpoint with normalize_invertible, the backward's re-run of that LayerNorm
  // rewrites the bits too (no attn_dropout_bits_bwd): attn_bits_bwd_in_ln.
  bool attn_bits_in_ln = false;
  bool attn_bits_bwd_in_ln = false;
  // With DSKC_ATTN_BITS_BWD=dot under attn_dropout_checkpoint: attn_flash_bwd_dot is
  // attn_flash_bwd_dot_bits, which writes the bits in its launch right before attn_flash_bwd_dkdv (its
  // memory-bound row sums and the Philox words overlap; no attn_dropout_bits_bwd). Not the default: on
  // the main stream it measured no faster than the bits kernel on the side stream (bench/NOTES.md v26).
  bool attn_bits_bwd_in_dot = false;
  // layernorm_bwd kernels run a row per warp (kLnBwdWarps warps, two rows each, per block of
  // kGradRowsPerBlock rows) where a row is at most kWarpRowVecs vectors (kLnBwdWarpRows in the
  // config header; templates/layernorm_bwd.cuh LayerNormBwdShape); else a block per row.
  bool ln_bwd_warp_rows = false;
  bool attn_fwd_stores_bits() const { return attn_keep_bits_saved && !attn_mask_kernel; }
  // K/V tile buffers of attn_flash_fwd (kAttnFwdStages): 1 by default; 2 (DSKC_ATTN_FWD_STAGES=2)
  // prefetches the next tile with cp.async while the current one is computed, where two buffers fit
  // in 48 KB of static shared memory (head dim <= 96 with the mask from the bits kernel;
  // flash_fwd_smem_bytes). Two measured no faster on the H200 (BERT-Large: 130 registers instead
  // of 98, 3 resident blocks per SM instead of 4; kernel −1%, layer +1.1% / +2.0% at (64,128) /
  // (16,512)).
  int attn_fwd_stages = 1;
  // Epilogue regions per math warpgroup of the forward's GELU gemm_sm90 (gemm_inter_fwd; kGemmGeluRegions):
  // 2 or 3, which leaves room for 5 or 4 pipeline stages (DSKC_GEMM_GELU_REGIONS; bench/NOTES.md v42).
  int gemm_gelu_regions = 2;
  // gemm_sm90's tile schedule (kGemmDynamicTiles): false, block b of the persistent grid computes tiles
  // b, b + grid, ...; true (DSKC_GEMM_TILES=dynamic), each block's producer takes the next tile from a
  // counter in global memory (TransformerLayer's gemm_sched, reset by the kernel's last block), so
  // blocks that start late, their SMs held by the side stream's kernels, take fewer tiles.
  bool gemm_dynamic_tiles = false;
  // stochastic_mode with AttnDq::Atomic (DSKC_ATTN_DQ=atomic), fused attention in training:
  // single-pass attention backward. Instead of attn_flash_bwd_dkdv + a dQ GEMM or kernel,
  // attn_flash_bwd_dkdvdq computes dK, dV per key tile and adds the tile's dQ share with atomics
  // into the fp32 workspace tensor attn_dq_acc [B, S, H], which attn_flash_bwd_dot zeroes first
  // (with the per-head tickets attn_dq_tickets [B, heads]); the last key tile of each head writes
  // its dQ into grad_qkv. The order of the atomic additions varies, so dQ is not bitwise
  // reproducible run to run (dK, dV and everything before are).
  bool attn_dq_atomic = false;
  // stochastic_mode with AttnDq::Reduce (DSKC_ATTN_DQ=reduce; not the default: slower than the dQ
  // GEMM at (16,512), bench/NOTES.md v41), on the wgmma dK/dV kernel with one warpgroup per block: no
  // dSᵀ store and no dQ GEMM. attn_flash_bwd_dot zeroes attn_dq_acc [B, S, H] fp32; attn_flash_bwd_dkdv stages
  // each key tile's dS·K (fp32) in shared memory and adds it into attn_dq_acc by TMA reductions
  // (templates/attn_flash_bwd_wgmma.cuh, kDqReduce); attn_dq_convert writes dQ = acc/√d into grad_qkv.
  // The order of a head's key tiles' additions varies, so dQ is not bitwise reproducible run to run.
  bool attn_dq_reduce = false;
  // Fused attention in training, AttnDq::Gemm (and AttnDq::Fused, the default, where that does not apply): attn_flash_bwd_dkdv
  // also stores dSᵀ (dtype T) in the workspace tensor grad_scores [B, heads, S, padded S] and the
  // runtime computes dQ = dS·K/√d with one batched GEMM (gemm_attn_dq) instead of attn_flash_bwd_dq,
  // which would compute P and dS a second time. Deterministic like the kernel it replaces.
  bool attn_dq_gemm = false;
  // With attn_dq_gemm on sm_90 (fp16/bf16, head dim 64): attn_flash_bwd_dkdv is the wgmma kernel of
  // templates/attn_flash_bwd_wgmma.cuh (TMA-fed Q/dO stages, products on warpgroup MMA, dSᵀ stored by
  // TMA) with attn_bwd_wgs math warpgroups (64 keys each) per block, instead of the mma.sync kernel.
  // Same outputs and the same determinism; DSKC_ATTN_BWD picks (bench/NOTES.md v20).
  bool attn_bwd_wgmma = false;
  int attn_bwd_wgs = 1;
  // With attn_dq_gemm and attn_bwd_wgmma (AttnDqGemm::Wgmma, the default; DSKC_ATTN_DQ_GEMM=cublas for
  // cuBLAS's batched GEMM): dQ = dS·K/√d by
  // attn_dq_wgmma (templates/attn_dq_wgmma.cuh: one warpgroup per 128 queries of a head, dSᵀ and K by
  // TMA through a ring of stages, the heads last-written first) instead of cuBLAS's batched GEMM;
  // deterministic, within rounding of cuBLAS's (another summation order).
  bool attn_dq_wgmma = false;
  // AttnDq::Fused where it applies (attn_bwd_wgmma, max_seq_length <= 128): the wgmma kernel's
  // warpgroups cover every key of their (batch, head), so it also computes dQ = dS·K/√d (each 64-key
  // half's share, the two added in shared memory in a fixed order) and writes it into grad_qkv: no
  // grad_scores, no dQ GEMM. Above 64 keys the halves are the two blocks of a cluster
  // (attn_bwd_cluster = 2, one warpgroup per block, DSKC_ATTN_BWD=wgmma) or the two warpgroups of one
  // block (wgmma2).
  bool attn_dq_fused = false;
  int attn_bwd_cluster = 1;
  // attn_dq_fused above 128 keys (AttnDq::Ring): attn_bwd_cluster = ceil(max_seq_length / 64) blocks
  // of 64 keys hold every key; each query tile's dQ is summed by passing the partial sums from block
  // to block in a fixed order (templates/attn_flash_bwd_wgmma.cuh, kRing). D comes from attn_flash_bwd_dot.
  bool attn_dq_ring = false;
  // attn_dq_fused with one warpgroup per block (FlashWgBwdTile::kDotFused): the wgmma kernel also
  // computes D = rowsum(dO ⊙ O) per query tile (O by TMA into its dSᵀ regions), so attn_flash_bwd_dot
  // runs only where it also rewrites the keep bits (attn_bits_bwd_in_dot); attn_row_dot stays unread.
  bool attn_dot_in_dkdv = false;
  // attn_dot_in_dkdv with two key halves in a cluster (max_seq_length 65 .. 128), unless
  // DSKC_ATTN_BWD_PERSIST=off: attn_flash_bwd_dkdv is the persistent form (attn_flash_bwd_wgmma_persist_impl, GridKind::
  // FlashHeads): each cluster walks heads, loading the next head's K/V and tiles while the current
  // one computes; the same outputs, bitwise. Always with TMA stores.
  bool attn_bwd_persist = false;
  // The wgmma attention kernels (kAttnTmaStores) store their output tiles by TMA: the wgmma forward
  // its context O, the wgmma dK/dV kernel with attn_dq_fused its dK, dV and dQ (with the dQ GEMM it
  // keeps the 4-byte stores, measured faster there). Each warpgroup stages a 64 x 64 tile in shared
  // memory it no longer reads (stmatrix, the TMA box's 128B-swizzled layout) and one thread stores
  // it, whole 128-byte rows, rows past S clipped. DSKC_ATTN_STORE=rows keeps the 4-byte stores from
  // the accumulator layout (per warp instruction, 16-byte pieces of eight rows), which took a quarter
  // of attn_flash_bwd_dkdv's time at (64,128) (bench/NOTES.md v44). Same values either way.
  bool attn_tma_stores = true;
  // On sm_90 (fp16/bf16, head dim 64) with the keep flags from attn_dropout_bits_fwd or no attention
  // dropout: attn_flash_fwd is the wgmma kernel of templates/attn_flash_fwd_wgmma.cuh (Q and K/V tiles
  // by TMA into attn_fwd_wg_stages stages, S = Q·Kᵀ and O += P·V on warpgroup MMA, the next tile's S
  // product and this tile's P·V product overlapping the softmax), instead of the mma.sync kernel.
  // Same formulas; DSKC_ATTN_FWD picks (bench/NOTES.md v21).
  bool attn_fwd_wgmma = false;
  int attn_fwd_wg_stages = 0;
  // The FFN's GELU GEMMs as dskc's own Hopper kernels with the GELU in their epilogue
  // (templates/gemm_sm90.cuh: TMA + wgmma, warp-specialized, persistent), for sm_90 targets with
  // fp16/bf16, intermediate_size % 128 == 0 and hidden_size % 64 == 0, bias gradients from cuBLASLt
  // (not partials), either GELU form. ffn_gemm_sm90: gemm_inter_fwd writes h = x·Wᵀ + b into
  // ffn_pre_gelu and GELU(h) into ffn_gelu_out (no bias_gelu_fwd). ffn_gemm_sm90_bwd (only with
  // it): gemm_output_dgrad (reading output_w in place, sm90_weight_in_place, or output_wᵀ that
  // transpose_output_w writes into the workspace tensor output_w_t first) writes dh = (dY·W) ⊙
  // GELU'(h), and under gelu_checkpoint GELU(h) again (no bias_gelu_bwd). Either replaces
  // gelu_in_gemm's cuBLASLt epilogues. DSKC_FFN_GEMM picks (bench/NOTES.md v17, v18 have the
  // measurements behind the default).
  bool ffn_gemm_sm90 = false;
  bool ffn_gemm_sm90_bwd = false;
  // ffn_gemm_sm90_bwd without gelu_checkpoint (GeluSave::Grad, the default): gemm_inter_fwd keeps
  // GELU'(h) (saved tensor ffn_gelu_grad, in ffn_pre_gelu's place) instead of h, computed from the
  // same tail as GELU(h) (GemmEpi::kBiasGeluSaveGrad), and gemm_output_dgrad multiplies the products
  // by it (kDGeluSaved): the GELU arithmetic leaves the backward. Bitwise the same dh as computing
  // GELU'(h) there (DSKC_GELU_SAVE=input, and gelu_checkpoint, which must keep h to rebuild GELU(h)).
  bool gelu_grad_saved = false;
  // The forward's other linear GEMMs as gemm_sm90 kernels with plain epilogues (sm_90, fp16/bf16,
  // hidden_size % 128 == 0, intermediate_size % 64 == 0): gemm_qkv_fwd (+ attn_qkvb),
  // gemm_attn_out_fwd and gemm_output_fwd (their biases stay in the next row kernel), instead of
  // cuBLASLt. DSKC_LINEAR_GEMM picks (bench/NOTES.md v19).
  bool linear_gemm_sm90 = false;
  // With linear_gemm_sm90 in Pre-LN and DSKC_OUTPUT_GEMM=fused: gemm_output_fwd's epilogue writes the
  // layer output, attn_residual + dropout(product + output_b) (GemmEpi::kBiasDropoutResidual, the
  // residual by TMA during the mainloop; no bias_dropout_residual_fwd_ffn, no linear_out write).
  bool output_gemm_fused = false;
  // The backward's data-gradient GEMMs as gemm_sm90 kernels with the plain epilogue (training, sm_90,
  // fp16/bf16, the linear_gemm_sm90 shapes): gemm_inter_dgrad, gemm_attn_out_dgrad and, in Pre-LN,
  // gemm_qkv_dgrad (Post-LN's adds into grad_input: cuBLASLt with beta = 1), instead of cuBLASLt.
  // They read the weights in place (sm90_weight_in_place) or, with DSKC_SM90_WEIGHT=transpose, the
  // backward first writes inter_wᵀ, attn_owᵀ and attn_qkvwᵀ into the workspace (transpose_* on the
  // side stream). DSKC_DGRAD_GEMM picks.
  bool dgrad_gemm_sm90 = false;
  // The backward's gemm_sm90 data gradients dY·W (gemm_output_dgrad, and the dgrad_gemm_sm90 ones) read
  // the weight W [k, n] as stored: each pipeline stage's B is two [64 k][64 n] TMA boxes that the
  // wgmmas read N-major (gemm_sm90_impl<…, kBNMajor = true>). Otherwise (Sm90Weight::Transpose)
  // weight_transpose kernels first write Wᵀ into workspace tensors (*_t) that gemm_sm90 reads K-major.
  // DSKC_SM90_WEIGHT picks (bench/NOTES.md v54).
  bool sm90_weight_in_place = false;
};

// Which attention implementation a plan uses. The fused one needs fp16/bf16, a head dim that is a
// multiple of 16 and at most 128, and batch_size·heads <= 65535 (grid.y); other layers always use
// the unfused path.
enum class AttentionPath {
  FromEnvironment,      // DSKC_ATTENTION=unfused forces the unfused path; unset, "auto" or "fused": as below
  FusedWhereSupported,  // fused whenever the layer supports it
  Unfused,              // batched GEMMs + softmax kernels (for comparison and debugging)
};
// Where the fused attention forward takes its dropout keep mask from (only matters for fused
// attention with attention dropout in training). The flags are the same either way.
enum class AttnMask {
  FromEnvironment,  // DSKC_ATTN_MASK: unset, "" or "ln" -> LayerNorm; "kernel" -> Kernel; "inline" -> Inline
  Inline,           // attn_flash_fwd draws it with Philox per tile (and stores the saved bits)
  Kernel,           // attn_dropout_bits_fwd writes the bits just before attn_flash_fwd, which reads them
  LayerNorm,        // as Kernel, but in Pre-LN the first LayerNorm's launch writes them (attn_bits_in_ln)
};
// Where the backward rewrites the keep bits under attn_dropout_checkpoint (fused attention).
enum class AttnBitsBwd {
  FromEnvironment,  // DSKC_ATTN_BITS_BWD: unset, "" or "auto" -> Auto; "dot" -> Dot; "kernel" -> Kernel;
                    // "saved" -> Saved
  Auto,             // the LayerNorm re-run where there is one (attn_bits_bwd_in_ln), else as Kernel
  Dot,              // attn_flash_bwd_dot's launch (attn_bits_bwd_in_dot)
  Kernel,           // the standalone attn_dropout_bits_bwd (first on the side stream)
  Saved,            // nowhere: the forward's bits are kept, as DeepSpeed's attn_dropout_checkpoint keeps its
                    // dropout mask (the dropped-out probabilities, never stored by the fused attention, are
                    // what the flag checkpoints); the layer then runs as without the flag
};
// How the fused attention backward produces dQ.
enum class AttnDq {
  FromEnvironment,  // DSKC_ATTN_DQ: unset, "" or "fused" -> Fused; "gemm" -> Gemm; "kernel"; "atomic"
  Gemm,             // attn_flash_bwd_dkdv also writes dSᵀ into grad_scores; the batched GEMM gemm_attn_dq
  Kernel,           // attn_flash_bwd_dq recomputes P and dS per query tile (no scores buffer)
  Atomic,           // stochastic_mode only: attn_flash_bwd_dkdvdq adds dQ shares with fp32 atomics
  Fused,            // the wgmma dK/dV kernel also computes dQ where one block covers every key (sequences
                    // up to 128, attn_bwd_wgmma_supported); elsewhere as Gemm
  Reduce,           // stochastic_mode only: the wgmma dK/dV kernel (one warpgroup per block) adds each
                    // key tile's dQ share into an fp32 accumulator by TMA reductions, attn_dq_convert
                    // writes dQ (LayerPlan::attn_dq_reduce); where the wgmma kernel does not apply, as Gemm
  Ring,             // as Fused up to 128 keys; from 129 to 512 (one warpgroup per block) the wgmma kernel's
                    // blocks form clusters of ceil(S/64) that pass each query tile's partial dQ around a
                    // ring in distributed shared memory (LayerPlan::attn_dq_ring; deterministic; not the
                    // default: slower than the dQ GEMM at (16,512), bench/NOTES.md v45); elsewhere as Gemm
};
// Which kernel runs the dQ GEMM of the wgmma attention backward (LayerPlan::attn_dq_wgmma).
enum class AttnDqGemm {
  FromEnvironment,  // DSKC_ATTN_DQ_GEMM: unset or "" -> kAttnDqGemmDefault; "cublas", "wgmma"
  Cublas,           // cuBLAS's batched GEMM over pointer arrays (gemm_attn_dq)
  Wgmma,            // attn_dq_wgmma (templates/attn_dq_wgmma.cuh): dSᵀ streamed through a TMA ring
                    // (the default: 9% less dQ time than cuBLAS's at (16,512), bench/NOTES.md v53)
};
constexpr AttnDqGemm kAttnDqGemmDefault = AttnDqGemm::Wgmma;  // bench/NOTES.md v53
// Which kernel computes dK, dV (and dSᵀ) with the dQ GEMM (LayerPlan::attn_bwd_wgmma).
enum class AttnBwd {
  FromEnvironment,  // DSKC_ATTN_BWD: unset or "" -> kAttnBwdDefault; "sync", "wgmma", "wgmma2"
  Sync,             // the mma.sync kernel (templates/attn_flash_bwd.cuh), every arch
  Wgmma,            // sm_90 where supported: the wgmma kernel, one math warpgroup per block (two blocks per SM)
  Wgmma2,           // the same with two math warpgroups per block sharing each Q/dO stage (one block per SM)
};
constexpr AttnBwd kAttnBwdDefault = AttnBwd::Wgmma;
// Whether the clustered fused-dQ attention backward runs persistent (LayerPlan::attn_bwd_persist).
enum class AttnBwdPersist {
  FromEnvironment,  // DSKC_ATTN_BWD_PERSIST: unset, "", "on" or a cluster count -> On; "off" -> Off
  Off,              // a cluster of two blocks per head
  On,               // clusters walk the heads (attn_flash_bwd_wgmma_persist_impl)
};
// Which kernel runs the fused attention forward (LayerPlan::attn_fwd_wgmma).
enum class AttnFwd {
  FromEnvironment,  // DSKC_ATTN_FWD: unset or "" -> kAttnFwdDefault; "sync", "wgmma", "wgmma3"
  Sync,             // the mma.sync kernel (templates/attn_flash_fwd.cuh), every arch
  Wgmma,            // sm_90 where supported: the wgmma kernel with two K/V stages (four blocks per SM)
  Wgmma3,           // the same with three K/V stages (three blocks per SM)
};
constexpr AttnFwd kAttnFwdDefault = AttnFwd::Wgmma;
// How the wgmma attention kernels write their outputs (LayerPlan::attn_tma_stores).
enum class AttnStore {
  FromEnvironment,  // DSKC_ATTN_STORE: unset, "" or "tma" -> Tma; "rows" -> Rows
  Tma,              // each tile staged in shared memory (stmatrix), one TMA store per tile
  Rows,             // 4-byte stores straight from the accumulator layout
};
// Where tanh-GELU layers compute the GELU and its gradient (LayerPlan::gelu_in_gemm).
enum class GeluPath {
  FromEnvironment,         // DSKC_GELU: unset, "" or "epilogue" -> EpilogueWhereSupported; "kernel" -> Kernel
  EpilogueWhereSupported,  // cuBLASLt GELU_AUX_BIAS / DGELU epilogues where LayerPlan::gelu_in_gemm allows
  Kernel,                  // bias_gelu_fwd / bias_gelu_bwd (always for the erf GELU)
};
// Where fp16/bf16 layers sum their four bias gradients (fp32 layers always use partials).
enum class BiasGrad {
  FromEnvironment,  // DSKC_BIAS_GRAD: unset, "" or "gemv" -> Gemv; "epilogue" -> Epilogue; "partials" -> Partials
  Gemv,             // a column-sum GEMM ones[1, B·S]·dY per bias, next to the weight gradient (the
                    // BGRADB epilogue slows BERT-Large's weight gradients by 12-45% on the H200)
  Epilogue,         // the weight-gradient GEMMs' cuBLASLt BGRADB epilogue
  Partials,         // row kernels write per-block partial sums; param_grad_reduce sums them
};
// Who runs the FFN's GELU GEMMs (LayerPlan::ffn_gemm_sm90 / ffn_gemm_sm90_bwd).
enum class FfnGemm {
  FromEnvironment,  // DSKC_FFN_GEMM: unset or "" -> the default below; "cublas", "sm90_fwd", "sm90"
  Cublas,           // cuBLASLt (+ bias_gelu_fwd / bias_gelu_bwd, or its tanh GELU epilogues)
  Sm90Forward,      // gemm_sm90 for the intermediate GEMM (forward) where supported; cuBLASLt backward
  Sm90,             // gemm_sm90 for both GELU GEMMs where supported
};
constexpr FfnGemm kFfnGemmDefault = FfnGemm::Sm90;
// What the forward keeps for the GELU backward where both GELU GEMMs are gemm_sm90 and GELU(h) is
// kept (LayerPlan::gelu_grad_saved).
enum class GeluSave {
  FromEnvironment,  // DSKC_GELU_SAVE: unset or "" -> the default below; "grad", "input"
  Grad,             // GELU'(h): gemm_output_dgrad multiplies by it (no GELU arithmetic in the backward)
  Input,            // h: gemm_output_dgrad computes GELU'(h) in its epilogue
};
constexpr GeluSave kGeluSaveDefault = GeluSave::Grad;
// Where Pre-LN's output GEMM's bias, dropout and residual add run (LayerPlan::output_gemm_fused).
enum class OutputGemm {
  FromEnvironment,  // DSKC_OUTPUT_GEMM: unset, "" or "separate" -> Separate; "fused" -> Fused
  Separate,         // bias_dropout_residual_fwd_ffn after the GEMM
  Fused,            // gemm_sm90's kBiasDropoutResidual epilogue, where the output GEMM is gemm_sm90
};
// Who runs the backward's data-gradient GEMMs (LayerPlan::dgrad_gemm_sm90).
enum class DgradGemm {
  FromEnvironment,  // DSKC_DGRAD_GEMM: unset or "" -> the default below; "cublas", "sm90"
  Cublas,           // cuBLASLt
  Sm90,             // gemm_sm90 (kPlain) on the weights (sm90_weight_in_place) or Wᵀ, where supported
};
constexpr DgradGemm kDgradGemmDefault = DgradGemm::Cublas;
// How the backward's gemm_sm90 data gradients get their weight operand (LayerPlan::sm90_weight_in_place).
enum class Sm90Weight {
  FromEnvironment,  // DSKC_SM90_WEIGHT: unset or "" -> the default below; "in_place", "transpose"
  InPlace,          // W read as stored, N-major by the wgmmas: no transpose kernel, no Wᵀ workspace
                    // (the default: bitwise the same, the layer 1.9-2.6% faster, bench/NOTES.md v54)
  Transpose,        // weight_transpose writes Wᵀ first (the form before v54)
};
constexpr Sm90Weight kSm90WeightDefault = Sm90Weight::InPlace;  // bench/NOTES.md v54
// Who runs the forward's QKV, attention-output and output GEMMs (LayerPlan::linear_gemm_sm90).
enum class LinearGemm {
  FromEnvironment,  // DSKC_LINEAR_GEMM: unset or "" -> the default below; "cublas", "sm90"
  Cublas,           // cuBLASLt
  Sm90,             // gemm_sm90 (kBias / kPlain epilogues) where supported
};
// cuBLASLt: equal to gemm_sm90 in burst, 1-1.5% faster sustained (power-capped) in four calls
// (bench/NOTES.md v32 f, v33).
constexpr LinearGemm kLinearGemmDefault = LinearGemm::Cublas;
// How layernorm_bwd lays out its rows (LayerPlan::ln_bwd_warp_rows).
enum class LnBwd {
  FromEnvironment,  // DSKC_LN_BWD: unset, "" or "warp" -> WarpRows; "block" -> BlockRows
  WarpRows,         // a warp per row where rows are at most kWarpRowVecs vectors
  BlockRows,        // a block per row, kGradRowsPerBlock rows in turn
};
struct PlanOptions {
  AttentionPath attention = AttentionPath::FromEnvironment;
  AttnMask attn_mask = AttnMask::FromEnvironment;
  AttnDq attn_dq = AttnDq::FromEnvironment;
  BiasGrad bias_grad = BiasGrad::FromEnvironment;
  GeluPath gelu = GeluPath::FromEnvironment;
  // Most K/V buffers attn_flash_fwd may use (1 or 2; 0: DSKC_ATTN_FWD_STAGES, default 1). The plan
  // uses 2 only where they fit (LayerPlan::attn_fwd_stages).
  int attn_fwd_stages = 0;
  // LayerPlan::gemm_gelu_regions (2 or 3; 0: DSKC_GEMM_GELU_REGIONS, default 2).
  int gemm_gelu_regions = 0;
  LnBwd ln_bwd = LnBwd::FromEnvironment;
  FfnGemm ffn_gemm = FfnGemm::FromEnvironment;
  GeluSave gelu_save = GeluSave::FromEnvironment;
  LinearGemm linear_gemm = LinearGemm::FromEnvironment;
  // The GPU the module is built for ("sm_80" .. "sm_90"; empty: not known). Kernels that exist for one
  // architecture only (gemm_sm90) are planned only for it.
  std::string arch = "";
  AttnBwd attn_bwd = AttnBwd::FromEnvironment;
  AttnFwd attn_fwd = AttnFwd::FromEnvironment;
  AttnBitsBwd attn_bits_bwd = AttnBitsBwd::FromEnvironment;
  OutputGemm output_gemm = OutputGemm::FromEnvironment;
  DgradGemm dgrad_gemm = DgradGemm::FromEnvironment;
  Sm90Weight sm90_weight = Sm90Weight::FromEnvironment;
  AttnStore attn_store = AttnStore::FromEnvironment;
  AttnBwdPersist attn_bwd_persist = AttnBwdPersist::FromEnvironment;
  AttnDqGemm attn_dq_gemm = AttnDqGemm::FromEnvironment;
};

LayerPlan make_plan(const LayerConfig& cfg, const PlanOptions& opt = {});
bool fused_attention_supported(const LayerConfig& cfg);
// Reads DSKC_ATTENTION (unset, "", "auto", "fused" -> FusedWhereSupported; "unfused" -> Unfused);
// any other value is an Error(Config) naming the variable.
AttentionPath attention_path_from_env();
// Reads DSKC_ATTN_MASK (unset, "", "ln" -> LayerNorm; "kernel" -> Kernel; "inline" -> Inline); any other
// value is an Error(Config) naming the variable.
AttnMask attn_mask_from_env();
// Reads DSKC_LN_BWD (unset, "", "warp" -> WarpRows; "block" -> BlockRows); any other value is an
// Error(Config) naming the variable.
LnBwd ln_bwd_from_env();
// Reads DSKC_ATTN_DQ (unset, "", "fused" -> Fused; "gemm" -> Gemm; "kernel" -> Kernel; "atomic" -> Atomic;
// "reduce" -> Reduce); any other value is an Error(Config) naming the variable. Atomic or Reduce in a
// plan whose fused attention backward runs outside stochastic_mode is an Error(Config) from make_plan
// (neither is deterministic).
AttnDq attn_dq_from_env();
// Reads DSKC_ATTN_BITS_BWD (unset, "", "auto" -> Auto; "dot" -> Dot; "kernel" -> Kernel); any other
// value is an Error(Config) naming the variable.
AttnBitsBwd attn_bits_bwd_from_env();
// Reads DSKC_OUTPUT_GEMM (unset, "", "separate" -> Separate; "fused" -> Fused); any other value is an
// Error(Config) naming the variable.
OutputGemm output_gemm_from_env();
// Reads DSKC_DGRAD_GEMM (unset, "" -> kDgradGemmDefault; "cublas", "sm90"); any other value is an
// Error(Config) naming the variable.
DgradGemm dgrad_gemm_from_env();
// Reads DSKC_SM90_WEIGHT (unset, "" -> kSm90WeightDefault; "in_place", "transpose"); any other value is
// an Error(Config) naming the variable.
Sm90Weight sm90_weight_from_env();
// Reads DSKC_ATTN_BWD (unset, "" -> kAttnBwdDefault; "sync", "wgmma", "wgmma2"); any other value is an
// Error(Config) naming the variable.
AttnBwd attn_bwd_from_env();
// Reads DSKC_ATTN_BWD_PERSIST: "off" -> 0 (off); unset, "" or "on" -> -1 (on, the default: as many
// clusters as the GPU holds at once); a positive integer N -> N (on, at most N clusters: tests, tuning); anything
// else is an Error(Config) naming the variable.
int attn_bwd_persist_from_env();
// Dynamic shared memory of the persistent form (FlashWgBwdPersistTile::smem_bytes).
int flash_wg_bwd_persist_smem_bytes();
// Reads DSKC_ATTN_DQ_GEMM (unset, "" -> kAttnDqGemmDefault; "cublas", "wgmma"); any other value is an
// Error(Config) naming the variable.
AttnDqGemm attn_dq_gemm_from_env();
// Dynamic shared memory of attn_dq_wgmma (AttnDqWgTile::smem_bytes).
int attn_dq_wgmma_smem_bytes();
// Whether a layer's fused attention backward can use the wgmma dK/dV kernel on `arch`.
bool attn_bwd_wgmma_supported(const LayerConfig& cfg, const std::string& arch);
// Dynamic shared memory of that kernel with `wgs` math warpgroups (FlashWgBwdTile::smem_bytes).
int flash_wg_bwd_smem_bytes(int wgs, bool dq_fused = false, int cluster = 1, bool dq_reduce = false);
// The most keys the ring form of the fused dQ (AttnDq::Ring) covers: 8 blocks of 64, the largest
// portable cluster.
constexpr int kAttnDqRingMaxSeq = 512;
// Reads DSKC_ATTN_FWD (unset, "" -> kAttnFwdDefault; "sync", "wgmma", "wgmma3"); any other value is an
// Error(Config) naming the variable.
AttnFwd attn_fwd_from_env();
// Reads DSKC_ATTN_STORE (unset, "", "tma" -> Tma; "rows" -> Rows); any other value is an Error(Config).
AttnStore attn_store_from_env();
// Whether a layer's fused attention forward can use the wgmma kernel on `arch` (mask_kernel: the keep
// flags come from attn_dropout_bits_fwd; with attention dropout in training they must).
bool attn_fwd_wgmma_supported(const LayerConfig& cfg, const std::string& arch, bool mask_kernel);
// Dynamic shared memory of that kernel with `stages` K/V stages for rows of up to max_seq keys
// (FlashWgFwdTile::smem_bytes).
int flash_wg_fwd_smem_bytes(int stages, int max_seq);
// Reads DSKC_ATTN_FWD_STAGES (unset, "", "1" -> 1; "2" -> 2); any other value is an Error(Config)
// naming the variable.
int attn_fwd_stages_from_env();
// Reads DSKC_GEMM_GELU_REGIONS (unset, "" -> 2; "2", "3"); any other value is an Error(Config).
int gemm_gelu_regions_from_env();
// DSKC_GEMM_TILES: unset, "" or "static" -> false; "dynamic" -> true; else Error(Config).
bool gemm_dynamic_tiles_from_env();
// Reads DSKC_BIAS_GRAD (unset, "", "gemv" -> Gemv; "epilogue" -> Epilogue; "partials" -> Partials); any
// other value is an Error(Config) naming the variable.
BiasGrad bias_grad_from_env();
// Reads DSKC_FFN_GEMM (unset, "" -> kFfnGemmDefault; "cublas", "sm90_fwd", "sm90"); any other value is
// an Error(Config) naming the variable.
FfnGemm ffn_gemm_from_env();
// Reads DSKC_GELU_SAVE (unset, "" -> kGeluSaveDefault; "grad", "input"); any other value is an
// Error(Config) naming the variable.
GeluSave gelu_save_from_env();
// Whether a layer's FFN GEMMs can run as gemm_sm90 on `arch` (ignoring DSKC_FFN_GEMM and the bias
// gradient source).
bool ffn_gemm_sm90_supported(const LayerConfig& cfg, const std::string& arch);
// Reads DSKC_LINEAR_GEMM (unset, "" -> kLinearGemmDefault; "cublas", "sm90"); any other value is an
// Error(Config) naming the variable.
LinearGemm linear_gemm_from_env();
// Whether a layer's QKV, attention-output and output GEMMs can run as gemm_sm90 on `arch`.
bool linear_gemm_sm90_supported(const LayerConfig& cfg, const std::string& arch);
// Reads DSKC_GELU (unset, "", "epilogue" -> EpilogueWhereSupported; "kernel" -> Kernel); any other
// value is an Error(Config) naming the variable.
GeluPath gelu_path_from_env();
// Reads DSKC_GELU_CKPT_SCRATCH (unset, "", "own" -> true; "shared" -> false): whether Pre-LN with
// gelu_checkpoint + normalize_invertible gives the attention block's gradient its own scratch
// (LayerPlan::attn_grad_own_scratch); any other value is an Error(Config) naming the variable.
bool gelu_ckpt_own_scratch_from_env();

// Rows of attention scores are padded to a multiple of this many elements (16-byte aligned).
constexpr int kSeqPadElems = 8;
inline int padded_seq(int seq) { return (seq + kSeqPadElems - 1) / kSeqPadElems * kSeqPadElems; }
constexpr int kGradRowsPerBlock = 8;  // must match templates/common/row_tiles.cuh
// Row kernels (GridKind::Rows) of at most kWarpRowVecs vectors per row run a row per warp,
// kWarpRowsPerBlock rows per block (LayerNormShape in templates/layernorm_fwd.cuh).
constexpr int kWarpRowVecs = 128;
constexpr int kWarpRowsPerBlock = 4;
constexpr int kLnBwdWarps = 4;  // LayerNormBwdShape::kWarps (templates/layernorm_bwd.cuh)
inline int grad_parts(int rows) { return (rows + kGradRowsPerBlock - 1) / kGradRowsPerBlock; }
// 32-bit words per attention row of the dropout keep bits (templates/common/flash.cuh keep_words).
inline int keep_words(int seq) { return (seq + 31) / 32; }

// Mirrors of the templates' launch-shape rules (checked by static_assert in generated source).
int vec_width(DType t, int cols);
int row_threads(int vecs);
int attn_rows_per_block(DType t, int max_seq);  // mirrors templates/common/attn_rows.cuh
// Mirrors templates/common/flash.cuh: warps of the fused attention backward kernels.
inline int flash_bwd_warps(int head_dim) { return head_dim <= 64 ? 4 : 2; }
// Mirrors FlashFwdTile::smem_bytes (templates/common/flash.cuh): static shared memory of
// attn_flash_fwd with `stages` K/V buffers, byte flags (the kernel draws the dropout mask) or bit
// words (it reads the bits).
int flash_fwd_smem_bytes(int head_dim, int stages, bool byte_flags, bool word_flags);
// Mirrors templates/gemm_sm90.cuh (GemmSm90Tile) and templates/weight_transpose.cuh.
constexpr int kGemmSm90BlockM = 128, kGemmSm90BlockN = 128, kGemmSm90BlockK = 64, kGemmSm90Threads = 384;
// Dynamic shared memory of a gemm_sm90 kernel (GemmSm90Tile::smem_bytes): its pipeline stages
// (7 − regions: 4 or 5), the two math warpgroups' epilogue buffers (`regions` 64-row regions
// each: three for the backward's GELU′ epilogues, two for the plain and bias-dropout-residual ones,
// LayerPlan::gemm_gelu_regions for the forward's GELU ones; a region is two TMA boxes of 64 columns
// x kGemmSm90EpiBoxRows rows), the mbarriers, and 1024 bytes to align the dynamic base for the
// 128-byte swizzle.
constexpr int kGemmSm90EpiBoxRows = 64;
constexpr int gemm_sm90_stages(int regions) { return 7 - regions; }
constexpr int gemm_sm90_smem_bytes(int regions) {
  return 1024 + gemm_sm90_stages(regions) * (kGemmSm90BlockM + kGemmSm90BlockN) * kGemmSm90BlockK * 2 +
         2 * regions * 2 * kGemmSm90EpiBoxRows * 128 + 8 * (2 * gemm_sm90_stages(regions) + 2);
}
static_assert(gemm_sm90_smem_bytes(3) == 230480 && gemm_sm90_smem_bytes(2) == 230496);
constexpr int kWeightTransposeTile = 64, kWeightTransposeThreads = 256;
// Mirrors templates/attn_dropout_bits.cuh (AttnDropoutBitsTile): threads and query rows per block.
constexpr int kAttnDropoutBitsThreads = 256;
constexpr int kAttnDropoutBitsRows = 64;

std::string config_hash(const LayerConfig& cfg);

}  // namespace dskc
