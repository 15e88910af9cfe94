// make_plan: the kernel list and the activation-memory plan of one layer (see plan.h).
// Saved-tensor rules (training only; inference keeps nothing):
//   qkv, ctx, the LayerNorm outputs feeding GEMMs: always; h (GELU input) always, or GELU'(h) in its
//   place where gemm_sm90 runs both GELU GEMMs without gelu_checkpoint (gelu_grad_saved);
//   unfused attention: P (softmax output), and P_drop unless attn_dropout_checkpoint (recomputed
//   from P and the RNG) or no attention dropout;
//   fused attention (attn_flash_*): the row logsumexp attn_lse [B, heads, S] fp32 (backward
//   recomputes P from Q, K and it), and with attention dropout the keep mask as bits,
//   attn_dropout_bits [B, heads, S, ceil(S/32)] uint32, which the backward kernels read, unless
//   attn_dropout_checkpoint: then the bits are a workspace tensor (shared by all layers) that the
//   standalone kernel attn_dropout_bits_bwd rewrites from the Philox rule before they run.
//   The forward draws the mask in attn_flash_fwd (storing the saved bits), or with
//   DSKC_ATTN_MASK=kernel attn_dropout_bits_fwd writes the bits first and attn_flash_fwd reads them
//   (=ln, the default: in Pre-LN the first LayerNorm's launch writes them, and under
//   attn_dropout_checkpoint + normalize_invertible its re-run in backward rewrites them);
//   stochastic_mode adds no saved tensor: its single-pass attention backward (attn_flash_bwd_dkdvdq
//   in place of attn_flash_bwd_dkdv + attn_flash_bwd_dq) accumulates dQ in fp32 with atomics in the
//   workspace tensors attn_dq_acc [B, S, H] and attn_dq_tickets [B, heads], shared by all layers;
//   the default mode's dQ GEMM reads dSᵀ from the workspace tensor grad_scores [B, heads, S, padded S]
//   (DSKC_ATTN_DQ=kernel: attn_flash_bwd_dq instead, no scores buffer);
//   g = GELU(h) unless gelu_checkpoint (rebuilt from h by the GELU backward pass);
//   LayerNorm inputs and means unless normalize_invertible (x̂ rebuilt from the LN output);
//   Pre-LN's first LayerNorm (input owned by the caller): its output, unless normalize_invertible
//   (backward re-runs it from the input and the kept mean/rstd: −[B, S, H] per layer).
// Inputs and outputs of the layer belong to the caller, who keeps them until backward.
#include "compiler/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "compiler/env_choice.h"
#include "compiler/errors.h"
#include "compiler/sha256.h"

