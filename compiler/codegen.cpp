// emit(): plan -> CUDA source (see codegen.h). Specialization is by constants in the generated
// dskc_config.cuh (templates branch with `if constexpr`), never by runtime flags.
#include "compiler/codegen.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "compiler/errors.h"
#include "compiler/templates.h"
#include "compiler/version.h"
#include "templates/common/philox.cuh"  // dropout_threshold

namespace dskc {

std::string float_literal(float v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s + "f";
}

static std::string on_off(bool b) { return b ? "on" : "off"; }

std::string emit_config_header(const LayerPlan& plan) {
  const LayerConfig& c = plan.cfg;
  const bool attn_drop = c.training && c.attn_dropout_ratio > 0;
  const bool hid_drop = c.training && c.hidden_dropout_ratio > 0;
  // The keep rule's threshold, computed by the same function the kernels and CPU reference use.
  auto thr = [](double r) { return dskc_rng::dropout_threshold(r); };
  std::ostringstream o;
  o << "// dskc_config.cuh: compile-time constants of this layer (generated; config " << plan.config_hash << ").\n"
    << "#pragma once\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n#include \"common/philox.cuh\"\n\n"
    << fmt::format("using T = {};  // storage type: {}\n", dtype_cuda_type(c.dtype()), dtype_name(c.dtype()))
    << fmt::format("constexpr int kBatch = {};  // batch_size: largest micro-batch accepted\n", c.batch_size)
    << fmt::format("constexpr int kMaxSeq = {};  // max_seq_length\n", c.max_seq_length)
    << fmt::format("constexpr int kSeqPad = {};  // attention rows padded to a multiple of this\n", kSeqPadElems)
    << fmt::format("constexpr int kHidden = {};\n", c.hidden_size)
    << fmt::format("constexpr int kHeads = {};\n", c.heads)
    << fmt::format("constexpr int kHeadDim = {};\n", c.head_dim())
    << fmt::format("constexpr int kInter = {};  // intermediate_size\n", c.intermediate_size)
    << fmt::format("constexpr float kLayerNormEps = {};\n", float_literal(static_cast<float>(c.layer_norm_eps)))
    << fmt::format("constexpr bool kTraining = {};\n", c.training)
    << fmt::format("constexpr bool kPreLayerNorm = {};\n", c.pre_layer_norm)
    << fmt::format("constexpr bool kGeluTanh = {};  // gelu_approximation: {}\n",
                   c.gelu_approximation == GeluForm::Tanh, c.gelu_approximation == GeluForm::Tanh ? "tanh" : "none (erf)")
    << fmt::format("constexpr bool kAttnDropoutCheckpoint = {};\n", c.attn_dropout_checkpoint)
    << fmt::format("constexpr bool kNormalizeInvertible = {};\n", c.normalize_invertible)
    << fmt::format("constexpr bool kGeluCheckpoint = {};\n", c.gelu_checkpoint)
    << fmt::format("constexpr bool kStochasticMode = {};\n", c.stochastic_mode)
    << fmt::format("constexpr bool kAttnDropoutOn = {};  // attn_dropout_ratio {}\n", attn_drop, c.attn_dropout_ratio)
    << fmt::format("constexpr bool kHiddenDropoutOn = {};  // hidden_dropout_ratio {}\n", hid_drop, c.hidden_dropout_ratio)
    << fmt::format("constexpr bool kAttnFwdStoresBits = {};  // {}\n", plan.attn_fwd_stores_bits(),
                   !plan.attn_keep_bits        ? "no fused attention dropout"
                   : plan.attn_bits_in_ln      ? "DSKC_ATTN_MASK=ln: layernorm_fwd_norm writes the keep bits"
                   : plan.attn_mask_kernel     ? "DSKC_ATTN_MASK=kernel: attn_dropout_bits_fwd writes the keep bits"
                   : plan.attn_keep_bits_saved ? "attn_flash_fwd saves its keep mask as bits for attn_flash_bwd_*"
                                               : "attn_dropout_checkpoint: attn_dropout_bits_bwd rewrites the bits in backward")
    << fmt::format("constexpr bool kAttnFwdLoadsBits = {};  // {}\n", plan.attn_mask_kernel,
                   !plan.attn_keep_bits    ? "no fused attention dropout"
                   : plan.attn_bits_in_ln  ? "DSKC_ATTN_MASK=ln: attn_flash_fwd reads the bits layernorm_fwd_norm wrote"
                   : plan.attn_mask_kernel ? "DSKC_ATTN_MASK=kernel: attn_flash_fwd reads the bits attn_dropout_bits_fwd wrote"
                                           : "DSKC_ATTN_MASK=inline: attn_flash_fwd draws the mask with Philox");
  o << fmt::format("constexpr int kAttnFwdStages = {};  // attn_flash_fwd's K/V tile buffers{}\n", plan.attn_fwd_stages,
                   plan.attn_fwd_stages == 2 ? " (the next tile prefetched with cp.async)" : "");
  o << fmt::format("constexpr bool kLnBwdWarpRows = {};  // layernorm_bwd: {}\n", plan.ln_bwd_warp_rows,
                   plan.ln_bwd_warp_rows ? "a warp per row where rows are at most 128 vectors" : "a block per row");
  o << fmt::format("constexpr bool kFfnGemmSm90 = {};  // {}\n", plan.ffn_gemm_sm90,
                   plan.ffn_gemm_sm90_bwd ? "the FFN's GELU GEMMs are gemm_sm90 kernels (GELU, GELU' in their epilogue)"
                   : plan.ffn_gemm_sm90   ? "the intermediate GEMM is a gemm_sm90 kernel (GELU in its epilogue)"
                                          : "the FFN's GEMMs run in cuBLASLt");
  o << fmt::format("constexpr int kGemmGeluRegions = {0};  // gemm_sm90's GELU epilogue: {0} regions per warpgroup, {1} stages\n",
                   plan.gemm_gelu_regions, gemm_sm90_stages(plan.gemm_gelu_regions));
  o << fmt::format("constexpr bool kGemmDynamicTiles = {};  // gemm_sm90's tiles: {}\n", plan.gemm_dynamic_tiles,
                   plan.gemm_dynamic_tiles ? "each block takes the next from a global counter (DSKC_GEMM_TILES=dynamic)"
                                           : "block b computes tiles b, b + grid, ...");
  o << fmt::format("constexpr bool kLinearGemmSm90 = {};  // {}\n", plan.linear_gemm_sm90,
                   plan.linear_gemm_sm90 ? "the forward's QKV, attention-output and output GEMMs are gemm_sm90 kernels"
                                         : "the forward's QKV, attention-output and output GEMMs run in cuBLASLt");
  o << fmt::format("constexpr bool kGeluInGemm = {};  // {}\n", plan.gelu_in_gemm,
                   plan.gelu_in_gemm ? "tanh GELU in cuBLASLt's GELU_AUX_BIAS / DGELU GEMM epilogues (no bias_gelu kernels)"
                                     : "GELU by bias_gelu_fwd / bias_gelu_bwd");
  o << fmt::format("constexpr bool kAttnTmaStores = {};  // {}\n", plan.attn_tma_stores,
                   plan.attn_tma_stores ? "the wgmma attention kernels store their output tiles by TMA"
                                        : "DSKC_ATTN_STORE=rows: the wgmma attention kernels store 4-byte pairs");
  if (attn_drop)
    o << fmt::format("constexpr uint32_t kAttnDropoutThreshold = {}u;  // keep iff draw >= ratio * 2^16 (16-bit draw)\n",
                     thr(c.attn_dropout_ratio))
      << fmt::format("constexpr float kAttnDropoutScale = {};  // 1 / (1 - ratio)\n",
                     float_literal(static_cast<float>(1.0 / (1.0 - c.attn_dropout_ratio))));
  else
    o << "constexpr uint32_t kAttnDropoutThreshold = 0u;  // no attention dropout\n"
      << "constexpr float kAttnDropoutScale = 1.0f;\n";
  if (hid_drop)
    o << fmt::format("constexpr uint32_t kHiddenDropoutThreshold = {}u;\n", thr(c.hidden_dropout_ratio))
      << fmt::format("constexpr float kHiddenDropoutScale = {};\n",
                     float_literal(static_cast<float>(1.0 / (1.0 - c.hidden_dropout_ratio))));
  else
    o << "constexpr uint32_t kHiddenDropoutThreshold = 0u;  // no hidden dropout\n"
      << "constexpr float kHiddenDropoutScale = 1.0f;\n";
  return o.str();
}

std::string inline_templates(const std::vector<std::string>& roots, const std::string& config_header,
                             std::vector<std::string>* inlined) {
  std::set<std::string> done;
  std::string out;
  std::vector<std::string> order;
  // Depth-first: a file's own includes are inlined before its body.
  std::function<void(const std::string&)> visit = [&](const std::string& path) {
    if (done.count(path)) return;
    done.insert(path);
    const std::string& text = path == "dskc_config.cuh" ? config_header : template_text(path);
    std::istringstream in(text);
    std::string line, body;
    while (std::getline(in, line)) {
      std::string t = line;
      t.erase(0, t.find_first_not_of(" \t"));
      if (t.rfind("#pragma once", 0) == 0) continue;
      if (t.rfind("#include", 0) == 0) {
        auto q1 = t.find('"');
        if (q1 != std::string::npos) {
          auto q2 = t.find('"', q1 + 1);
          visit(t.substr(q1 + 1, q2 - q1 - 1));
          continue;
        }
        body += line + "\n";  // system headers stay where they are (may sit inside #if)
        continue;
      }
      body += line + "\n";
    }
    out += "\n// ---------------- " + path + " ----------------\n" + body;
    order.push_back(path);
  };
  for (const auto& r : roots) visit(r);
  if (inlined) *inlined = order;
  return out;
}

// Byte sizes of the kernels' params structs; runtime/kernel_params.h mirrors them and pins the
// same numbers, and the generated source static_asserts them, so host and device cannot drift.
static int params_bytes(const std::string& type) {
  static const std::map<std::string, int> sizes = {
      {"LayerNormFwdParams", 56},    {"LayerNormFwdBitsParams", 96},      {"BiasDropoutResidualLnParams", 96},
      {"BiasDropoutResidualParams", 56},
      {"BiasGeluFwdParams", 32},     {"AttnSoftmaxFwdParams", 56},        {"AttnSoftmaxBwdParams", 48},
      {"AttnDropoutRecomputeParams", 48}, {"LayerNormBwdParams", 104},     {"ParamGradReduceParams", 32},
      {"DropoutBiasGradParams", 48}, {"BiasGeluBwdParams", 40},
      {"AttnFlashFwdParams", 64},    {"AttnFlashDotParams", 48},          {"AttnFlashDotBitsParams", 80},
      {"AttnFlashBwdParams", 88},
      {"AttnDropoutBitsParams", 32}, {"GemmSm90Params", 768}, {"WeightTransposeParams", 16},
      {"AttnFlashBwdWgParams", 896},      {"AttnFlashFwdWgParams", 384}, {"AttnDqConvertParams", 24},
      {"AttnDqWgParams", 512}};
  auto it = sizes.find(type);
  DSKC_ASSERT(it != sizes.end(), "unknown params struct " + type);
  return it->second;
}

static const char* grid_text(GridKind g) {
  switch (g) {
    case GridKind::Rows: return "grid = ceil(B·S / rows per block) (a warp or a block per token row)";
    case GridKind::AttnRows: return "grid = ceil(B·heads·S / rows per block) (warps own attention rows)";
    case GridKind::Elementwise: return "grid-stride over 16-byte vectors";
    case GridKind::RowTiles: return "grid = ceil(B·S / kGradRowsPerBlock) (row tiles)";
    case GridKind::ColumnTiles: return "grid = (ceil(cols / 16), arrays)";
    case GridKind::FlashTiles: return "grid = (ceil(S / rows per tile), B·heads) (one tile of one head per block)";
    case GridKind::Persistent: return "grid = min(SMs, output tiles) (persistent: each block walks tiles)";
    case GridKind::Fixed: return "grid fixed by the layer";
    case GridKind::FlashHeads:
      return "grid = 2 · min(B·heads, resident clusters) (persistent: each cluster of two blocks walks heads)";
  }
  return "";
}

GeneratedModule emit(const LayerPlan& plan, const EmitOptions& opt) {
  const LayerConfig& c = plan.cfg;
  GeneratedModule m;
  m.config_header = emit_config_header(plan);
  std::vector<std::string> roots{"dskc_config.cuh"};
  for (const auto& k : plan.kernels) {
    std::string f = k.op + ".cuh";
    if (std::find(roots.begin(), roots.end(), f) == roots.end()) roots.push_back(f);
  }
  std::string body = inline_templates(roots, m.config_header, &m.templates);

  std::ostringstream o;
  o << "// ==== dskc generated module ====\n"
    << fmt::format("// dskc {} | config {} | arch {} | NVRTC {}\n", kDskcVersion, plan.config_hash, opt.arch,
                   opt.nvrtc_version.empty() ? "unknown" : opt.nvrtc_version)
    << "// options:";
  for (const auto& s : opt.nvrtc_options) o << " " << s;
  o << "\n"
    << fmt::format("// layer: hidden {}, heads {} (head dim {}), intermediate {}, batch <= {}, seq <= {}, {}, {}\n",
                   c.hidden_size, c.heads, c.head_dim(), c.intermediate_size, c.batch_size, c.max_seq_length,
                   dtype_name(c.dtype()), c.pre_layer_norm ? "Pre-LN" : "Post-LN")
    << fmt::format("// dropout: attention {}, hidden {}; eps {}; GELU {}; {}\n", c.attn_dropout_ratio,
                   c.hidden_dropout_ratio, c.layer_norm_eps,
                   c.gelu_approximation == GeluForm::Tanh ? "tanh" : "erf", c.training ? "training" : "inference")
    << fmt::format("// flags: attn_dropout_checkpoint {}, normalize_invertible {}, gelu_checkpoint {}, "
                   "stochastic_mode {}\n",
                   on_off(c.attn_dropout_checkpoint), on_off(c.normalize_invertible), on_off(c.gelu_checkpoint),
                   on_off(c.stochastic_mode))
    << fmt::format("// kernels ({}):", plan.kernels.size());
  for (const auto& k : plan.kernels) o << " " << k.name;
  o << (plan.ffn_gemm_sm90 || plan.linear_gemm_sm90
            ? "\n// The gemm_sm90 kernels are GEMMs (TMA + wgmma); the other GEMMs run in cuBLAS/cuBLASLt between "
              "these kernels; see `dskc inspect` for the schedule.\n"
            : "\n// GEMMs run in cuBLAS/cuBLASLt between these kernels; see `dskc inspect` for the schedule.\n");
  o << body;
  o << "\n// ================ kernels ================\nusing namespace dskc;\n";
  for (const auto& k : plan.kernels) {
    o << fmt::format("\n// {} ({} pass): {}\n// launch: block {}, {}\n", k.name,
                     k.pass == Pass::Forward ? "forward" : "backward", k.fuses, k.block, grid_text(k.grid));
    o << fmt::format("static_assert({} == {}, \"dskc plan and template disagree on {}'s block size\");\n",
                     k.shape_check, k.block, k.name);
    if (k.grid == GridKind::AttnRows)
      o << fmt::format("static_assert(AttnRows::kRowsPerBlock == {}, \"dskc plan and template disagree on {}'s rows per "
                       "block\");\n",
                       k.rows_per_block, k.name);
    if (!k.rows_check.empty())
      o << fmt::format("static_assert({} == {}, \"dskc plan and template disagree on {}'s rows per {}\");\n",
                       k.rows_check, k.rows_per_block, k.name, k.grid == GridKind::FlashTiles || k.grid == GridKind::FlashHeads ? "tile" : "block");
    if (k.tile_cols)
      o << fmt::format("static_assert(GemmSm90Tile::kBlockN == {}, \"dskc plan and template disagree on {}'s tile "
                       "columns\");\n",
                       k.tile_cols, k.name);
    if (k.dynamic_smem)
      o << fmt::format("static_assert({} == {}, \"dskc plan and template disagree on {}'s dynamic shared memory\");\n",
                       k.smem_check, k.dynamic_smem, k.name);
    o << fmt::format("static_assert(sizeof({}) == {}, \"{} must match runtime/kernel_params.h\");\n", k.params_type,
                     params_bytes(k.params_type), k.params_type);
    const std::string bounds = k.min_blocks.empty() ? std::to_string(k.block) : fmt::format("{}, {}", k.block, k.min_blocks);
    o << fmt::format("extern \"C\" __global__ void __launch_bounds__({}){} {}(const {}{} p) {{\n  {}(p);\n}}\n", bounds,
                     k.cluster > 1 ? fmt::format(" DSKC_CLUSTER_DIMS({})", k.cluster) : std::string(), k.name,
                     k.grid_constant ? "__grid_constant__ " : "", k.params_type, k.instantiation);
    m.kernel_names.push_back(k.name);
  }
  m.source = o.str();
  return m;
}

std::string emit_fixed_kernels(const std::vector<FixedKernel>& kernels, int block, const std::string& block_const,
                               const std::string& block_what, const std::string& host_header) {
  std::string o = "\n// ================ kernels ================\nusing namespace dskc;\n";
  o += fmt::format("static_assert({} == {}, \"{} kernels run {}-thread blocks\");\n", block_const, block, block_what,
                   block);
  for (const FixedKernel& k : kernels) {
    o += fmt::format("\n// {}: {}\n", k.name, k.what);
    o += fmt::format("static_assert(sizeof({}) == {}, \"{} must match {}\");\n", k.params_type, k.params_bytes,
                     k.params_type, host_header);
    o += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}(const {} p) {{\n  {};\n}}\n", block,
                     k.name, k.params_type, k.instantiation);
  }
  return o;
}

}  // namespace dskc