namespace dskc {

int vec_width(DType t, int cols) {
  const int max = 16 / dtype_bytes(t);
  if (cols % max == 0) return max;
  if (cols % 4 == 0 && max >= 4) return 4;
  if (cols % 2 == 0) return 2;
  return 1;
}

int row_threads(int vecs) {
  int raw = vecs >= 512 ? 512 : (vecs + 31) / 32 * 32;
  return raw < 32 ? 32 : raw;
}

int attn_rows_per_block(DType t, int max_seq) {
  const int max_v = vec_width(t, kSeqPadElems);
  const int v = max_seq >= 32 * max_v ? max_v : (max_seq >= 128 && max_v >= 4) ? 4 : (max_seq >= 64 && max_v >= 2) ? 2 : 1;
  const int iters = (max_seq + 32 * v - 1) / (32 * v);
  return 4 * (iters == 1 ? 2 : 1);
}

int64_t TensorInfo::bytes(int batch, int seq) const {
  const int64_t tokens = static_cast<int64_t>(batch) * seq;
  switch (extent) {
    case Extent::Tokens: return tokens * width * elem_bytes;
    case Extent::Scores: return tokens * width * padded_seq(seq) * elem_bytes;
    case Extent::RowStats: return tokens * elem_bytes;
    case Extent::RowTiles: return static_cast<int64_t>(grad_parts(static_cast<int>(tokens))) * width * elem_bytes;
    case Extent::HeadRows: return tokens * width * elem_bytes;
    case Extent::HeadRowWords: return tokens * width * keep_words(seq) * elem_bytes;
    case Extent::Heads: return static_cast<int64_t>(batch) * width * elem_bytes;
    case Extent::Fixed: return width * elem_bytes;
  }
  return 0;
}

int64_t LayerPlan::activation_bytes(int batch, int seq) const {
  int64_t total = 0;
  for (const auto& t : saved) total += t.bytes(batch, seq);
  return total;
}

int64_t LayerPlan::workspace_bytes(int batch, int seq) const {
  int64_t total = 0;
  for (const auto& t : workspace) total += t.bytes(batch, seq);
  return total;
}

const KernelInfo* LayerPlan::find_kernel(const std::string& name) const {
  for (const auto& k : kernels)
    if (k.name == name) return &k;
  return nullptr;
}

const TensorInfo* LayerPlan::find_saved(const std::string& name) const {
  for (const auto& t : saved)
    if (t.name == name) return &t;
  return nullptr;
}

bool fused_attention_supported(const LayerConfig& c) {
  const int d = c.head_dim();
  return c.dtype() != DType::F32 && d % 16 == 0 && d <= 128 &&
         static_cast<int64_t>(c.batch_size) * c.heads <= 65535;  // grid.y = B·heads
}

AttentionPath attention_path_from_env() {
  return env_choice("DSKC_ATTENTION", AttentionPath::FusedWhereSupported,
                    {{"auto", AttentionPath::FusedWhereSupported},
                     {"fused", AttentionPath::FusedWhereSupported},
                     {"unfused", AttentionPath::Unfused}},
                    "\"unfused\" (batched GEMMs + softmax kernels) or \"auto\"/\"fused\" (fused attention where the "
                    "layer supports it)");
}

AttnMask attn_mask_from_env() {
  return env_choice("DSKC_ATTN_MASK", AttnMask::LayerNorm,
                    {{"ln", AttnMask::LayerNorm}, {"kernel", AttnMask::Kernel}, {"inline", AttnMask::Inline}},
                    "\"ln\" (the default: as \"kernel\", but in Pre-LN the first LayerNorm's launch writes the "
                    "bits), \"kernel\" (the attn_dropout_bits kernel writes the attention dropout keep bits "
                    "before attn_flash_fwd, which reads them) or \"inline\" (attn_flash_fwd draws the mask with "
                    "Philox itself)");
}

LnBwd ln_bwd_from_env() {
  return env_choice("DSKC_LN_BWD", LnBwd::WarpRows, {{"warp", LnBwd::WarpRows}, {"block", LnBwd::BlockRows}},
                    "\"warp\" (the default: a warp per row where a row is at most 128 vectors) or \"block\" (a "
                    "block per row, eight rows per block in turn)");
}

AttnBitsBwd attn_bits_bwd_from_env() {
  return env_choice("DSKC_ATTN_BITS_BWD", AttnBitsBwd::Auto,
                    {{"auto", AttnBitsBwd::Auto},
                     {"dot", AttnBitsBwd::Dot},
                     {"kernel", AttnBitsBwd::Kernel},
                     {"saved", AttnBitsBwd::Saved}},
                    "\"auto\" (the default: under attn_dropout_checkpoint the backward rewrites the keep bits in "
                    "the LayerNorm re-run of Pre-LN + normalize_invertible, else with the standalone "
                    "attn_dropout_bits_bwd), \"dot\" (in attn_flash_bwd_dot's launch), \"kernel\" (always "
                    "attn_dropout_bits_bwd) or \"saved\" (the forward's bits are kept, as DeepSpeed keeps its "
                    "dropout mask: nothing rewritten)");
}

OutputGemm output_gemm_from_env() {
  return env_choice("DSKC_OUTPUT_GEMM", OutputGemm::Separate,
                    {{"separate", OutputGemm::Separate}, {"fused", OutputGemm::Fused}},
                    "\"separate\" (the default: bias_dropout_residual_fwd_ffn after Pre-LN's output GEMM) or "
                    "\"fused\" (on Hopper the gemm_sm90 output GEMM's epilogue adds output_b, the dropout and "
                    "the residual and writes the layer output)");
}

AttnDq attn_dq_from_env() {
  return env_choice("DSKC_ATTN_DQ", AttnDq::Fused,
                    {{"gemm", AttnDq::Gemm},
                     {"kernel", AttnDq::Kernel},
                     {"atomic", AttnDq::Atomic},
                     {"fused", AttnDq::Fused},
                     {"reduce", AttnDq::Reduce},
                     {"ring", AttnDq::Ring}},
                    "\"fused\" (the default: on Hopper at sequences up to 128 the wgmma dK/dV kernel computes dQ "
                    "too; elsewhere as gemm), \"gemm\" (attn_flash_bwd_dkdv stores "
                    "dS and one batched GEMM computes dQ), \"kernel\" (attn_flash_bwd_dq recomputes P and dS per "
                    "query tile), \"atomic\" (stochastic_mode only: attn_flash_bwd_dkdvdq adds dQ shares with fp32 "
                    "atomics), \"reduce\" (stochastic_mode only: the wgmma dK/dV kernel adds dQ shares by TMA "
                    "reductions) or \"ring\" (as fused, and from 129 to 512 keys the wgmma kernel's blocks pass "
                    "the partial dQ sums around a ring of up to 8 blocks)");
}

AttnBwd attn_bwd_from_env() {
  return env_choice("DSKC_ATTN_BWD", kAttnBwdDefault,
                    {{"sync", AttnBwd::Sync}, {"wgmma", AttnBwd::Wgmma}, {"wgmma2", AttnBwd::Wgmma2}},
                    "\"wgmma\" (the default: on Hopper, fp16/bf16 at head dim 64, attn_flash_bwd_dkdv on warpgroup "
                    "MMA, one math warpgroup per block), \"wgmma2\" (two math warpgroups per block) or \"sync\" "
                    "(the mma.sync kernel)");
}

AttnDqGemm attn_dq_gemm_from_env() {
  return env_choice("DSKC_ATTN_DQ_GEMM", kAttnDqGemmDefault,
                    {{"cublas", AttnDqGemm::Cublas}, {"wgmma", AttnDqGemm::Wgmma}},
                    "\"wgmma\" (the default: on Hopper, with the wgmma dK/dV kernel, the dQ GEMM above 128 keys is "
                    "attn_dq_wgmma, which streams dSᵀ through a TMA ring) or \"cublas\" (cuBLAS's batched GEMM)");
}

int attn_dq_wgmma_smem_bytes() {
  // Mirrors AttnDqWgTile (templates/attn_dq_wgmma.cuh): 4 stages of two dSᵀ boxes and one K box (8 KB
  // each), a barrier per stage.
  const int stages = 4, box = 64 * 128;
  return 1024 + stages * 3 * box + 8 * stages;
}

bool attn_bwd_wgmma_supported(const LayerConfig& c, const std::string& arch) {
  // Head dim 64: 128-byte tile rows; the TMA views' row strides (3H, H, padded S elements) are then
  // multiples of 16 bytes.
  return arch == "sm_90" && c.dtype() != DType::F32 && c.head_dim() == 64;
}

int flash_wg_bwd_smem_bytes(int wgs, bool dq_fused, int cluster, bool dq_reduce) {
  // Mirrors FlashWgBwdTile (templates/attn_flash_bwd_wgmma.cuh): K/V tiles, 3 Q/dO stages, two dSᵀ
  // regions per warpgroup (8 KB tiles), per stage the 64 queries' L, D and 2 keep words per
  // warpgroup, (fused dQ with two key halves) one 64 x 64 fp32 dQ share per warpgroup of a block of
  // two or one per block of a cluster, the key mask, a counter per stage, 4 barriers.
  const int tile = 64 * 128, stages = 3, keys = 64 * wgs, row_bytes = (2 + 2 * wgs) * 64 * 4;
  // The ring (cluster > 2): one dS region, two partial-sum slots and their full / empty barriers.
  const int share = 64 * 64 * 4;
  const bool ring = cluster > 2;
  const int regions = ring ? 1 : 2 * wgs;
  const int xchg = dq_reduce ? share : ring ? 2 * share : !dq_fused ? 0 : wgs == 2 ? 2 * share : cluster == 2 ? share : 0;
  return 1024 + 2 * wgs * tile + stages * 2 * tile + regions * tile + stages * row_bytes + xchg + keys * 4 +
         (4 * stages + 7) / 8 * 8 + 8 * (stages + 1 + (ring ? 4 : 0));
}

AttnFwd attn_fwd_from_env() {
  return env_choice("DSKC_ATTN_FWD", kAttnFwdDefault,
                    {{"sync", AttnFwd::Sync}, {"wgmma", AttnFwd::Wgmma}, {"wgmma3", AttnFwd::Wgmma3}},
                    "\"wgmma\" (the default: on Hopper, fp16/bf16 at head dim 64, attn_flash_fwd on warpgroup MMA "
                    "with two K/V stages, four blocks per SM), \"wgmma3\" (three stages, three blocks per SM) or "
                    "\"sync\" (the mma.sync kernel)");
}

bool attn_fwd_wgmma_supported(const LayerConfig& c, const std::string& arch, bool mask_kernel) {
  // Head dim 64: 128-byte tile rows; qkv's row stride (3H elements) is then a multiple of 16 bytes.
  // The kernel takes the keep flags only from the bits (no Philox in it).
  const bool attn_drop = c.training && c.attn_dropout_ratio > 0;
  return arch == "sm_90" && c.dtype() != DType::F32 && c.head_dim() == 64 && (!attn_drop || mask_kernel);
}

int flash_wg_fwd_smem_bytes(int stages, int max_seq) {
  // Mirrors FlashWgFwdTile (templates/attn_flash_fwd_wgmma.cuh): the Q tile, K/V tiles per stage
  // (8 KB tiles), the fp32 key mask of a row (max_seq rounded up to 64 keys), a counter per stage,
  // stages + 1 barriers.
  const int tile = 64 * 128, mask_keys = (max_seq + 63) / 64 * 64;
  return 1024 + tile + stages * 2 * tile + mask_keys * 4 + (4 * stages + 7) / 8 * 8 + 8 * (stages + 1);
}

AttnStore attn_store_from_env() {
  return env_choice("DSKC_ATTN_STORE", AttnStore::Tma, {{"tma", AttnStore::Tma}, {"rows", AttnStore::Rows}},
                    "\"tma\" (the default: the wgmma attention kernels store their output tiles by TMA from "
                    "shared memory) or \"rows\" (4-byte stores from the accumulator layout)");
}

int attn_bwd_persist_from_env() {
  const char* v = std::getenv("DSKC_ATTN_BWD_PERSIST");
  const std::string s = v ? v : "";
  if (s == "off") return 0;
  if (s.empty() || s == "on") return -1;  // the default (bench/NOTES.md v47)
  // A cluster count: digits only, 1 .. 2^20 (the grid is 2 × that many blocks).
  if (s.size() <= 7 && s.find_first_not_of("0123456789") == std::string::npos) {
    const long n = std::stol(s);
    if (n >= 1 && n <= (1 << 20)) return static_cast<int>(n);
  }
  throw Error(ErrorKind::Config,
              fmt::format("DSKC_ATTN_BWD_PERSIST={}: expected \"on\" (the default: where the clustered fused-dQ "
                          "attention backward runs, max_seq_length 65 .. 128, clusters walk the heads, as many as the "
                          "GPU holds at once), \"off\" (a cluster of two blocks per head) or a cluster count from 1 "
                          "to 1048576 (on, with at most that many clusters)",
                          s));
}

int flash_wg_bwd_persist_smem_bytes() {
  // Mirrors FlashWgBwdPersistTile: two K/V buffers, two Q/dO stages, two dSᵀ regions (8 KB tiles),
  // the 16 KB dQ share / dQ tile, two stages' L, D and 2 keep words per query, 4 barriers.
  const int tile = 64 * 128;
  return 1024 + 4 * tile + 4 * tile + 2 * tile + 64 * 64 * 4 + 2 * 4 * 64 * 4 + 8 * 4;
}

int attn_fwd_stages_from_env() {
  return env_choice("DSKC_ATTN_FWD_STAGES", 1, {{"1", 1}, {"2", 2}},
                    "\"1\" (the default: attn_flash_fwd loads each K/V tile between two barriers) or \"2\" (it "
                    "prefetches the next tile with cp.async into a second buffer where two fit)");
}

int gemm_gelu_regions_from_env() {
  return env_choice("DSKC_GEMM_GELU_REGIONS", 2, {{"2", 2}, {"3", 3}},
                    "\"2\" (the default: gemm_inter_fwd stages h and GELU(h) in two 64-row regions per warpgroup, "
                    "five pipeline stages) or \"3\" (three regions, four stages)");
}

bool gemm_dynamic_tiles_from_env() {
  return env_choice("DSKC_GEMM_TILES", false, {{"static", false}, {"dynamic", true}},
                    "\"static\" (the default: block b of gemm_sm90's persistent grid computes tiles b, b + grid, "
                    "...) or \"dynamic\" (each block takes the next tile from a global counter)");
}

int flash_fwd_smem_bytes(int head_dim, int stages, bool byte_flags, bool word_flags) {
  const int rows = 64, keys = head_dim <= 64 ? 64 : 32;
  return 2 * (head_dim + 8) * (rows + 2 * stages * keys) + 4 * keys + (byte_flags ? rows * keys : 16) +
         (word_flags ? rows * (keys / 32) * 4 : 4);
}

GeluPath gelu_path_from_env() {
  return env_choice("DSKC_GELU", GeluPath::EpilogueWhereSupported,
                    {{"epilogue", GeluPath::EpilogueWhereSupported}, {"kernel", GeluPath::Kernel}},
                    "\"epilogue\" (the default: a tanh GELU runs in cuBLASLt's GELU_AUX_BIAS / DGELU epilogues "
                    "where the layer allows) or \"kernel\" (bias_gelu_fwd / bias_gelu_bwd)");
}

DgradGemm dgrad_gemm_from_env() {
  return env_choice("DSKC_DGRAD_GEMM", kDgradGemmDefault, {{"cublas", DgradGemm::Cublas}, {"sm90", DgradGemm::Sm90}},
                    "\"cublas\" (the backward's data-gradient GEMMs in cuBLASLt) or \"sm90\" (on Hopper the "
                    "intermediate, attention-output and, in Pre-LN, QKV data gradients are gemm_sm90 kernels on the "
                    "transposed weights)");
}

Sm90Weight sm90_weight_from_env() {
  return env_choice("DSKC_SM90_WEIGHT", kSm90WeightDefault,
                    {{"in_place", Sm90Weight::InPlace}, {"transpose", Sm90Weight::Transpose}},
                    "\"in_place\" (the default: the backward's gemm_sm90 data gradients read the weight as stored, "
                    "N-major) or \"transpose\" (weight_transpose kernels write Wᵀ into the workspace first)");
}

FfnGemm ffn_gemm_from_env() {
  return env_choice("DSKC_FFN_GEMM", kFfnGemmDefault,
                    {{"cublas", FfnGemm::Cublas}, {"sm90_fwd", FfnGemm::Sm90Forward}, {"sm90", FfnGemm::Sm90}},
                    "\"cublas\" (cuBLASLt GEMMs + the bias_gelu kernels or cuBLASLt's tanh GELU epilogues), "
                    "\"sm90_fwd\" (on Hopper the intermediate GEMM is dskc's gemm_sm90 with the GELU in its epilogue) "
                    "or \"sm90\" (the output layer's data gradient too, with GELU' in its epilogue)");
}

GeluSave gelu_save_from_env() {
  return env_choice("DSKC_GELU_SAVE", kGeluSaveDefault, {{"grad", GeluSave::Grad}, {"input", GeluSave::Input}},
                    "\"grad\" (where both GELU GEMMs are gemm_sm90 and GELU(h) is kept, the forward keeps GELU'(h) "
                    "for the backward) or \"input\" (it keeps h, and the backward computes GELU'(h))");
}

bool ffn_gemm_sm90_supported(const LayerConfig& c, const std::string& arch) {
  return arch == "sm_90" && c.dtype() != DType::F32 && c.intermediate_size % kGemmSm90BlockN == 0 &&
         c.hidden_size % kGemmSm90BlockK == 0 && c.hidden_size % kWeightTransposeTile == 0;
}

LinearGemm linear_gemm_from_env() {
  return env_choice("DSKC_LINEAR_GEMM", kLinearGemmDefault, {{"cublas", LinearGemm::Cublas}, {"sm90", LinearGemm::Sm90}},
                    "\"cublas\" (the forward's QKV, attention-output and output GEMMs in cuBLASLt) or \"sm90\" (on "
                    "Hopper those three are dskc's gemm_sm90 kernels with plain epilogues)");
}

bool linear_gemm_sm90_supported(const LayerConfig& c, const std::string& arch) {
  // N = 3H and H in 128-column tiles, K = H and I in 64-element k blocks.
  return arch == "sm_90" && c.dtype() != DType::F32 && c.hidden_size % kGemmSm90BlockN == 0 &&
         c.intermediate_size % kGemmSm90BlockK == 0;
}

BiasGrad bias_grad_from_env() {
  return env_choice("DSKC_BIAS_GRAD", BiasGrad::Gemv,
                    {{"gemv", BiasGrad::Gemv}, {"epilogue", BiasGrad::Epilogue}, {"partials", BiasGrad::Partials}},
                    "\"gemv\" (the default for fp16/bf16: a column-sum GEMM ones·dY per bias next to its weight "
                    "gradient), \"epilogue\" (the weight-gradient GEMMs' cuBLASLt BGRADB epilogue) or \"partials\" "
                    "(the row kernels write partial sums, as fp32 layers do)");
}

bool gelu_ckpt_own_scratch_from_env() {
  return env_choice("DSKC_GELU_CKPT_SCRATCH", true, {{"own", true}, {"shared", false}},
                    "\"own\" (the default: under Pre-LN + gelu_checkpoint + normalize_invertible the attention block's "
                    "gradient goes into the free attn_residual workspace instead of overwriting d_o, which the late "
                    "output_w gradient reads) or \"shared\" (it goes into grad_h_b "
                    "as without the flag)");
}

std::string config_hash(const LayerConfig& cfg) {
  return sha256_hex(to_json_text(cfg, -1)).substr(0, 16);
}

namespace {

struct Builder {
  const LayerConfig& c;
  LayerPlan& plan;
  DType t = c.dtype();
  int eb = dtype_bytes(t);

  void tokens(std::vector<TensorInfo>& v, const std::string& name, const std::string& shape,
              int64_t width, const std::string& why) {
    v.push_back({name, shape, Extent::Tokens, width, eb, why});
  }
  void stats(std::vector<TensorInfo>& v, const std::string& name, const std::string& why) {
    v.push_back({name, "[B, S] fp32", Extent::RowStats, 1, 4, why});
  }
  void scores(std::vector<TensorInfo>& v, const std::string& name, const std::string& why) {
    v.push_back({name, "[B, heads, S, S8]", Extent::Scores, c.heads, eb, why});
  }

  // Row kernel over kCols = cols (LayerNormShape): one warp per token row, four per block, where a
  // row is at most 128 vectors; else one block per row.
  void rows(Pass pass, const std::string& name, const std::string& op, const std::string& params,
            const std::string& inst, int cols, const std::string& fuses) {
    const int v = vec_width(t, cols);
    const bool warp_rows = cols / v <= kWarpRowVecs;
    const std::string shape = fmt::format("LayerNormShape<{}>", cols == c.hidden_size ? "kHidden" : std::to_string(cols));
    KernelInfo k{name, op, params, inst, fuses, shape + "::kThreads", pass, GridKind::Rows,
                 warp_rows ? 32 * kWarpRowsPerBlock : row_threads(cols / v), cols, v, 1};
    k.rows_per_block = warp_rows ? kWarpRowsPerBlock : 1;
    k.rows_check = shape + "::kRowsPerBlock";
    plan.kernels.push_back(k);
  }
  void tiles(Pass pass, const std::string& name, const std::string& op, const std::string& params,
             const std::string& inst, int cols, const std::string& cols_expr, const std::string& fuses) {
    const int v = vec_width(t, cols);
    plan.kernels.push_back({name, op, params, inst, fuses, fmt::format("RowTile<{}>::kThreads", cols_expr),
                            pass, GridKind::RowTiles, row_threads(cols / v), cols, v, 1});
  }
  // A LayerNorm backward over the hidden width (templates/layernorm_bwd.cuh): a row tile whose block
  // is LayerNormBwdShape's — kLnBwdWarps warps (a row each, two in turn) where the plan runs warp
  // rows and rows are at most kWarpRowVecs vectors, else RowTile's block per row.
  void ln_bwd(const std::string& name, const std::string& inst, const std::string& fuses) {
    const int H = c.hidden_size, v = vec_width(t, H);
    tiles(Pass::Backward, name, "layernorm_bwd", "LayerNormBwdParams", inst, H, "kHidden", fuses);
    KernelInfo& k = plan.kernels.back();
    k.shape_check = "LayerNormBwdShape<kHidden>::kThreads";
    if (plan.ln_bwd_warp_rows && H / v <= kWarpRowVecs) k.block = 32 * kLnBwdWarps;
  }
  void elementwise(Pass pass, const std::string& name, const std::string& op, const std::string& params,
                   const std::string& inst, int cols, const std::string& fuses) {
    plan.kernels.push_back({name, op, params, inst, fuses, "256", pass, GridKind::Elementwise, 256, cols,
                            vec_width(t, cols), 1});
  }
  void attn(Pass pass, const std::string& name, const std::string& op, const std::string& params,
            const std::string& inst, const std::string& fuses) {
    KernelInfo k{name, op, params, inst, fuses, "AttnRows::kWarps * 32", pass, GridKind::AttnRows,
                 128, 0, vec_width(t, kSeqPadElems), 1};
    k.rows_per_block = attn_rows_per_block(t, c.max_seq_length);
    plan.kernels.push_back(k);
  }
  // Fused attention kernel: grid (ceil(S / rows), B·heads); block and rows mirror common/flash.cuh.
  void flash(Pass pass, const std::string& name, const std::string& params, const std::string& inst,
             const std::string& block_expr, int block, const std::string& rows_expr, int rows_per_block,
             const std::string& fuses) {
    const bool bwd = name == "attn_flash_bwd_dkdv" || name == "attn_flash_bwd_dq" || name == "attn_flash_bwd_dkdvdq";
    const std::string op = bwd ? "attn_flash_bwd" : name;
    KernelInfo k{name, op, params, inst, fuses, block_expr, pass, GridKind::FlashTiles, block, 0, 1, 1};
    k.rows_per_block = rows_per_block;
    k.rows_check = rows_expr;
    plan.kernels.push_back(k);
  }
  // The standalone keep-bits kernel (templates/attn_dropout_bits.cuh), named after its pass: it
  // runs in forward (DSKC_ATTN_MASK=kernel) and in backward (attn_dropout_checkpoint), and a layer
  // with both needs two symbols. Same grid shape as the flash kernels.
  void dropout_bits(Pass pass, const std::string& name, const std::string& fuses) {
    flash(pass, name, "AttnDropoutBitsParams", "attn_dropout_bits_impl", "AttnDropoutBitsTile::kThreads",
          kAttnDropoutBitsThreads, "AttnDropoutBitsTile::kRows", kAttnDropoutBitsRows, fuses);
    plan.kernels.back().op = "attn_dropout_bits";
  }
  // gemm_sm90 (templates/gemm_sm90.cuh): a persistent 384-thread block per SM over 128 x 128 output
  // tiles of the [B·S, cols] product (cols = n: the constant expression n_expr; k_expr the reduction
  // length), with the TMA descriptors in a __grid_constant__ params struct.
  // b_n_major: B is the weight [k, n] as stored, read N-major (a data gradient dY·W; plan.h
  // sm90_weight_in_place).
  void gemm_sm90(Pass pass, const std::string& name, const std::string& n_expr, const std::string& k_expr,
                 const std::string& epi, int cols, const std::string& fuses, bool b_n_major = false) {
    const std::string inst =
        "gemm_sm90_impl<" + n_expr + ", " + k_expr + ", GemmEpi::" + epi + (b_n_major ? ", true>" : ">");
    // GemmEpi::regions: three for the backward's GELU′ epilogues (h's two halves and the products),
    // the plan's choice for the forward's GELU ones, two for the others
    const int regions = epi == "kDGelu" || epi == "kDGeluStoreGelu" ? 3
                        : epi == "kBiasGelu" || epi == "kBiasGeluNoPre" || epi == "kBiasGeluSaveGrad"
                            ? plan.gemm_gelu_regions
                            : 2;
    KernelInfo k{name, "gemm_sm90", "GemmSm90Params", inst, fuses, "GemmSm90Tile::kThreads", pass,
                 GridKind::Persistent, kGemmSm90Threads, cols, 8, 1};
    k.rows_per_block = kGemmSm90BlockM;
    k.rows_check = "GemmSm90Tile::kBlockM";
    k.tile_cols = kGemmSm90BlockN;
    k.min_blocks = "1";
    k.dynamic_smem = gemm_sm90_smem_bytes(regions);
    k.smem_check = "GemmSm90Tile::smem_bytes(GemmEpi::" + epi + ")";
    k.grid_constant = true;
    plan.kernels.push_back(k);
  }
  // weight_transpose (templates/weight_transpose.cuh): out [cols, rows] = Wᵀ of the weight W [rows, cols]
  // (rows, cols: constant expressions and their values), in 64 x 64 tiles.
  void transpose(const std::string& name, const std::string& rows_expr, const std::string& cols_expr, int rows,
                 int cols, const std::string& fuses) {
    KernelInfo k{name, "weight_transpose", "WeightTransposeParams",
                 "weight_transpose_impl<" + rows_expr + ", " + cols_expr + ">", fuses, "WeightTransposeTile::kThreads",
                 Pass::Backward, GridKind::Fixed, kWeightTransposeThreads, cols, 8, 1};
    k.grid_x = cols / kWeightTransposeTile;
    k.grid_y = rows / kWeightTransposeTile;
    plan.kernels.push_back(k);
  }
  void head_rows(std::vector<TensorInfo>& v, const std::string& name, const std::string& why) {
    v.push_back({name, "[B, heads, S] fp32", Extent::HeadRows, c.heads, 4, why});
  }
  void head_row_words(std::vector<TensorInfo>& v, const std::string& name, const std::string& why) {
    v.push_back({name, "[B,heads,S,W] u32", Extent::HeadRowWords, c.heads, 4, why});
  }
  void reduce(const std::string& name, int cols, const std::string& cols_expr, int arrays,
              const std::string& fuses) {
    plan.kernels.push_back({name, "param_grad_reduce", "ParamGradReduceParams",
                            fmt::format("param_grad_reduce_impl<{}, {}>", cols_expr, arrays), fuses, "256",
                            Pass::Backward, GridKind::ColumnTiles, 256, cols, 1, arrays});
  }
};

}  // namespace

LayerPlan make_plan(const LayerConfig& c, const PlanOptions& opt) {
  validate(c, "layer config");
  LayerPlan plan;
  plan.cfg = c;
  plan.config_hash = config_hash(c);
  const AttentionPath path =
      opt.attention == AttentionPath::FromEnvironment ? attention_path_from_env() : opt.attention;
  const bool fused = path != AttentionPath::Unfused && fused_attention_supported(c);
  plan.fused_attention = fused;
  // Read (and validated) whatever the layer, like DSKC_ATTENTION; it matters only with bits below.
  const AttnMask mask_src = opt.attn_mask == AttnMask::FromEnvironment ? attn_mask_from_env() : opt.attn_mask;
  const AttnDq dq_src = opt.attn_dq == AttnDq::FromEnvironment ? attn_dq_from_env() : opt.attn_dq;
  const AttnBitsBwd bits_bwd_src =
      opt.attn_bits_bwd == AttnBitsBwd::FromEnvironment ? attn_bits_bwd_from_env() : opt.attn_bits_bwd;
  const AttnBwd bwd_src = opt.attn_bwd == AttnBwd::FromEnvironment ? attn_bwd_from_env() : opt.attn_bwd;
  const AttnFwd fwd_src = opt.attn_fwd == AttnFwd::FromEnvironment ? attn_fwd_from_env() : opt.attn_fwd;
  plan.attn_tma_stores =
      (opt.attn_store == AttnStore::FromEnvironment ? attn_store_from_env() : opt.attn_store) == AttnStore::Tma;
  // Read (and validated) whatever the layer; it matters only for the dQ GEMM of the wgmma backward.
  const AttnDqGemm dq_gemm_src = opt.attn_dq_gemm == AttnDqGemm::FromEnvironment ? attn_dq_gemm_from_env() : opt.attn_dq_gemm;
  // Read (and validated) whatever the layer; it matters only for the clustered fused-dQ backward.
  const bool persist_src = opt.attn_bwd_persist == AttnBwdPersist::FromEnvironment
                               ? attn_bwd_persist_from_env() != 0
                               : opt.attn_bwd_persist == AttnBwdPersist::On;
  plan.ln_bwd_warp_rows = (opt.ln_bwd == LnBwd::FromEnvironment ? ln_bwd_from_env() : opt.ln_bwd) == LnBwd::WarpRows;
  const BiasGrad bias_src = opt.bias_grad == BiasGrad::FromEnvironment ? bias_grad_from_env() : opt.bias_grad;
  Builder b{c, plan};
  const bool pre = c.pre_layer_norm;
  const bool train = c.training;
  const bool attn_drop = train && c.attn_dropout_ratio > 0;
  // Fused attention dropout: the backward reads keep bits, saved unless attn_dropout_checkpoint (and
  // then too with DSKC_ATTN_BITS_BWD=saved).
  const bool bits = fused && attn_drop;
  const bool bits_saved = bits && (!c.attn_dropout_checkpoint || bits_bwd_src == AttnBitsBwd::Saved);
  plan.attn_keep_bits = bits;
  plan.attn_keep_bits_saved = bits_saved;
  plan.attn_mask_kernel = bits && (mask_src == AttnMask::Kernel || mask_src == AttnMask::LayerNorm);
  plan.attn_bits_in_ln = plan.attn_mask_kernel && mask_src == AttnMask::LayerNorm && pre;
  plan.attn_bits_bwd_in_ln =
      bits_bwd_src == AttnBitsBwd::Auto && plan.attn_bits_in_ln && !bits_saved && c.normalize_invertible;
  // Only when asked for (measured: bench/NOTES.md v26), and not with stochastic_mode's single-pass
  // backward, whose dot kernel zeroes the dQ accumulator.
  plan.attn_bits_bwd_in_dot = bits && !bits_saved && bits_bwd_src == AttnBitsBwd::Dot && dq_src != AttnDq::Atomic;
  // (With stochastic_mode's TMA-reduced dQ, attn_flash_bwd_dot_bits zeroes the accumulator too.)
  const int stages_max = opt.attn_fwd_stages == 0 ? attn_fwd_stages_from_env() : opt.attn_fwd_stages;
  DSKC_ASSERT(stages_max == 1 || stages_max == 2, "PlanOptions::attn_fwd_stages is 0, 1 or 2");
  plan.attn_fwd_stages =
      fused && stages_max == 2 &&
              flash_fwd_smem_bytes(c.head_dim(), 2, attn_drop && !plan.attn_mask_kernel, plan.attn_mask_kernel) <=
                  48 * 1024
          ? 2
          : 1;
  // Bias gradients from cuBLASLt (fp16/bf16 unless DSKC_BIAS_GRAD=partials): a column-sum GEMM per
  // bias (default) or the wgrad GEMM's epilogue.
  const bool epi = c.dtype() != DType::F32 && bias_src != BiasGrad::Partials;
  // cuBLASLt's GELU epilogues compute the tanh form; the bias gradient of inter_b then comes from
  // cuBLASLt too (epi: no bias_gelu_bwd to write partials), and gelu_checkpoint rebuilds GELU(h) in
  // the bias_gelu_bwd pass, so it keeps the kernels.
  const GeluPath gelu_src = opt.gelu == GeluPath::FromEnvironment ? gelu_path_from_env() : opt.gelu;
  plan.gelu_in_gemm = gelu_src == GeluPath::EpilogueWhereSupported && c.gelu_approximation == GeluForm::Tanh && epi &&
                      !c.gelu_checkpoint && c.intermediate_size % 8 == 0;  // the aux matrix's leading dimension
  // The FFN GEMMs as gemm_sm90 (plan.h): they take cuBLASLt's tanh epilogues' place too.
  const FfnGemm ffn_src = opt.ffn_gemm == FfnGemm::FromEnvironment ? ffn_gemm_from_env() : opt.ffn_gemm;
  plan.ffn_gemm_sm90 = ffn_src != FfnGemm::Cublas && epi && ffn_gemm_sm90_supported(c, opt.arch);
  plan.ffn_gemm_sm90_bwd = plan.ffn_gemm_sm90 && ffn_src == FfnGemm::Sm90 && train;
  const GeluSave save_src = opt.gelu_save == GeluSave::FromEnvironment ? gelu_save_from_env() : opt.gelu_save;
  plan.gelu_grad_saved = plan.ffn_gemm_sm90_bwd && !c.gelu_checkpoint && save_src == GeluSave::Grad;
  if (plan.ffn_gemm_sm90) plan.gelu_in_gemm = false;
  plan.gemm_gelu_regions = opt.gemm_gelu_regions == 0 ? gemm_gelu_regions_from_env() : opt.gemm_gelu_regions;
  DSKC_ASSERT(plan.gemm_gelu_regions == 2 || plan.gemm_gelu_regions == 3, "PlanOptions::gemm_gelu_regions is 0, 2 or 3");
  plan.gemm_dynamic_tiles = gemm_dynamic_tiles_from_env();
  const bool sm90 = plan.ffn_gemm_sm90, sm90_bwd = plan.ffn_gemm_sm90_bwd;
  const LinearGemm linear_src = opt.linear_gemm == LinearGemm::FromEnvironment ? linear_gemm_from_env() : opt.linear_gemm;
  plan.linear_gemm_sm90 = linear_src == LinearGemm::Sm90 && linear_gemm_sm90_supported(c, opt.arch);
  const bool lin = plan.linear_gemm_sm90;
  const OutputGemm out_src = opt.output_gemm == OutputGemm::FromEnvironment ? output_gemm_from_env() : opt.output_gemm;
  plan.output_gemm_fused = lin && pre && out_src == OutputGemm::Fused;
  const DgradGemm dgrad_src = opt.dgrad_gemm == DgradGemm::FromEnvironment ? dgrad_gemm_from_env() : opt.dgrad_gemm;
  plan.dgrad_gemm_sm90 = train && dgrad_src == DgradGemm::Sm90 && linear_gemm_sm90_supported(c, opt.arch);
  const bool dgrad = plan.dgrad_gemm_sm90;
  const Sm90Weight weight_src = opt.sm90_weight == Sm90Weight::FromEnvironment ? sm90_weight_from_env() : opt.sm90_weight;
  plan.sm90_weight_in_place = (sm90_bwd || dgrad) && weight_src == Sm90Weight::InPlace;
  const bool w_in_place = plan.sm90_weight_in_place, w_t = (sm90_bwd || dgrad) && !w_in_place;
  // How a gemm_sm90 data gradient's description names its weight operand.
  auto weight_b = [&](const std::string& wname) {
    return w_in_place ? wname + " read N-major as stored" : wname + "ᵀ from " + wname + "_t";
  };
  const bool inv = c.normalize_invertible;
  // Only where a free workspace tensor serves (normalize_invertible's attn_residual): an own
  // [B, S, H] tensor cost gelu_checkpoint alone up to 5 sequences of the largest micro-batch and
  // the wall did not measurably gain (bench/NOTES.md v38).
  const bool own_scratch = gelu_ckpt_own_scratch_from_env();  // read always: a typo is an error
  plan.attn_grad_own_scratch = train && pre && c.gelu_checkpoint && inv && own_scratch;
  const int H = c.hidden_size, I = c.intermediate_size;
  const std::string gelu_form = c.gelu_approximation == GeluForm::Tanh ? "tanh" : "erf";
  const std::string hd = train && c.hidden_dropout_ratio > 0 ? "hidden dropout + " : "";

  // ---- forward kernels, in launch order ----
  if (pre) {
    const bool lnb = plan.attn_bits_in_ln;
    b.rows(Pass::Forward, "layernorm_fwd_norm", lnb ? "layernorm_fwd_bits" : "layernorm_fwd",
           lnb ? "LayerNormFwdBitsParams" : "LayerNormFwdParams",
           lnb ? "layernorm_fwd_bits_impl<kHidden>" : "layernorm_fwd_impl<kHidden>", H,
           std::string("LayerNorm(norm_w, norm_b) of the layer input") +
               (lnb ? std::string(" + the attention dropout keep mask (Philox) as bits for attn_flash_fwd") +
                          (bits_saved ? ", kept for backward" : "") + " (DSKC_ATTN_MASK=ln)"
                    : "") +
               (train && c.normalize_invertible
                    ? std::string("; re-run in backward for the attn_qkvw gradient (normalize_invertible keeps only "
                                  "mean/rstd)") +
                          (plan.attn_bits_bwd_in_ln ? ", rewriting the keep bits (attn_dropout_checkpoint)" : "")
                    : ""));
  }
  if (lin)
    b.gemm_sm90(Pass::Forward, "gemm_qkv_fwd", "3 * kHidden", "kHidden", "kBias", 3 * H,
                std::string("QKV GEMM ") + (pre ? "ln_norm_out" : "input") + "·attn_qkvwᵀ + attn_qkvb (TMA + wgmma)");
  const int fb = 32 * flash_bwd_warps(c.head_dim());  // fused backward block (2 or 4 warps)
  if (plan.attn_mask_kernel && !plan.attn_bits_in_ln)
    b.dropout_bits(Pass::Forward, "attn_dropout_bits_fwd",
                   std::string("attention dropout keep mask (Philox) as bits for attn_flash_fwd (") +
                       (mask_src == AttnMask::LayerNorm ? "DSKC_ATTN_MASK=ln: no LayerNorm before attention in Post-LN"
                                                        : "DSKC_ATTN_MASK=kernel") +
                       ")" +
                       (bits_saved ? ", kept for backward" : ""));
  if (fused && fwd_src != AttnFwd::Sync && attn_fwd_wgmma_supported(c, opt.arch, plan.attn_mask_kernel)) {
    const int stages = fwd_src == AttnFwd::Wgmma3 ? 3 : 2;
    plan.attn_fwd_wgmma = true;
    plan.attn_fwd_wg_stages = stages;
    plan.attn_fwd_stages = 1;  // DSKC_ATTN_FWD_STAGES is the mma.sync kernel's
    const std::string tile = fmt::format("FlashWgFwdTile<{}>", stages);
    b.flash(Pass::Forward, "attn_flash_fwd", "AttnFlashFwdWgParams",
            fmt::format("attn_flash_fwd_wgmma_impl<T, kAttnDropoutOn, {}>", stages), tile + "::kThreads", 128,
            tile + "::kRows", 64,
            fmt::format("fused attention on warpgroup MMA (Q, K/V by TMA in {} stages): Q·Kᵀ/√d + mask, online "
                        "softmax{}, ·V into the context{}",
                        stages, attn_drop ? ", attention dropout (mask from the keep bits)" : "",
                        train ? " + row logsumexp (P is not stored)" : ""));
    KernelInfo& k = plan.kernels.back();
    k.op = "attn_flash_fwd_wgmma";
    k.min_blocks = tile + "::kMinBlocks";
    k.dynamic_smem = flash_wg_fwd_smem_bytes(stages, c.max_seq_length);
    k.smem_check = tile + "::smem_bytes";
    k.grid_constant = true;
  } else if (fused) {
    b.flash(Pass::Forward, "attn_flash_fwd", "AttnFlashFwdParams",
            "attn_flash_fwd_impl<T, kAttnDropoutOn, kAttnFwdStoresBits, kAttnFwdLoadsBits, kAttnFwdStages>",
            "FlashFwdTile::kThreads",
            128, "FlashFwdTile::kRows", 64,
            std::string("fused attention: Q·Kᵀ/√d + mask, online softmax") +
                (!attn_drop ? "" : plan.attn_mask_kernel ? ", attention dropout (mask from the keep bits)" : ", attention dropout") +
                ", ·V into the context" + (train ? " + row logsumexp (P is not stored)" : "") +
                (plan.attn_fwd_stores_bits() ? " + dropout keep bits" : "") +
                (plan.attn_fwd_stages == 2 ? "; next K/V tile prefetched (cp.async)" : ""));
    // Capped for 4 resident blocks at head dims <= 64 with one K/V buffer and the keep flags from the
    // bits (or no attention dropout); two buffers or byte flag tiles need more registers (they spill).
    if (plan.attn_fwd_stages == 1 && (!attn_drop || plan.attn_mask_kernel))
      plan.kernels.back().min_blocks = "FlashFwdTile::kMinBlocks";  // common/flash.cuh
  } else {
    b.attn(Pass::Forward, "attn_softmax_dropout_fwd", "attn_softmax_dropout_fwd", "AttnSoftmaxFwdParams",
           "attn_softmax_dropout_fwd_impl<kAttnDropoutOn>",
           std::string("additive mask + softmax") + (attn_drop ? " + attention dropout" : "") +
               " over Q·Kᵀ/√d rows");
  }
  if (lin)
    b.gemm_sm90(Pass::Forward, "gemm_attn_out_fwd", "kHidden", "kHidden", "kPlain", H,
                "attention output GEMM attn_context·attn_owᵀ (TMA + wgmma; attn_ob in the next kernel)");
  b.rows(Pass::Forward, "bias_dropout_residual_layernorm_fwd_attn", "bias_dropout_residual_layernorm_fwd",
         "BiasDropoutResidualLnParams",
         "bias_dropout_residual_layernorm_fwd_impl<kHidden, kHiddenDropoutOn, dskc_rng::kStreamAttnOutput>", H,
         "attn_ob bias + " + hd + "residual add + LayerNorm(attn_nw, attn_nb)");
  if (sm90)
    b.gemm_sm90(Pass::Forward, "gemm_inter_fwd", "kInter", "kHidden",
                !train ? "kBiasGeluNoPre" : plan.gelu_grad_saved ? "kBiasGeluSaveGrad" : "kBiasGelu", I,
                "intermediate GEMM ln_attn_out·inter_wᵀ (TMA + wgmma) + inter_b + GELU (" + gelu_form +
                    ") in the epilogue" +
                    (!train                 ? "; writes GELU(h)"
                     : plan.gelu_grad_saved ? "; writes GELU(h) and GELU'(h) (kept for the backward)"
                                            : "; writes h and GELU(h)"));
  else if (!plan.gelu_in_gemm)
    b.elementwise(Pass::Forward, "bias_gelu_fwd", "bias_gelu_fwd", "BiasGeluFwdParams",
                  "bias_gelu_fwd_impl<kInter, false>",
                  I, "GELU (" + gelu_form +
                         ") of the intermediate GEMM output (its cuBLASLt epilogue adds inter_b)");
  if (plan.output_gemm_fused)
    b.gemm_sm90(Pass::Forward, "gemm_output_fwd", "kHidden", "kInter", "kBiasDropoutResidual", H,
                "output GEMM ffn_gelu_out·output_wᵀ (TMA + wgmma) + output_b + " + hd +
                    "residual add in the epilogue (layer output; DSKC_OUTPUT_GEMM=fused)");
  else if (lin)
    b.gemm_sm90(Pass::Forward, "gemm_output_fwd", "kHidden", "kInter", "kPlain", H,
                "output GEMM ffn_gelu_out·output_wᵀ (TMA + wgmma; output_b in the next kernel)");
  if (pre && !plan.output_gemm_fused)
    b.elementwise(Pass::Forward, "bias_dropout_residual_fwd_ffn", "bias_dropout_residual_fwd",
                  "BiasDropoutResidualParams",
                  "bias_dropout_residual_fwd_impl<kHidden, kHiddenDropoutOn, dskc_rng::kStreamFfnOutput>", H,
                  "output_b bias + " + hd + "residual add (layer output)");
  else if (!pre)
    b.rows(Pass::Forward, "bias_dropout_residual_layernorm_fwd_ffn", "bias_dropout_residual_layernorm_fwd",
           "BiasDropoutResidualLnParams",
           "bias_dropout_residual_layernorm_fwd_impl<kHidden, kHiddenDropoutOn, dskc_rng::kStreamFfnOutput>", H,
           "output_b bias + " + hd + "residual add + LayerNorm(norm_w, norm_b) (layer output)");

  // ---- backward kernels ----
  const bool hid_drop = train && c.hidden_dropout_ratio > 0;
  plan.bias_grad_in_gemm = epi;
  plan.bias_grad_gemv = epi && bias_src == BiasGrad::Gemv;
  const std::string by = plan.bias_grad_gemv ? "a column-sum GEMM" : "the wgrad GEMM epilogue";
  // Backward of dropout(x + bias) at one site: masking (+ bias partials in fp32).
  auto dropout_bwd = [&](const std::string& name, const std::string& stream, const std::string& bias) {
    if (epi && !hid_drop) return;  // nothing to do: cuBLASLt sums the bias gradient
    if (epi)
      b.elementwise(Pass::Backward, name, "dropout_bias_grad", "DropoutBiasGradParams",
                    "dropout_bwd_impl<kHidden, " + stream + ">", H,
                    "hidden dropout backward (mask regenerated; " + bias + " bias gradient by " + by + ")");
    else
      b.tiles(Pass::Backward, name, "dropout_bias_grad", "DropoutBiasGradParams",
              "dropout_bias_grad_impl<kHidden, kHiddenDropoutOn, " + stream + ">", H, "kHidden",
              hd + bias + " bias-gradient partials");
  };
  if (train) {
    const std::string ln_mode_attn = pre ? "kLnAddToDx" : "kLnAddToDy";
    if (sm90_bwd && w_t)
      b.transpose("transpose_output_w", "kHidden", "kInter", H, I, "output_wᵀ [I, H] into output_w_t for gemm_output_dgrad");
    if (dgrad && w_t) {
      b.transpose("transpose_inter_w", "kInter", "kHidden", I, H, "inter_wᵀ [H, I] into inter_w_t for gemm_inter_dgrad");
      b.transpose("transpose_attn_ow", "kHidden", "kHidden", H, H,
                  "attn_owᵀ [H, H] into attn_ow_t for gemm_attn_out_dgrad");
      if (pre)
        b.transpose("transpose_attn_qkvw", "3 * kHidden", "kHidden", 3 * H, H,
                    "attn_qkvwᵀ [H, 3H] into attn_qkvw_t for gemm_qkv_dgrad");
    }
    if (!pre)
      b.ln_bwd("layernorm_bwd_norm", "layernorm_bwd_impl<kHidden, kNormalizeInvertible, kLnNoResidual>",
               "LayerNorm(norm_w, norm_b) backward of the layer output + gamma/beta partials");
    dropout_bwd("dropout_bias_grad_ffn_out", "dskc_rng::kStreamFfnOutput", "output_b");
    // gelu_checkpoint: the same pass also rebuilds GELU(h) for the output_w gradient, which then
    // runs after it (runtime/transformer_layer.cpp).
    const std::string regelu = c.gelu_checkpoint ? " + GELU(h) recomputed for the output_w gradient" : "";
    if (sm90_bwd)
      b.gemm_sm90(Pass::Backward, "gemm_output_dgrad", "kInter", "kHidden",
                  c.gelu_checkpoint ? "kDGeluStoreGelu" : plan.gelu_grad_saved ? "kDGeluSaved" : "kDGelu", I,
                  "output layer data gradient d_o·output_w (TMA + wgmma, " + weight_b("output_w") + ") ⊙ GELU'(h) (" +
                      gelu_form + (plan.gelu_grad_saved ? ", saved by the forward" : "") +
                      ") in the epilogue (inter_b gradient by " + by + ")" + regelu,
                  w_in_place);
    else if (!plan.gelu_in_gemm && epi)
      b.elementwise(Pass::Backward, "bias_gelu_bwd", "bias_gelu_bwd", "BiasGeluBwdParams",
                    std::string("bias_gelu_bwd_elem_impl<kInter") + (c.gelu_checkpoint ? ", true>" : ">"), I,
                    "GELU backward (inter_b gradient by " + by + ")" + regelu);
    else if (!plan.gelu_in_gemm)
      b.tiles(Pass::Backward, "bias_gelu_bwd", "bias_gelu_bwd", "BiasGeluBwdParams",
              "bias_gelu_bwd_impl<kInter, true" + std::string(c.gelu_checkpoint ? ", true>" : ">"), I, "kInter",
              "GELU backward + inter_b bias-gradient partials" + regelu);
    if (dgrad)
      b.gemm_sm90(Pass::Backward, "gemm_inter_dgrad", "kHidden", "kInter", "kPlain", H,
                  "intermediate data gradient grad_inter·inter_w (TMA + wgmma, " + weight_b("inter_w") + ")", w_in_place);
    // With the bias gradient in cuBLASLt, the attention output's dropout backward (masking only) is
    // folded into this LayerNorm backward, which writes both gradients.
    const bool fold = epi && hid_drop;
    plan.attn_out_dropout_in_ln = fold;
    b.ln_bwd("layernorm_bwd_attn",
             "layernorm_bwd_impl<kHidden, kNormalizeInvertible, " + ln_mode_attn +
                 (fold ? ", true, dskc_rng::kStreamAttnOutput>" : ">"),
             std::string("LayerNorm(attn_nw, attn_nb) backward + residual gradient ") +
                 (pre ? "added after" : "added before") + " + gamma/beta partials" +
                 (fold ? " + the attention output's hidden dropout backward (mask regenerated)" : ""));
    if (!fold) dropout_bwd("dropout_bias_grad_attn_out", "dskc_rng::kStreamAttnOutput", "attn_ob");
    if (dgrad)
      b.gemm_sm90(Pass::Backward, "gemm_attn_out_dgrad", "kHidden", "kHidden", "kPlain", H,
                  "attention output data gradient d_attn_out·attn_ow (TMA + wgmma, " + weight_b("attn_ow") + ")",
                  w_in_place);
    if (fused) {
      // dQ by the GEMM (default), inside the wgmma dK/dV kernel where its block covers every key, the
      // per-query-tile kernel, or (stochastic_mode only) atomics in one pass (plan.h, attn_dq_atomic).
      if ((dq_src == AttnDq::Atomic || dq_src == AttnDq::Reduce) && !c.stochastic_mode)
        throw Error(ErrorKind::Config,
                    std::string("DSKC_ATTN_DQ=") + (dq_src == AttnDq::Atomic ? "atomic" : "reduce") +
                        " needs stochastic_mode: its fp32 dQ additions run in a varying order, so the default mode "
                        "(bitwise reproducible) does not use them");
      const bool dq_atomic = dq_src == AttnDq::Atomic;
      const bool wg_ok = bwd_src != AttnBwd::Sync && attn_bwd_wgmma_supported(c, opt.arch);
      // AttnDq::Ring above 128 keys: one warpgroup per block, ceil(S/64) blocks per cluster (at most 8).
      // Only when asked for: measured slower than the dQ GEMM at (16,512) (bench/NOTES.md v45: the dK/dV
      // kernel 0.133 → 0.22 ms against the GEMM's 0.049).
      const bool dq_ring = dq_src == AttnDq::Ring && wg_ok && bwd_src != AttnBwd::Wgmma2 &&
                           c.max_seq_length > 128 && c.max_seq_length <= kAttnDqRingMaxSeq;
      const bool dq_fused =
          ((dq_src == AttnDq::Fused || dq_src == AttnDq::Ring) && wg_ok && c.max_seq_length <= 128) || dq_ring;
      // stochastic_mode, when asked for: dQ shares by TMA reductions in the one-warpgroup wgmma kernel.
      // Not its default: measured slower than the dQ GEMM at (16,512) (bench/NOTES.md v41: the dK/dV
      // kernel +0.034 ms with the reductions and the dS·K products, against the GEMM's 0.049 ms).
      const bool dq_reduce = wg_ok && bwd_src != AttnBwd::Wgmma2 && dq_src == AttnDq::Reduce;
      const bool dq_gemm = !dq_reduce && (dq_src == AttnDq::Gemm || dq_src == AttnDq::Reduce ||
                                          ((dq_src == AttnDq::Fused || dq_src == AttnDq::Ring) && !dq_fused));
      plan.attn_dq_atomic = dq_atomic;
      plan.attn_dq_reduce = dq_reduce;
      plan.attn_dq_gemm = dq_gemm;
      plan.attn_dq_fused = dq_fused;
      plan.attn_dq_ring = dq_ring;
      // Fused dQ above 64 keys: two key halves, the blocks of a cluster (wgmma) or the warpgroups of
      // one block (wgmma2).
      const bool halves = dq_fused && c.max_seq_length > 64;
      const int wgs = bwd_src == AttnBwd::Wgmma2 && (!dq_fused || halves) ? 2 : 1;
      plan.attn_dot_in_dkdv = dq_fused && wgs == 1 && !dq_ring;
      // The backward kernels always read keep bits (no Philox in them); under attn_dropout_checkpoint
      // attn_dropout_bits_bwd first rewrites them into the workspace.
      const std::string re = std::string("P recomputed from Q, K and the logsumexp") +
                             (bits_saved                 ? ", dropout mask from the saved bits"
                              : plan.attn_bits_bwd_in_ln  ? ", dropout mask from the bits layernorm_fwd_norm rewrote"
                              : plan.attn_bits_bwd_in_dot ? ", dropout mask from the bits attn_flash_bwd_dot rewrote"
                              : bits                     ? ", dropout mask from the bits attn_dropout_bits_bwd rewrote"
                                                         : "") +
                             (dq_atomic ? "" : dq_reduce ? "; dQ additions in no fixed order" : "; no atomics");
      const bool dot_bits = plan.attn_bits_bwd_in_dot;
      // With attn_dot_in_dkdv the dK/dV kernel computes D itself; the launch stays only for the bits
      // (its D then goes unread).
      if (!plan.attn_dot_in_dkdv || dot_bits) {
        b.flash(Pass::Backward, "attn_flash_bwd_dot", dot_bits ? "AttnFlashDotBitsParams" : "AttnFlashDotParams",
                fmt::format("attn_flash_bwd_dot{}_impl<T{}>", dot_bits ? "_bits" : "",
                            dq_atomic ? ", kDqAtomic" : dq_reduce ? ", kDqReduce" : ""),
                "FlashDotTile::kThreads", 128, "FlashDotTile::kRows", 16,
                std::string("D = rowsum(dO ⊙ O) per attention row for the fused backward") +
                    (dq_atomic   ? " + zeroes the fp32 dQ accumulator attn_dq_acc and the per-head tickets"
                     : dq_reduce ? " + zeroes the fp32 dQ accumulator attn_dq_acc"
                                 : "") +
                    (dot_bits ? " + the attention dropout keep mask regenerated (Philox) as bits (attn_dropout_checkpoint: "
                                "not kept)"
                              : ""));
        if (dot_bits) plan.kernels.back().op = "attn_flash_bwd_dot_bits";
      }
      if (bits && !bits_saved && !plan.attn_bits_bwd_in_ln && !dot_bits)
        b.dropout_bits(Pass::Backward, "attn_dropout_bits_bwd",
                       std::string("attention dropout keep mask regenerated (Philox) as bits for ") +
                           (dq_atomic                ? "attn_flash_bwd_dkdvdq"
                            : dq_gemm || dq_fused    ? "attn_flash_bwd_dkdv"
                                                     : "attn_flash_bwd_dkdv / _dq") +
                           " (attn_dropout_checkpoint: not kept)");
      if (dq_atomic) {
        b.flash(Pass::Backward, "attn_flash_bwd_dkdvdq", "AttnFlashBwdParams",
                "attn_flash_bwd_dkdv_impl<T, kAttnDropoutOn, kDqAtomic>", "FlashBwdTile::kThreads", fb,
                "FlashBwdTile::kRows", fb / 2,
                "fused attention backward in one pass (stochastic_mode): dK, dV per key tile + the tile's dQ share "
                "dS·K added into attn_dq_acc with fp32 atomics (order varies run to run); the head's last key tile "
                "writes dQ into grad_qkv (" + re + ")");
      } else if ((dq_gemm || dq_fused || dq_reduce) && wg_ok) {
        const int cluster = dq_ring ? (c.max_seq_length + 63) / 64 : halves && wgs == 1 ? 2 : 1;
        plan.attn_bwd_wgmma = true;
        plan.attn_bwd_wgs = wgs;
        plan.attn_bwd_cluster = cluster;
        const std::string fused_arg = dq_reduce  ? ", false, 1, true"
                                      : dq_ring  ? fmt::format(", false, {}", cluster)
                                      : !dq_fused ? ""
                                      : cluster == 2 ? ", true, 2"
                                                     : ", true";
        // The persistent form: clusters of two blocks with D in the kernel (DSKC_ATTN_BWD_PERSIST).
        const bool persist = persist_src && cluster == 2 && plan.attn_dot_in_dkdv;
        plan.attn_bwd_persist = persist;
        const std::string tile =
            persist ? "FlashWgBwdPersistTile" : fmt::format("FlashWgBwdTile<{}{}>", wgs, fused_arg);
        b.flash(Pass::Backward, "attn_flash_bwd_dkdv", "AttnFlashBwdWgParams",
                persist ? "attn_flash_bwd_wgmma_persist_impl<T, kAttnDropoutOn>"
                        : fmt::format("attn_flash_bwd_wgmma_impl<T, kAttnDropoutOn, {}{}>", wgs, fused_arg),
                tile + "::kThreads", 128 * wgs, tile + "::kKeys", 64 * wgs,
                fmt::format("fused attention backward on warpgroup MMA ({} warpgroup{} of 64 keys per block, Q/dO by "
                            "TMA in {} stages): dK, dV per key tile + {} ({})",
                            wgs, wgs == 1 ? "" : "s", persist ? 2 : 3,
                            dq_reduce      ? "dS·K into the fp32 accumulator attn_dq_acc by TMA reductions (stochastic_mode)"
                            : !dq_fused    ? "dSᵀ into grad_scores by TMA for the dQ GEMM"
                            : dq_ring      ? fmt::format("dQ = dS·K/√d (clusters of {} blocks hold every key; each query "
                                                         "tile's partial sum passed from block to block around a ring in "
                                                         "distributed shared memory, a fixed order)",
                                                         cluster)
                            : persist ? "dQ = dS·K/√d (clusters of two blocks hold every key; the peer's share "
                                        "added from distributed shared memory) + D = rowsum(dO ⊙ O) (O by TMA); "
                                        "persistent: each cluster walks heads, the next head's K/V and tiles loaded "
                                        "while the current one computes"
                            : cluster == 2 ? "dQ = dS·K/√d (clusters of two blocks hold every key; the peer's share "
                                             "added from distributed shared memory) + D = rowsum(dO ⊙ O) (O by TMA)"
                            : wgs == 2     ? "dQ = dS·K/√d (the block holds every key; the warpgroups' shares added in "
                                             "shared memory)"
                                           : "dQ = dS·K/√d (the block holds every key) + D = rowsum(dO ⊙ O) (O by TMA)",
                            re));
        KernelInfo& k = plan.kernels.back();
        k.op = "attn_flash_bwd_wgmma";
        k.min_blocks = tile + "::kMinBlocks";
        k.cluster = cluster;
        k.dynamic_smem = persist ? flash_wg_bwd_persist_smem_bytes() : flash_wg_bwd_smem_bytes(wgs, dq_fused, cluster, dq_reduce);
        if (persist) k.grid = GridKind::FlashHeads;
        k.smem_check = tile + "::smem_bytes";
        k.grid_constant = true;
        if (dq_gemm && dq_gemm_src == AttnDqGemm::Wgmma) {
          plan.attn_dq_wgmma = true;
          b.flash(Pass::Backward, "attn_dq_wgmma", "AttnDqWgParams", "attn_dq_wgmma_impl<T>", "AttnDqWgTile::kThreads",
                  128, "AttnDqWgTile::kQueries", 128,
                  "dQ = dS·K/√d from grad_scores' dSᵀ (TMA ring of 4 stages, warpgroup MMA, 128 queries of one head "
                  "per block, the heads last-written first; dQ by TMA into grad_qkv)");
          KernelInfo& q = plan.kernels.back();
          q.dynamic_smem = attn_dq_wgmma_smem_bytes();
          q.smem_check = "AttnDqWgTile::smem_bytes";
          q.grid_constant = true;
          q.min_blocks = "2";
        }
        if (dq_reduce)
          b.elementwise(Pass::Backward, "attn_dq_convert", "attn_dq_convert", "AttnDqConvertParams",
                        "attn_dq_convert_impl", H,
                        "dQ = attn_dq_acc/√d, rounded, into grad_qkv's Q columns (stochastic_mode's TMA-reduced dQ)");
      } else if (dq_gemm) {
        b.flash(Pass::Backward, "attn_flash_bwd_dkdv", "AttnFlashBwdParams",
                "attn_flash_bwd_dkdv_impl<T, kAttnDropoutOn, kDqGemm>", "FlashBwdTile::kThreads", fb,
                "FlashBwdTile::kRows", fb / 2,
                "fused attention backward: dK, dV per key tile + dSᵀ into grad_scores for the dQ GEMM (" + re + ")");
        plan.kernels.back().min_blocks = "FlashBwdTile::kMinBlocksDqGemm";  // common/flash.cuh
      } else {
        b.flash(Pass::Backward, "attn_flash_bwd_dkdv", "AttnFlashBwdParams",
                "attn_flash_bwd_dkdv_impl<T, kAttnDropoutOn>", "FlashBwdTile::kThreads", fb, "FlashBwdTile::kRows", fb / 2,
                "fused attention backward: dK, dV per key tile (" + re + ")");
        b.flash(Pass::Backward, "attn_flash_bwd_dq", "AttnFlashBwdParams", "attn_flash_bwd_dq_impl<T, kAttnDropoutOn>",
                "FlashBwdTile::kThreads", fb, "FlashBwdTile::kRows", fb / 2,
                "fused attention backward: dQ per query tile (" + re + ")");
      }
    } else {
      if (c.attn_dropout_checkpoint && attn_drop)
        b.attn(Pass::Backward, "attn_dropout_recompute", "attn_dropout_recompute", "AttnDropoutRecomputeParams",
               "attn_dropout_recompute_impl", "attention dropout(P) recomputed from P and the counter RNG");
      b.attn(Pass::Backward, "attn_softmax_dropout_bwd", "attn_softmax_dropout_bwd", "AttnSoftmaxBwdParams",
             "attn_softmax_dropout_bwd_impl<kAttnDropoutOn>",
             std::string(attn_drop ? "attention dropout (regenerated mask) + " : "") + "softmax backward");
    }
    if (!epi)
      b.tiles(Pass::Backward, "bias_grad_qkv", "dropout_bias_grad", "DropoutBiasGradParams",
              "dropout_bias_grad_impl<3 * kHidden, false, 0>", 3 * H, "3 * kHidden", "attn_qkvb bias-gradient partials");
    if (dgrad && pre)
      b.gemm_sm90(Pass::Backward, "gemm_qkv_dgrad", "kHidden", "3 * kHidden", "kPlain", H,
                  "QKV data gradient grad_qkv·attn_qkvw (TMA + wgmma, " + weight_b("attn_qkvw") + ")", w_in_place);
    if (pre)  // x̂ from the caller's layer input and the kept mean/rstd, with or without the flag
      b.ln_bwd("layernorm_bwd_norm", "layernorm_bwd_impl<kHidden, false, kLnAddToDx>",
               "LayerNorm(norm_w, norm_b) backward + residual gradient added after + gamma/beta partials");
    if (!epi) b.reduce("param_grad_reduce_hidden", H, "kHidden", 1, "sums bias-gradient partials of width H");
    b.reduce("param_grad_reduce_layernorm", H, "kHidden", 2, "sums LayerNorm gamma/beta gradient partials");
    if (!epi) {
      b.reduce("param_grad_reduce_qkv", 3 * H, "3 * kHidden", 1, "sums attn_qkvb gradient partials");
      b.reduce("param_grad_reduce_inter", I, "kInter", 1, "sums inter_b gradient partials");
    }
  }

  // ---- saved tensors (forward -> backward) ----
  if (train) {
    auto& s = plan.saved;
    if (pre) {
      if (!inv)
        b.tokens(s, "ln_norm_out", "[B, S, H]", H,
                 "input of the QKV GEMM (attn_qkvw gradient; normalize_invertible recomputes it)");
      b.stats(s, "ln_norm_mean",
              inv ? "norm LayerNorm backward and its re-run from the layer input" : "norm LayerNorm backward (x̂ from the layer input)");
      b.stats(s, "ln_norm_rstd", "norm LayerNorm backward");
    }
    b.tokens(s, "qkv", "[B, S, 3H]", 3 * H, "Q, K, V for the attention backward");
    if (fused) {
      b.head_rows(s, "attn_lse", "row logsumexp of the attention scores: backward recomputes P from Q, K and it");
      if (bits_saved)
        b.head_row_words(s, "attn_dropout_bits",
                         std::string("attention dropout keep mask, 1 bit per score (W = ceil(S/32) uint32 per row); ") +
                             (c.attn_dropout_checkpoint ? "kept under attn_dropout_checkpoint (DSKC_ATTN_BITS_BWD=saved)"
                                                        : "attn_dropout_checkpoint rewrites it in backward instead"));
    } else {
      b.scores(s, "attn_probs", "softmax output P for the softmax backward");
      if (attn_drop && !c.attn_dropout_checkpoint)
        b.scores(s, "attn_probs_dropped", "dropout(P) for the V gradient (attn_dropout_checkpoint recomputes it)");
    }
    b.tokens(s, "attn_context", "[B, S, H]", H,
             fused ? "input of the output projection (attn_ow gradient); O for D = rowsum(dO ⊙ O)"
                   : "input of the output projection (attn_ow gradient)");
    if (pre) {
      if (!inv) b.tokens(s, "attn_residual", "[B, S, H]", H, "attn LayerNorm input (normalize_invertible drops it)");
      b.tokens(s, "ln_attn_out", "[B, S, H]", H, "input of the intermediate GEMM (inter_w gradient)");
    } else {
      if (!inv) b.tokens(s, "attn_residual", "[B, S, H]", H, "attn LayerNorm input (normalize_invertible drops it)");
      b.tokens(s, "ln_attn_out", "[B, S, H]", H, "attention block output: FFN input and residual");
    }
    if (!inv) b.stats(s, "ln_attn_mean", "attn LayerNorm backward");
    b.stats(s, "ln_attn_rstd", "attn LayerNorm backward");
    if (plan.gelu_grad_saved)
      b.tokens(s, "ffn_gelu_grad", "[B, S, I]", I, "GELU'(h) for the GELU backward (gemm_sm90 saves it, not h)");
    else
      b.tokens(s, "ffn_pre_gelu", "[B, S, I]", I, "GELU input for the GELU backward");
    if (!c.gelu_checkpoint) b.tokens(s, "ffn_gelu_out", "[B, S, I]", I, "input of the output GEMM (output_w gradient)");
    if (!pre) {
      if (!inv) b.tokens(s, "ffn_residual", "[B, S, H]", H, "norm LayerNorm input (normalize_invertible drops it)");
      if (!inv) b.stats(s, "ln_norm_mean", "norm LayerNorm backward");
      b.stats(s, "ln_norm_rstd", "norm LayerNorm backward");
    }
  }

  // ---- workspace (scratch shared by passes and layers) ----
  auto& w = plan.workspace;
  if (!train) {
    if (pre) b.tokens(w, "ln_norm_out", "[B, S, H]", H, "scratch");
    b.tokens(w, "qkv", "[B, S, 3H]", 3 * H, "scratch");
    if (!fused) b.scores(w, "attn_probs", "scratch");
    b.tokens(w, "attn_context", "[B, S, H]", H, "scratch");
    b.tokens(w, "attn_residual", "[B, S, H]", H, "scratch");
    b.tokens(w, "ln_attn_out", "[B, S, H]", H, "scratch");
    b.stats(w, "ln_scratch_mean", "scratch");
    b.stats(w, "ln_scratch_rstd", "scratch");
    b.tokens(w, "ffn_pre_gelu", "[B, S, I]", I, "scratch");
    b.tokens(w, "ffn_gelu_out", "[B, S, I]", I, "scratch");
    if (!pre) b.tokens(w, "ffn_residual", "[B, S, H]", H, "scratch");
  } else {
    if (!fused && attn_drop && c.attn_dropout_checkpoint) b.scores(w, "attn_probs_dropped", "recomputed dropout(P)");
    if (bits && !bits_saved)
      b.head_row_words(w, "attn_dropout_bits",
                       std::string("attention dropout keep mask (attn_dropout_checkpoint: not kept; rewritten by ") +
                           (plan.attn_bits_bwd_in_ln    ? "layernorm_fwd_norm's re-run"
                            : plan.attn_bits_bwd_in_dot ? "attn_flash_bwd_dot"
                                                        : "attn_dropout_bits_bwd") +
                           " for the backward" +
                           (plan.attn_bits_in_ln    ? ", by layernorm_fwd_norm for attn_flash_fwd)"
                            : plan.attn_mask_kernel ? ", by attn_dropout_bits_fwd for attn_flash_fwd)"
                                                    : ")"));
    if (inv && pre)
      b.tokens(w, "ln_norm_out", "[B, S, H]", H, "LN(layer input) for the QKV GEMM; backward recomputes it (not kept)");
    if (inv) b.tokens(w, "attn_residual", "[B, S, H]", H, "residual sum (not kept with normalize_invertible)");
    if (inv) b.stats(w, "ln_scratch_mean", "LayerNorm means (not kept with normalize_invertible)");
    if (inv && !pre) b.tokens(w, "ffn_residual", "[B, S, H]", H, "residual sum (not kept)");
    if (c.gelu_checkpoint) b.tokens(w, "ffn_gelu_out", "[B, S, I]", I, "GELU output (recomputed in backward)");
    b.tokens(w, "grad_h_a", "[B, S, H]", H, "gradient scratch");
    b.tokens(w, "grad_h_b", "[B, S, H]", H, "gradient scratch");
    b.tokens(w, "grad_inter", "[B, S, I]", I, "gradient scratch");
    if (sm90_bwd && w_t)
      w.push_back({"output_w_t", "[I, H]", Extent::Fixed, static_cast<int64_t>(I) * H, b.eb,
                   "output_wᵀ, gemm_output_dgrad's K-major B operand (rewritten every backward)"});
    if (dgrad && w_t) {
      w.push_back({"inter_w_t", "[H, I]", Extent::Fixed, static_cast<int64_t>(H) * I, b.eb,
                   "inter_wᵀ, gemm_inter_dgrad's K-major B operand (rewritten every backward)"});
      w.push_back({"attn_ow_t", "[H, H]", Extent::Fixed, static_cast<int64_t>(H) * H, b.eb,
                   "attn_owᵀ, gemm_attn_out_dgrad's K-major B operand (rewritten every backward)"});
      if (pre)
        w.push_back({"attn_qkvw_t", "[H, 3H]", Extent::Fixed, static_cast<int64_t>(3) * H * H, b.eb,
                     "attn_qkvwᵀ, gemm_qkv_dgrad's K-major B operand (rewritten every backward)"});
    }
    b.tokens(w, "grad_qkv", "[B, S, 3H]", 3 * H, "gradient scratch");
    if (fused)
      b.head_rows(w, "attn_row_dot", "D = rowsum(dO ⊙ O) of the fused attention backward");
    if (!fused)
      b.scores(w, "grad_scores", "gradient of the attention scores");
    else if (plan.attn_dq_gemm)
      b.scores(w, "grad_scores", "dSᵀ from attn_flash_bwd_dkdv for the dQ GEMM");
    if (plan.attn_dq_atomic || plan.attn_dq_reduce)
      w.push_back({"attn_dq_acc", "[B, S, H] fp32", Extent::Tokens, H, 4,
                   plan.attn_dq_atomic ? "dQ·√d accumulated with atomics by attn_flash_bwd_dkdvdq (stochastic_mode)"
                                       : "dQ·√d accumulated by attn_flash_bwd_dkdv's TMA reductions (stochastic_mode)"});
    if (plan.attn_dq_atomic) {
      w.push_back({"attn_dq_tickets", "[B, heads] u32", Extent::Heads, c.heads, 4,
                   "key tiles of each head done with attn_dq_acc (the last one writes dQ)"});
    }
    // Row-tile partial sums: LayerNorm gamma+beta (2H) always; bias gradients (3H, I) in fp32.
    const int64_t part_width = epi ? 2 * H : std::max({int64_t{2} * H, int64_t{3} * H, int64_t{I}});
    w.push_back({"grad_param_partials", epi ? "[ceil(B·S/8), 2H] fp32" : "[ceil(B·S/8), max(3H, I)] fp32",
                 Extent::RowTiles, part_width, 4, "bias / LayerNorm gradient partials"});
  }
  b.tokens(w, "linear_out", "[B, S, H]", H, "output of the attention / FFN output projections");
  return plan;
}

}  // namespace dskc
