// TransformerLayer: the forward and backward schedules (kernels from the generated module,
// GEMMs in cuBLAS/cuBLASLt) for Pre-LN and Post-LN. docs/DESIGN.md has the math; the comments
// below name the buffers each step reads and writes.
#include "runtime/transformer_layer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "compiler/env_choice.h"
#include "compiler/errors.h"
#include "runtime/driver.h"
#include "runtime/host_tensor.h"
#include "runtime/kernel_params.h"
#include "runtime/layer_params.h"
#include "runtime/tma.h"

namespace dskc {

namespace {
constexpr size_t kAlign = 256;
size_t align_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
enum PtrArray { kQ, kK, kV, kScores, kProbsDrop, kCtx, kDCtx, kDQ, kDK, kDV, kDScores, kNumArrays };
// The plan for this GPU: its architecture decides kernels such as gemm_sm90.
PlanOptions plan_options(const Context& ctx, const LayerOptions& opt) {
  PlanOptions po;
  po.attention = opt.attention;
  po.arch = detect_gpu_arch(ctx.device()).value_or("");
  return po;
}
}  // namespace

LoadedModule::LoadedModule(Context& ctx, const std::string& image) : ctx_(ctx) {
  ctx_.make_current();
  DSKC_CU(cuModuleLoadData(&module_, image.data()));
}
LoadedModule::~LoadedModule() {
  if (module_) driver().cuModuleUnload(module_);
}
CUfunction LoadedModule::function(const std::string& name) const {
  auto it = functions_.find(name);
  if (it != functions_.end()) return it->second;
  CUfunction f = nullptr;
  CUresult r = driver().cuModuleGetFunction(&f, module_, name.c_str());
  if (r == CUDA_ERROR_NOT_FOUND)
    throw Error(ErrorKind::Internal, fmt::format("kernel {} missing from the module", name));
  if (r != CUDA_SUCCESS) throw_cuda_error(r, "cuModuleGetFunction", __FILE__, __LINE__);
  functions_[name] = f;
  return f;
}
void LoadedModule::load(const std::vector<std::string>& names) const {
  for (const auto& n : names) function(n);
}

TransformerLayer::TransformerLayer(Context& ctx, const LayerConfig& cfg, const LayerOptions& opt)
    : ctx_(ctx), plan_(make_plan(cfg, plan_options(ctx, opt))), opt_(opt) {
  ctx_.make_current();
  CompileOptions co;
  co.arch = detect_gpu_arch(ctx_.device()).value_or("sm_90");
  BuildResult br = build_module(plan_, co, opt.use_cache, opt.cache_dir);
  from_cache_ = br.module.from_cache;
  build_ms_ = br.module.compile_ms;
  module_ = std::make_unique<LoadedModule>(ctx_, br.module.image);
  // Every kernel now: with lazy loading a kernel first used in backward would otherwise need
  // device memory for its code in the middle of a step (a full GPU then fails there).
  module_->load(br.generated.kernel_names);
  for (const auto& k : plan_.kernels)
    if (k.dynamic_smem > 0)
      DSKC_CU(cuFuncSetAttribute(module_->function(k.name), CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 k.dynamic_smem));
  {
    CUdevice dev;
    DSKC_CU(cuDeviceGet(&dev, ctx_.device()));
    DSKC_CU(cuDeviceGetAttribute(&sm_count_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  }
  const bool ln_bits_waves = ln_bits_whole_waves_from_env();  // read always: a typo is an error
  if (plan_.attn_bits_in_ln && ln_bits_waves) {
    const KernelInfo* k = plan_.find_kernel("layernorm_fwd_norm");
    DSKC_ASSERT(k, "plan attn_bits_in_ln without layernorm_fwd_norm");
    int per_sm = 0;
    DSKC_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, module_->function("layernorm_fwd_norm"), k->block,
                                                        static_cast<size_t>(k->dynamic_smem)));
    ln_bits_wave_blocks_ = std::max(1, per_sm) * sm_count_;
  }
  if (plan_.attn_bwd_persist) {
    // The persistent attention backward: as many clusters as the GPU holds at once (each walks heads),
    // at most DSKC_ATTN_BWD_PERSIST's count.
    const KernelInfo* k = plan_.find_kernel("attn_flash_bwd_dkdv");
    DSKC_ASSERT(k && k->grid == GridKind::FlashHeads, "plan attn_bwd_persist without the persistent attn_flash_bwd_dkdv");
    CUlaunchConfig lc{};
    lc.gridDimX = static_cast<unsigned>(2 * sm_count_);
    lc.gridDimY = lc.gridDimZ = 1;
    lc.blockDimX = static_cast<unsigned>(k->block);
    lc.blockDimY = lc.blockDimZ = 1;
    lc.sharedMemBytes = static_cast<unsigned>(k->dynamic_smem);
    int clusters = 0;
    DSKC_CU(cuOccupancyMaxActiveClusters(&clusters, module_->function(k->name), &lc));
    if (clusters < 1)
      throw Error(ErrorKind::Device,
                  "attn_flash_bwd_dkdv (persistent) fits no cluster of two blocks on this GPU; set DSKC_ATTN_BWD_PERSIST=off");
    const int cap = attn_bwd_persist_from_env();
    attn_bwd_clusters_ = cap > 0 ? std::min(cap, clusters) : clusters;
  }
  gemm_ = std::make_unique<Gemm>(ctx_, cfg.dtype(), cfg.stochastic_mode && opt.gemm_autotune);
  regen_ = layer_regen_from_env();
  output_bias_early_ = output_bias_early_from_env();
  side_enabled_ = cfg.training && (opt.side_stream < 0 ? layer_side_stream_from_env() : opt.side_stream != 0);
  graphs_ = opt.cuda_graphs < 0 ? layer_graphs_from_env() : opt.cuda_graphs != 0;
  const size_t eb = dtype_bytes(cfg.dtype());
  size_t off = 0;
  for (const auto& p : layer_param_specs(cfg)) {
    size_t n = 1;
    for (auto d : p.shape) n *= static_cast<size_t>(d);
    param_offset_[p.name] = off;
    off += align_up(n * eb);
  }
  params_ = DeviceBuffer(ctx_, off);
  grads_ = cfg.training ? DeviceBuffer(ctx_, off) : DeviceBuffer();
  size_t soff = 0;
  for (const auto& s : plan_.saved) {
    saved_offset_[s.name] = soff;
    soff += align_up(s.bytes(cfg.batch_size, cfg.max_seq_length));
  }
  saved_ = DeviceBuffer(ctx_, soff);
  // The fused attention kernels index heads themselves; only the unfused path's batched GEMMs and
  // the fused path's cuBLAS dQ GEMM take per-head pointer arrays.
  if (!plan_.fused_attention || (plan_.attn_dq_gemm && !plan_.attn_dq_wgmma))
    ptr_arrays_ = DeviceBuffer(ctx_, sizeof(void*) * kNumArrays * cfg.batch_size * cfg.heads);
  zero_mask_ = DeviceBuffer(ctx_, static_cast<size_t>(cfg.batch_size) * cfg.max_seq_length * eb);
  DSKC_CU(cuMemsetD8Async(zero_mask_.ptr(), 0, zero_mask_.bytes(), ctx_.stream()));
  if (grads_.bytes()) DSKC_CU(cuMemsetD8Async(grads_.ptr(), 0, grads_.bytes(), ctx_.stream()));
  // DSKC_GEMM_TILES=dynamic: gemm_sm90's tile counter and finished-block counter, zero between its
  // launches (its last block resets them); every gemm_sm90 of the layer runs on the main stream.
  if (plan_.gemm_dynamic_tiles) {
    gemm_sched_ = DeviceBuffer(ctx_, 2 * sizeof(uint32_t));
    DSKC_CU(cuMemsetD32Async(gemm_sched_.ptr(), 0, 2, ctx_.stream()));
  }
  if (cfg.training && plan_.bias_grad_gemv) {
    const size_t words = (static_cast<size_t>(cfg.batch_size) * cfg.max_seq_length + 1) / 2;
    ones_ = DeviceBuffer(ctx_, words * 4);
    // Two 1.0s per word as fp16 (0x3C00) or bf16 (0x3F80); fp32 layers never take this path.
    DSKC_ASSERT(eb == 2, "bias_grad_gemv needs a 16-bit dtype");
    DSKC_CU(cuMemsetD32Async(ones_.ptr(), cfg.dtype() == DType::BF16 ? 0x3F803F80u : 0x3C003C00u, words, ctx_.stream()));
  }
  ctx_.synchronize();
}

TransformerLayer::~TransformerLayer() {
  if (fork_event_) driver().cuEventDestroy(fork_event_);
  for (CUevent e : side_events_) driver().cuEventDestroy(e);
}

bool layer_graphs_from_env() {
  return env_choice("DSKC_LAYER_GRAPHS", false, {{"0", false}, {"1", true}},
                    "0 (the default: every kernel launched by itself) or 1 (each forward and backward launched as a "
                    "CUDA graph)");
}

bool ln_bits_whole_waves_from_env() {
  return env_choice("DSKC_LN_BITS_BLOCKS", true, {{"waves", true}, {"all", false}},
                    "\"waves\" (the default: a last wave of layernorm_fwd_bits that fills less than half the GPU "
                    "draws no attention keep words, it only normalizes) or \"all\" (every block draws a share)");
}

int ln_bits_word_blocks(int grid, int wave_blocks) {
  DSKC_ASSERT(grid >= 1, "layernorm_fwd_bits grid of at least one block");
  if (wave_blocks <= 0 || grid <= wave_blocks) return grid;  // "all", or one (partial) wave
  // A last wave of less than half the GPU would run its share of Philox work at low occupancy
  // after the others are done; a fuller one overlaps the others' tails, so it keeps its share.
  const int tail = grid % wave_blocks;
  return 2 * tail < wave_blocks ? grid - tail : grid;
}

RegenPlacement layer_regen_from_env() {
  return env_choice("DSKC_LAYER_REGEN", RegenPlacement::Early,
                    {{"early", RegenPlacement::Early},
                     {"dgrad", RegenPlacement::AfterOutputDgrad},
                     {"main", RegenPlacement::Main}},
                    "\"early\" (the default: first on the side stream), \"dgrad\" (on the side stream after the "
                    "FFN's output data gradient) or \"main\" (on the main stream where they are needed)");
}

bool output_bias_early_from_env() {
  return env_choice("DSKC_OUTPUT_BIAS_EARLY", true, {{"1", true}, {"0", false}},
                    "1 (the default: under gelu_checkpoint output_b's column sum goes to the side stream first) "
                    "or 0 (next to the output_w gradient)");
}

bool layer_side_stream_from_env() {
  return env_choice("DSKC_LAYER_STREAMS", true, {{"2", true}, {"1", false}},
                    "1 (one stream) or 2 (backward overlaps the weight-gradient GEMMs on a second stream, the "
                    "default)");
}

void TransformerLayer::fork() {
  if (!side_) return;
  DSKC_CU(cuEventRecord(fork_event_, ctx_.stream()));
  DSKC_CU(cuStreamWaitEvent(side_lane_.stream, fork_event_, 0));
}

void TransformerLayer::side_done(std::initializer_list<CUdeviceptr> bufs) {
  if (!side_) return;
  if (side_events_used_ == side_events_.size()) {
    CUevent e = nullptr;
    DSKC_CU(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    side_events_.push_back(e);
  }
  CUevent e = side_events_[side_events_used_++];
  DSKC_CU(cuEventRecord(e, side_lane_.stream));
  for (CUdeviceptr b : bufs)
    if (b) side_touched_.emplace_back(b, e);
}

void TransformerLayer::main_waits_for(CUdeviceptr buf) {
  if (!side_) return;
  // Side events complete in order: waiting for the last one that touched buf covers the others.
  CUevent last = nullptr;
  for (auto it = side_touched_.begin(); it != side_touched_.end();) {
    if (it->first == buf) {
      last = it->second;
      it = side_touched_.erase(it);
    } else {
      ++it;
    }
  }
  if (last) DSKC_CU(cuStreamWaitEvent(ctx_.stream(), last, 0));
}

void TransformerLayer::join() {
  if (!side_) return;
  side_done({});
  DSKC_CU(cuStreamWaitEvent(ctx_.stream(), side_events_[side_events_used_ - 1], 0));
  side_touched_.clear();
  side_events_used_ = 0;
  side_ = false;
}

CUdeviceptr TransformerLayer::param(const std::string& name) const {
  auto it = param_offset_.find(name);
  if (it == param_offset_.end()) throw Error(ErrorKind::Input, fmt::format("no layer parameter '{}'", name));
  return params_.ptr() + it->second;
}
CUdeviceptr TransformerLayer::grad(const std::string& name) const {
  auto it = param_offset_.find(name);
  if (it == param_offset_.end()) throw Error(ErrorKind::Input, fmt::format("no layer parameter '{}'", name));
  if (!grads_.bytes()) throw Error(ErrorKind::Input, "this layer was built with training = false: no gradients");
  return grads_.ptr() + it->second;
}

void TransformerLayer::set_params(const std::map<std::string, std::vector<float>>& host) {
  for (const auto& p : layer_param_specs(plan_.cfg)) {
    auto it = host.find(p.name);
    if (it == host.end()) throw Error(ErrorKind::Input, fmt::format("parameter '{}' is missing", p.name));
    size_t n = 1;
    for (auto d : p.shape) n *= static_cast<size_t>(d);
    if (it->second.size() != n)
      throw Error(ErrorKind::Input, fmt::format("parameter '{}' has {} values, expected {}", p.name, it->second.size(), n));
    upload(ctx_, param(p.name), it->second, plan_.cfg.dtype());
  }
}

static std::map<std::string, std::vector<float>> read_all(Context& ctx, const LayerConfig& cfg,
                                                          const std::function<CUdeviceptr(const std::string&)>& at) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& p : layer_param_specs(cfg)) {
    size_t n = 1;
    for (auto d : p.shape) n *= static_cast<size_t>(d);
    out[p.name] = download(ctx, at(p.name), n, cfg.dtype());
  }
  return out;
}
std::map<std::string, std::vector<float>> TransformerLayer::get_params() const {
  return read_all(ctx_, plan_.cfg, [this](const std::string& n) { return param(n); });
}
std::map<std::string, std::vector<float>> TransformerLayer::get_grads() const {
  return read_all(ctx_, plan_.cfg, [this](const std::string& n) { return grad(n); });
}

CUdeviceptr TransformerLayer::t(const std::string& name) const {
  if (auto it = saved_offset_.find(name); it != saved_offset_.end()) return saved_.ptr() + it->second;
  if (auto it = workspace_offset_.find(name); it != workspace_offset_.end()) return workspace_ + it->second;
  DSKC_ASSERT(false, "plan has no tensor " + name);
  return 0;
}

void TransformerLayer::prepare_call(int batch, int seq) {
  const LayerConfig& c = plan_.cfg;
  if (batch < 1 || batch > c.batch_size)
    throw Error(ErrorKind::Input,
                fmt::format("batch {} exceeds the layer's batch_size {}: raise batch_size in the layer config (the "
                            "kernel's buffers are sized for it) or lower the prediction batch to {} or less",
                            batch, c.batch_size, c.batch_size));
  if (seq < 1 || seq > c.max_seq_length)
    throw Error(ErrorKind::Input,
                fmt::format("sequence length {} exceeds the layer's max_seq_length {}: raise max_seq_length in the "
                            "layer config or shorten the inputs",
                            seq, c.max_seq_length));
  batch_ = batch;
  seq_ = seq;
  workspace_offset_.clear();
  size_t off = 0;
  for (const auto& w : plan_.workspace) {
    workspace_offset_[w.name] = off;
    off += align_up(w.bytes(batch, seq));
  }
  workspace_ = ctx_.scratch(off);
  // Attention pointer arrays: per (b, h) the row-major bases of Q, K, V, scores, ...
  if ((!plan_.fused_attention || (plan_.attn_dq_gemm && !plan_.attn_dq_wgmma)) &&
      (arrays_batch_ != batch || arrays_seq_ != seq || arrays_workspace_ != workspace_)) {
    const int H = c.hidden_size, d = c.head_dim(), heads = c.heads, sp = padded_seq(seq);
    const size_t eb = dtype_bytes(c.dtype());
    const int n = batch * heads;
    std::vector<CUdeviceptr> host(static_cast<size_t>(kNumArrays) * n, 0);
    const bool train = c.training, unfused = !plan_.fused_attention;
    CUdeviceptr qkv = t("qkv"), probs = unfused ? t("attn_probs") : 0, ctxb = t("attn_context");
    const bool drop = train && c.attn_dropout_ratio > 0;
    CUdeviceptr pd = drop && unfused ? t("attn_probs_dropped") : probs;
    CUdeviceptr dctx = t("linear_out");
    CUdeviceptr dqkv = train ? t("grad_qkv") : 0, ds = train ? t("grad_scores") : 0;
    for (int b = 0; b < batch; ++b)
      for (int h = 0; h < heads; ++h) {
        const int i = b * heads + h;
        const size_t tok0 = static_cast<size_t>(b) * seq;
        const size_t qoff = (tok0 * 3 * H + static_cast<size_t>(h) * d) * eb;
        const size_t coff = (tok0 * H + static_cast<size_t>(h) * d) * eb;
        const size_t soff = static_cast<size_t>(i) * seq * sp * eb;
        auto set = [&](int a, CUdeviceptr v) { host[static_cast<size_t>(a) * n + i] = v; };
        set(kQ, qkv + qoff);
        set(kK, qkv + qoff + H * eb);
        set(kV, qkv + qoff + 2 * H * eb);
        if (unfused) {
          set(kScores, probs + soff);
          set(kProbsDrop, pd + soff);
        }
        set(kCtx, ctxb + coff);
        set(kDCtx, dctx + coff);
        if (train) {
          set(kDQ, dqkv + qoff);
          set(kDK, dqkv + qoff + H * eb);
          set(kDV, dqkv + qoff + 2 * H * eb);
          set(kDScores, ds + soff);
        }
      }
    DSKC_CU(cuMemcpyHtoDAsync(ptr_arrays_.ptr(), host.data(), host.size() * sizeof(CUdeviceptr), ctx_.stream()));
    ctx_.synchronize();  // `host` goes out of scope
    arrays_batch_ = batch;
    arrays_seq_ = seq;
    arrays_workspace_ = workspace_;
  }
}

unsigned TransformerLayer::grid_for(const KernelInfo& k, int rows) const {
  switch (k.grid) {
    case GridKind::Rows: return static_cast<unsigned>((rows + k.rows_per_block - 1) / k.rows_per_block);
    case GridKind::AttnRows:
      return static_cast<unsigned>((static_cast<int64_t>(batch_) * plan_.cfg.heads * seq_ + k.rows_per_block - 1) /
                                   k.rows_per_block);
    case GridKind::Elementwise: {
      const int64_t vecs = static_cast<int64_t>(rows) * k.cols / k.vec;
      return static_cast<unsigned>(std::min<int64_t>((vecs + k.block - 1) / k.block, 65535));
    }
    case GridKind::RowTiles: return static_cast<unsigned>(grad_parts(rows));
    case GridKind::ColumnTiles: return static_cast<unsigned>((k.cols + kReduceTileCols - 1) / kReduceTileCols);
    case GridKind::FlashTiles: {  // whole clusters
      const int tiles = (seq_ + k.rows_per_block - 1) / k.rows_per_block;
      return static_cast<unsigned>((tiles + k.cluster - 1) / k.cluster * k.cluster);
    }
    case GridKind::Persistent: {
      const int64_t tiles = (rows + k.rows_per_block - 1) / k.rows_per_block * (k.cols / k.tile_cols);
      return static_cast<unsigned>(std::min<int64_t>(tiles, sm_count_));
    }
    case GridKind::Fixed: return static_cast<unsigned>(k.grid_x);
    case GridKind::FlashHeads:  // clusters of two blocks, each walking heads
      return static_cast<unsigned>(2 * std::min<int64_t>(static_cast<int64_t>(batch_) * plan_.cfg.heads,
                                                         attn_bwd_clusters_));
  }
  return 1;
}

void TransformerLayer::launch(const std::string& kernel, unsigned grid_x, unsigned grid_y, const void* params,
                              CUstream stream) {
  const KernelInfo* k = plan_.find_kernel(kernel);
  DSKC_ASSERT(k, "kernel " + kernel + " not in plan");
  CUfunction f = module_->function(kernel);
  void* args[] = {const_cast<void*>(params)};
  if (prof_) prof_->begin(kernel, stream);
  DSKC_CU(cuLaunchKernel(f, grid_x, grid_y, 1, static_cast<unsigned>(k->block), 1, 1,
                         static_cast<unsigned>(k->dynamic_smem), stream, args, nullptr));
  if (prof_) prof_->end(stream);
}

void TransformerLayer::gemm(const char* name, const GemmShape& s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c,
                            float alpha, float beta, CUdeviceptr bias, CUdeviceptr bias_grad) {
  main_waits_for(c);
  if (prof_) prof_->begin(name, ctx_.stream());
  gemm_->run(s, a, b, c, alpha, beta, bias, bias_grad);
  if (prof_) prof_->end(ctx_.stream());
}

void TransformerLayer::gemm_gelu(const char* name, const GemmShape& s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c,
                                 CUdeviceptr bias, CUdeviceptr aux) {
  main_waits_for(c);
  if (bias) main_waits_for(aux);  // GELU_AUX_BIAS writes aux; DGELU only reads it
  if (prof_) prof_->begin(name, ctx_.stream());
  gemm_->run_gelu(s, a, b, c, bias, aux);
  if (prof_) prof_->end(ctx_.stream());
}

kp::GemmSm90 TransformerLayer::gemm_sm90_operands(CUdeviceptr a, CUdeviceptr b, int rows, int n, int k,
                                                   CUdeviceptr out, CUdeviceptr gelu, CUdeviceptr pre,
                                                   bool b_n_major) const {
  // A [rows, k] and B [n, k] in 128-row boxes of 64 k (b_n_major: B [k, n] in boxes of 64 k rows x 64
  // n); the epilogue's [rows, n] tensors (those the kernel uses: 0 = none) in 64 x 64 boxes.
  const DType t = plan_.cfg.dtype();
  kp::GemmSm90 g{};
  g.a = tma_kmajor_128b(a, t, rows, k, k, kGemmSm90BlockM);
  g.b = b_n_major ? tma_kmajor_128b(b, t, k, n, n, kGemmSm90BlockK) : tma_kmajor_128b(b, t, n, k, k, kGemmSm90BlockN);
  if (out) g.out = tma_kmajor_128b(out, t, rows, n, n, kGemmSm90EpiBoxRows);
  if (gelu) g.gelu = tma_kmajor_128b(gelu, t, rows, n, n, kGemmSm90EpiBoxRows);
  if (pre) g.pre = tma_kmajor_128b(pre, t, rows, n, n, kGemmSm90EpiBoxRows);
  g.m = rows;
  g.sched = reinterpret_cast<kp::Ptr>(gemm_sched_.ptr());
  return g;
}

void TransformerLayer::gemm_sm90_linear(const char* name, CUdeviceptr a, CUdeviceptr b, int rows, int n, int k,
                                        CUdeviceptr out, CUdeviceptr bias, bool b_n_major) {
  main_waits_for(out);
  kp::GemmSm90 g = gemm_sm90_operands(a, b, rows, n, k, out, 0, 0, b_n_major);
  g.bias = reinterpret_cast<kp::Ptr>(bias);
  run_kernel(name, &g, rows);
}

void TransformerLayer::gemm_side(const char* name, const GemmShape& s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c,
                                 CUdeviceptr bias_grad) {
  // bias_grad_gemv: the bias gradient by its own column-sum GEMM (bias_sum) just before the weight
  // gradient, instead of the weight gradient's BGRADB epilogue.
  const bool gemv = bias_grad && plan_.bias_grad_gemv;
  if (!side_) {
    if (gemv) bias_sum(name, s, a, bias_grad);
    return gemm(name, s, a, b, c, 1.f, 0.f, 0, gemv ? 0 : bias_grad);
  }
  fork();
  if (gemv) side_gemm(std::string(name) + "_bias", bias_sum_shape(s), ones_.ptr(), a, bias_grad);
  side_gemm(name, s, a, b, c, gemv ? 0 : bias_grad);
  side_done({a, b, c, bias_grad});
}

GemmShape TransformerLayer::bias_sum_shape(const GemmShape& s) {
  // bias_grad[M] = ones[1, K]·A[K, M] for the weight gradient s = A[K, M]ᵀ·B (A = dY, read as stored)
  return {false, false, 1, s.m, s.k, s.k, s.lda, s.m};
}

void TransformerLayer::bias_sum(const char* name, const GemmShape& s, CUdeviceptr a, CUdeviceptr bias_grad) {
  const std::string n = std::string(name) + "_bias";
  if (!side_) return gemm(n.c_str(), bias_sum_shape(s), ones_.ptr(), a, bias_grad);
  fork();
  side_gemm(n, bias_sum_shape(s), ones_.ptr(), a, bias_grad);
  side_done({a, bias_grad});
}

void TransformerLayer::side_gemm(const std::string& name, const GemmShape& s, CUdeviceptr a, CUdeviceptr b,
                                 CUdeviceptr c, CUdeviceptr bias_grad) {
  if (prof_) prof_->begin(name, side_lane_.stream);
  gemm_->run(s, a, b, c, 1.f, 0.f, 0, bias_grad, &side_lane_);
  if (prof_) prof_->end(side_lane_.stream);
}

void TransformerLayer::gemm_batched(const char* name, const GemmShape& s, CUdeviceptr a, CUdeviceptr b,
                                    CUdeviceptr c, int count, float alpha) {
  if (prof_) prof_->begin(name, ctx_.stream());
  gemm_->run_batched(s, a, b, c, count, alpha);
  if (prof_) prof_->end(ctx_.stream());
}

void TransformerLayer::run_kernel(const std::string& name, const void* params, int rows, bool on_side) {
  const KernelInfo* k = plan_.find_kernel(name);
  DSKC_ASSERT(k, "kernel " + name + " not in plan");
  // FlashTiles: grid.y = B·heads (make_plan keeps batch_size·heads <= 65535 on that path).
  const unsigned grid_y = k->grid == GridKind::FlashTiles ? static_cast<unsigned>(batch_ * plan_.cfg.heads)
                          : k->grid == GridKind::Fixed    ? static_cast<unsigned>(k->grid_y)
                                                          : 1u;
  if (on_side && side_) {
    fork();
    launch(name, grid_for(*k, rows), grid_y, params, side_lane_.stream);
  } else {
    launch(name, grid_for(*k, rows), grid_y, params, ctx_.stream());
  }
}

void TransformerLayer::run_layernorm_norm(const kp::LayerNormFwd& p, const kp::AttnDropoutBits& bits, bool on_side) {
  if (plan_.attn_bits_in_ln) {
    const KernelInfo* k = plan_.find_kernel("layernorm_fwd_norm");
    DSKC_ASSERT(k, "kernel layernorm_fwd_norm not in plan");
    const int grid = static_cast<int>(grid_for(*k, p.rows));
    const kp::LayerNormFwdBits pb{p, bits, ln_bits_word_blocks(grid, ln_bits_wave_blocks_)};
    run_kernel("layernorm_fwd_norm", &pb, p.rows, on_side);
  } else {
    DSKC_ASSERT(!bits.bits, "keep bits from layernorm_fwd_norm without plan attn_bits_in_ln");
    run_kernel("layernorm_fwd_norm", &p, p.rows, on_side);
  }
}

void TransformerLayer::reduce(const std::string& kernel, CUdeviceptr part, int parts, CUdeviceptr out0,
                              CUdeviceptr out1) {
  // On the side stream when there is one: nothing on the main stream reads parameter gradients, so
  // only the next kernel that writes the partials waits for it (main_waits_for(part)).
  const KernelInfo* k = plan_.find_kernel(kernel);
  kp::ParamGradReduce p{reinterpret_cast<const float*>(part), reinterpret_cast<kp::Ptr>(out0),
                        reinterpret_cast<kp::Ptr>(out1), parts};
  if (side_) fork();
  launch(kernel, grid_for(*k, 0), static_cast<unsigned>(k->arrays), &p, side_ ? side_lane_.stream : ctx_.stream());
  if (side_) side_done({part, out0, out1});
}

#define P(x) reinterpret_cast<kp::Ptr>(x)
#define F(x) reinterpret_cast<float*>(x)
#define U32(x) reinterpret_cast<uint32_t*>(x)

void TransformerLayer::run_maybe_graphed(GraphExec& exec, std::set<std::pair<int, int>>& warm, int batch, int seq,
                                         const char* what, const std::function<void()>& issue) {
  const std::pair<int, int> shape{batch, seq};
  // The first call at a shape runs as it is: it allocates, loads and tunes what later calls reuse,
  // which a capture cannot do.
  if (!graphs_ || prof_ || !warm.count(shape)) {
    issue();
    if (graphs_) warm.insert(shape);
    return;
  }
  ctx_.make_current();
  try {
    const bool updated = exec.set(capture_graph(ctx_.stream(), what, issue), what);
    exec.launch(ctx_.stream());
    ++graph_launches_;
    graph_updates_ += updated;
  } catch (const Error&) {
    // Capturing runs nothing, and a failed set() or launch leaves the work not enqueued: run the call as
    // it is (a real error in it throws again here).
    issue();
  }
}

void TransformerLayer::forward(CUdeviceptr input, CUdeviceptr mask, CUdeviceptr output, int batch, int seq,
                               uint32_t step) {
  run_maybe_graphed(fwd_graph_, fwd_warm_, batch, seq, "the layer's forward",
                    [&] { forward_calls(input, mask, output, batch, seq, step); });
}

void TransformerLayer::backward(CUdeviceptr grad_output, CUdeviceptr grad_input) {
  run_maybe_graphed(bwd_graph_, bwd_warm_, batch_, seq_, "the layer's backward",
                    [&] { backward_calls(grad_output, grad_input); });
}

void TransformerLayer::forward_calls(CUdeviceptr input, CUdeviceptr mask, CUdeviceptr output, int batch, int seq,
                                     uint32_t step) {
  ctx_.make_current();
  prepare_call(batch, seq);
  const LayerConfig& c = plan_.cfg;
  const int H = c.hidden_size, I = c.intermediate_size, rows = batch * seq, sp = padded_seq(seq);
  const bool pre = c.pre_layer_norm, train = c.training, inv = c.normalize_invertible;
  const bool attn_drop = train && c.attn_dropout_ratio > 0;
  step_ = step;
  const kp::DropoutArgs rng{c.seed, opt_.layer_id, step};
  input_ = input;
  mask_ = mask ? mask : zero_mask_.ptr();
  output_ = output;
  auto mean_buf = [&](const char* name) { return F(!train || inv ? t("ln_scratch_mean") : t(name)); };
  auto rstd_buf = [&](const char* name) { return F(!train ? t("ln_scratch_rstd") : t(name)); };

  // Attention input: LN(x) in Pre-LN, x in Post-LN.
  CUdeviceptr h1 = input;
  if (pre) {
    h1 = t("ln_norm_out");
    // Pre-LN keeps this LayerNorm's mean in training (backward uses x̂ from the input).
    // DSKC_ATTN_MASK=ln: the same launch writes the attention dropout keep bits for attn_flash_fwd.
    run_layernorm_norm({P(input), P(param("norm_w")), P(param("norm_b")), P(h1),
                        F(train ? t("ln_norm_mean") : t("ln_scratch_mean")), rstd_buf("ln_norm_rstd"), rows},
                       {plan_.attn_bits_in_ln ? U32(t("attn_dropout_bits")) : nullptr, batch, seq, rng});
  }
  // qkv = h1 · attn_qkvwᵀ + attn_qkvb                                   [rows, 3H]
  if (plan_.linear_gemm_sm90)
    gemm_sm90_linear("gemm_qkv_fwd", h1, param("attn_qkvw"), rows, 3 * H, H, t("qkv"), param("attn_qkvb"));
  else
    gemm("gemm_qkv_fwd", {false, true, rows, 3 * H, H, H, H, 3 * H}, h1, param("attn_qkvw"), t("qkv"), 1.f, 0.f,
         param("attn_qkvb"));
  const int n = batch * c.heads, d = c.head_dim();
  const CUdeviceptr arr = ptr_arrays_.ptr();
  auto array = [&](int a) { return arr + static_cast<size_t>(a) * n * sizeof(CUdeviceptr); };
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  if (plan_.fused_attention) {
    // ctx = dropout(softmax(Q·Kᵀ/√d + mask))·V in one kernel; training keeps the row logsumexp and,
    // unless attn_dropout_checkpoint, the dropout keep bits: stored by attn_flash_fwd, or with
    // DSKC_ATTN_MASK=kernel written first by attn_dropout_bits_fwd and read by attn_flash_fwd.
    if (plan_.attn_mask_kernel && !plan_.attn_bits_in_ln) {
      kp::AttnDropoutBits pk{U32(t("attn_dropout_bits")), batch, seq, rng};
      run_kernel("attn_dropout_bits_fwd", &pk, rows);
    }
    const bool fwd_bits = plan_.attn_fwd_stores_bits() || plan_.attn_mask_kernel;
    if (plan_.attn_fwd_wgmma) {
      // The wgmma kernel takes Q and K/V by TMA (a per-sequence 3-D view: rows past S read as zero).
      kp::AttnFlashFwdWg p{};
      p.qkv = tma_rows_3d_128b(t("qkv"), c.dtype(), 3 * H, seq, batch, 3 * H, 64);
      if (plan_.attn_tma_stores) p.ctx_out = tma_rows_3d_128b(t("attn_context"), c.dtype(), H, seq, batch, H, 64);
      p.mask = P(mask_);
      p.ctx = P(t("attn_context"));
      p.lse = train ? F(t("attn_lse")) : nullptr;
      p.bits = fwd_bits ? U32(t("attn_dropout_bits")) : nullptr;
      p.batch = batch;
      p.seq = seq;
      run_kernel("attn_flash_fwd", &p, rows);
    } else {
      kp::AttnFlashFwd p{P(t("qkv")), P(mask_), P(t("attn_context")), train ? F(t("attn_lse")) : nullptr,
                         fwd_bits ? U32(t("attn_dropout_bits")) : nullptr, batch, seq, rng};
      run_kernel("attn_flash_fwd", &p, rows);
    }
  } else {
    // scores[b,h] = Q·Kᵀ / sqrt(d)                                          [S, S8] per head
    gemm_batched("gemm_attn_scores_fwd", {false, true, seq, seq, d, 3 * H, 3 * H, sp}, array(kQ), array(kK),
                 array(kScores), n, scale);
    kp::AttnSoftmaxFwd p{P(t("attn_probs")), P(mask_), P(attn_drop ? t("attn_probs_dropped") : 0), batch, seq, sp, rng};
    run_kernel("attn_softmax_dropout_fwd", &p, rows);
    // ctx[b, :, h] = dropout(P) · V                                          [rows, H]
    gemm_batched("gemm_attn_context_fwd", {false, false, seq, d, seq, sp, 3 * H, H}, array(kProbsDrop), array(kV),
                 array(kCtx), n);
  }
  // linear_out = ctx · attn_owᵀ                                            [rows, H]
  if (plan_.linear_gemm_sm90)
    gemm_sm90_linear("gemm_attn_out_fwd", t("attn_context"), param("attn_ow"), rows, H, H, t("linear_out"));
  else
    gemm("gemm_attn_out_fwd", {false, true, rows, H, H, H, H, H}, t("attn_context"), param("attn_ow"), t("linear_out"));
  {
    // Pre-LN: a = x + drop(linear_out + ob); ln_attn_out = LN(a).  Post-LN: same with a -> s1, ln -> a.
    kp::BiasDropoutResidualLn p{P(t("linear_out")), P(param("attn_ob")), P(input), P(t("attn_residual")),
                                P(param("attn_nw")), P(param("attn_nb")), P(t("ln_attn_out")),
                                mean_buf("ln_attn_mean"), rstd_buf("ln_attn_rstd"), rows, rng};
    run_kernel("bias_dropout_residual_layernorm_fwd_attn", &p, rows);
  }
  // ffn_pre_gelu = ln_attn_out · inter_wᵀ + inter_b (epilogue); then GELU          [rows, I]
  const GemmShape inter_fwd{false, true, rows, I, H, H, H, I};
  if (plan_.ffn_gemm_sm90) {
    // gemm_sm90: h or GELU'(h) (training: plan gelu_grad_saved) and GELU(h) from the GEMM's epilogue
    kp::GemmSm90 g = gemm_sm90_operands(t("ln_attn_out"), param("inter_w"), rows, I, H,
                                        !train ? 0 : t(plan_.gelu_grad_saved ? "ffn_gelu_grad" : "ffn_pre_gelu"),
                                        t("ffn_gelu_out"));
    g.bias = P(param("inter_b"));
    run_kernel("gemm_inter_fwd", &g, rows);
  } else if (plan_.gelu_in_gemm) {
    // ffn_gelu_out = GELU(ffn_pre_gelu), both from the GEMM's GELU_AUX_BIAS epilogue
    gemm_gelu("gemm_inter_fwd", inter_fwd, t("ln_attn_out"), param("inter_w"), t("ffn_gelu_out"), param("inter_b"),
              t("ffn_pre_gelu"));
  } else {
    gemm("gemm_inter_fwd", inter_fwd, t("ln_attn_out"), param("inter_w"), t("ffn_pre_gelu"), 1.f, 0.f,
         param("inter_b"));
    kp::BiasGeluFwd p{P(t("ffn_pre_gelu")), P(param("inter_b")), P(t("ffn_gelu_out")), rows};
    run_kernel("bias_gelu_fwd", &p, rows);
  }
  // linear_out = gelu · output_wᵀ                                          [rows, H]
  if (plan_.output_gemm_fused) {
    // DSKC_OUTPUT_GEMM=fused: output = attn_residual + dropout(gelu · output_wᵀ + output_b) from the
    // GEMM's epilogue (the residual by TMA from `pre`).
    kp::GemmSm90 g = gemm_sm90_operands(t("ffn_gelu_out"), param("output_w"), rows, H, I, output, 0, t("attn_residual"));
    g.bias = P(param("output_b"));
    g.rng = rng;
    run_kernel("gemm_output_fwd", &g, rows);
  } else if (plan_.linear_gemm_sm90) {
    gemm_sm90_linear("gemm_output_fwd", t("ffn_gelu_out"), param("output_w"), rows, H, I, t("linear_out"));
  } else {
    gemm("gemm_output_fwd", {false, true, rows, H, I, I, I, H}, t("ffn_gelu_out"), param("output_w"), t("linear_out"));
  }
  if (pre && !plan_.output_gemm_fused) {  // (fused: the GEMM above wrote the layer output)
    kp::BiasDropoutResidual p{P(t("linear_out")), P(param("output_b")), P(t("attn_residual")), P(output), rows, rng};
    run_kernel("bias_dropout_residual_fwd_ffn", &p, rows);
  } else if (!pre) {
    kp::BiasDropoutResidualLn p{P(t("linear_out")), P(param("output_b")), P(t("ln_attn_out")), P(t("ffn_residual")),
                                P(param("norm_w")), P(param("norm_b")), P(output), mean_buf("ln_norm_mean"),
                                rstd_buf("ln_norm_rstd"), rows, rng};
    run_kernel("bias_dropout_residual_layernorm_fwd_ffn", &p, rows);
  }
  have_forward_ = train;
}

void TransformerLayer::backward_calls(CUdeviceptr grad_output, CUdeviceptr grad_input) {
  const LayerConfig& c = plan_.cfg;
  if (!c.training) throw Error(ErrorKind::Input, "backward() on a layer built with training = false");
  if (!have_forward_) throw Error(ErrorKind::Input, "backward() without a preceding forward()");
  ctx_.make_current();
  prepare_call(batch_, seq_);  // same shapes: keeps workspace offsets
  const int H = c.hidden_size, I = c.intermediate_size, rows = batch_ * seq_, seq = seq_, sp = padded_seq(seq_);
  const bool pre = c.pre_layer_norm, inv = c.normalize_invertible;
  const bool attn_drop = c.attn_dropout_ratio > 0, hid_drop = c.hidden_dropout_ratio > 0;
  const kp::DropoutArgs rng{c.seed, opt_.layer_id, step_};
  const int parts = grad_parts(rows);
  const CUdeviceptr part = t("grad_param_partials");
  const CUdeviceptr ga = t("grad_h_a"), gb = t("grad_h_b"), gi = t("grad_inter"), gq = t("grad_qkv");
  const CUdeviceptr lin = t("linear_out");
  const int n = batch_ * c.heads, d = c.head_dim();
  const CUdeviceptr arr = ptr_arrays_.ptr();
  auto array = [&](int a) { return arr + static_cast<size_t>(a) * n * sizeof(CUdeviceptr); };
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  // Two streams (LayerOptions::side_stream): the weight-gradient GEMMs go to the side stream as soon
  // as their operands exist; the main stream runs the chain of data gradients and waits for side
  // work only before it overwrites a buffer that work reads (main_waits_for) and at the end (join).
  side_ = side_enabled_ && (!prof_ || prof_->keeps_streams());
  side_touched_.clear();
  side_events_used_ = 0;
  if (side_) {
    side_lane_ = ctx_.side_lane();
    if (!fork_event_) DSKC_CU(cuEventCreate(&fork_event_, CU_EVENT_DISABLE_TIMING));
  }
  // Tensors backward regenerates that no main-stream step needs before the attention backward go
  // first on the side stream (overlapping the FFN backward), else where they are needed: the
  // attention dropout keep bits under attn_dropout_checkpoint and, in Pre-LN with
  // normalize_invertible, the first LayerNorm's output (same kernel as forward, same bits).
  const CUdeviceptr h1 = pre ? t("ln_norm_out") : input_;
  // attn_bits_bwd_in_ln: the LayerNorm re-run writes the bits as well, so it runs where the bits are
  // needed (regenerate_bits) and not again later.
  bool ln_done = false;
  auto regenerate_ln = [&](bool on_side) {
    if (!(pre && inv) || ln_done) return;
    ln_done = true;
    const bool with_bits = plan_.attn_bits_bwd_in_ln;
    run_layernorm_norm({P(input_), P(param("norm_w")), P(param("norm_b")), P(h1), F(t("ln_norm_mean")),
                        F(t("ln_norm_rstd")), rows},
                       {with_bits ? U32(t("attn_dropout_bits")) : nullptr, batch_, seq, rng}, on_side);
    if (on_side) side_done({h1, t("ln_norm_mean"), t("ln_norm_rstd"), with_bits ? t("attn_dropout_bits") : 0});
  };
  auto regenerate_bits = [&](bool on_side) {
    if (!(plan_.fused_attention && plan_.attn_keep_bits && !plan_.attn_keep_bits_saved)) return;
    if (plan_.attn_bits_bwd_in_ln) return regenerate_ln(on_side);
    if (plan_.attn_bits_bwd_in_dot) return;  // attn_flash_bwd_dot writes them (below)
    kp::AttnDropoutBits pk{U32(t("attn_dropout_bits")), batch_, seq, rng};
    run_kernel("attn_dropout_bits_bwd", &pk, rows, on_side);
    if (on_side) side_done({t("attn_dropout_bits")});
  };
  // DSKC_SM90_WEIGHT=transpose: gemm_sm90's output-layer data gradient reads output_wᵀ (K-major),
  // transposed first, on the side stream while the main stream starts the FFN backward
  // (dgrad_gemm_sm90: the other data gradients' weights too, in the order they are needed). By
  // default (sm90_weight_in_place) the GEMMs read the weights as stored.
  auto transpose = [&](const char* kernel, const char* weight, const char* out) {
    kp::WeightTranspose p{P(param(weight)), P(t(out))};
    run_kernel(kernel, &p, rows, true);
    if (side_) side_done({t(out)});
  };
  const bool w_in_place = plan_.sm90_weight_in_place;
  if (plan_.ffn_gemm_sm90_bwd && !w_in_place) transpose("transpose_output_w", "output_w", "output_w_t");
  if (plan_.dgrad_gemm_sm90 && !w_in_place) {
    transpose("transpose_inter_w", "inter_w", "inter_w_t");
    transpose("transpose_attn_ow", "attn_ow", "attn_ow_t");
    if (pre) transpose("transpose_attn_qkvw", "attn_qkvw", "attn_qkvw_t");
  }
  // A data gradient dY·W: gemm_sm90 on W as stored or on Wᵀ (written above), or cuBLASLt.
  auto dgrad = [&](const char* name, CUdeviceptr dy, const char* weight, const char* weight_t, int n, int k,
                   CUdeviceptr out) {
    if (plan_.dgrad_gemm_sm90 && w_in_place) {
      gemm_sm90_linear(name, dy, param(weight), rows, n, k, out, 0, true);
    } else if (plan_.dgrad_gemm_sm90) {
      main_waits_for(t(weight_t));
      gemm_sm90_linear(name, dy, t(weight_t), rows, n, k, out);
    } else {
      gemm(name, {false, false, rows, n, k, k, n, n}, dy, param(weight), out);
    }
  };
  // (DSKC_LAYER_REGEN: on the side stream first, after the output data gradient, or on the main stream.)
  const bool regenerate_early = side_ && regen_ != RegenPlacement::Main;
  const bool regenerate_after_dgrad = regenerate_early && regen_ == RegenPlacement::AfterOutputDgrad;
  if (regenerate_early && !regenerate_after_dgrad) {
    regenerate_bits(true);
    regenerate_ln(true);
  }
  // x̂ from the LayerNorm output y (normalize_invertible: no input, no mean) or from x and mean.
  // dx_drop: also the gradient through the attention output's dropout (plan attn_out_dropout_in_ln).
  auto ln_bwd = [&](const char* kernel, CUdeviceptr dy, CUdeviceptr residual, CUdeviceptr x, CUdeviceptr y,
                    const char* gamma, const char* beta, const char* mean, const char* rstd, CUdeviceptr dx,
                    bool from_output, CUdeviceptr dx_drop = 0) {
    main_waits_for(dx);
    if (dx_drop) main_waits_for(dx_drop);
    main_waits_for(part);  // the previous reduction of the partials may still run on the side stream
    if (!from_output) main_waits_for(t(mean));
    kp::LayerNormBwd p{P(dy), P(residual), P(from_output ? y : x), P(param(gamma)), P(param(beta)),
                       from_output ? nullptr : F(t(mean)), F(t(rstd)), P(dx), F(part), rows, P(dx_drop), rng};
    run_kernel(kernel, &p, rows);
    reduce("param_grad_reduce_layernorm", part, parts, grad(gamma), grad(beta));
  };
  const bool epi = plan_.bias_grad_in_gemm;
  // Backward of dropout(x + bias): the masked gradient (returned) and, in fp32, the bias
  // gradient from partial sums; with the epilogue the wgrad GEMM sums it (epi_bias below).
  auto dropout_bwd = [&](const char* kernel, CUdeviceptr dy, CUdeviceptr dx, const char* bias) -> CUdeviceptr {
    if (epi && !hid_drop) return dy;
    main_waits_for(dx);
    if (!epi) main_waits_for(part);
    kp::DropoutBiasGrad p{P(dy), P(dx), F(part), rows, rng};
    run_kernel(kernel, &p, rows);
    if (!epi) reduce("param_grad_reduce_hidden", part, parts, grad(bias), 0);
    return hid_drop ? dx : dy;
  };
  auto epi_bias = [&](const char* bias) -> CUdeviceptr { return epi ? grad(bias) : 0; };

  // ---- FFN block ----
  CUdeviceptr d_out = grad_output;  // gradient wrt the FFN residual sum
  if (!pre) {
    // Post-LN: out = LN_norm(s2): d_s2 -> ga.
    ln_bwd("layernorm_bwd_norm", grad_output, 0, t("ffn_residual"), output_, "norm_w", "norm_b", "ln_norm_mean",
           "ln_norm_rstd", ga, inv);
    d_out = ga;
  }
  const CUdeviceptr d_o = dropout_bwd("dropout_bias_grad_ffn_out", d_out, gb, "output_b");  // d(gelu·Wᵀ + b)
  // gelu_checkpoint: GELU(h) comes back from the GELU backward pass, so the output_w gradient
  // runs after it; its bias column sum needs only d_o and goes to the side stream now, where the
  // side stream would otherwise idle until GELU(h) is back (measured: bench/NOTES.md v29).
  const GemmShape output_wgrad_shape{true, false, H, I, rows, H, I, I};
  const bool output_bias_early = c.gelu_checkpoint && plan_.bias_grad_gemv && output_bias_early_;
  auto output_wgrad = [&] {
    gemm_side("gemm_output_wgrad", output_wgrad_shape, d_o, t("ffn_gelu_out"), grad("output_w"),
              output_bias_early ? 0 : epi_bias("output_b"));
  };
  if (!c.gelu_checkpoint) output_wgrad();
  if (output_bias_early) bias_sum("gemm_output_wgrad", output_wgrad_shape, d_o, grad("output_b"));
  const GemmShape output_dgrad{false, false, rows, I, H, H, I, I};
  if (plan_.ffn_gemm_sm90_bwd) {
    // gi = (d_o · output_w) ⊙ GELU'(ffn_pre_gelu) (+ GELU(h) into ffn_gelu_out under gelu_checkpoint),
    // or ⊙ the saved ffn_gelu_grad
    if (!w_in_place) main_waits_for(t("output_w_t"));
    main_waits_for(gi);
    if (c.gelu_checkpoint) main_waits_for(t("ffn_gelu_out"));
    kp::GemmSm90 g = gemm_sm90_operands(d_o, w_in_place ? param("output_w") : t("output_w_t"), rows, I, H, gi,
                                        c.gelu_checkpoint ? t("ffn_gelu_out") : 0,
                                        t(plan_.gelu_grad_saved ? "ffn_gelu_grad" : "ffn_pre_gelu"), w_in_place);
    run_kernel("gemm_output_dgrad", &g, rows);
  } else if (plan_.gelu_in_gemm) {
    // gi = (d_o · output_w) ⊙ GELU'(ffn_pre_gelu): the DGELU epilogue
    gemm_gelu("gemm_output_dgrad", output_dgrad, d_o, param("output_w"), gi, 0, t("ffn_pre_gelu"));
  } else {
    gemm("gemm_output_dgrad", output_dgrad, d_o, param("output_w"), gi);
    main_waits_for(gi);
    if (!epi) main_waits_for(part);
    if (c.gelu_checkpoint) main_waits_for(t("ffn_gelu_out"));
    kp::BiasGeluBwd p{P(gi), P(t("ffn_pre_gelu")), P(c.gelu_checkpoint ? t("ffn_gelu_out") : 0), F(part), rows};
    run_kernel("bias_gelu_bwd", &p, rows);
    if (!epi) reduce("param_grad_reduce_inter", part, parts, grad("inter_b"), 0);
  }
  if (regenerate_after_dgrad) {
    regenerate_bits(true);
    regenerate_ln(true);
  }
  if (c.gelu_checkpoint) output_wgrad();
  gemm_side("gemm_inter_wgrad", {true, false, I, H, rows, I, H, H}, gi, t("ln_attn_out"), grad("inter_w"),
            epi_bias("inter_b"));
  // ---- attention LayerNorm ----
  CUdeviceptr d_s1;  // gradient wrt the attention residual sum
  // Into linear_out (free until the attention output's data gradient): grad_h_b still feeds the
  // output_w gradient, which may be running on the side stream.
  dgrad("gemm_inter_dgrad", gi, "inter_w", "inter_w_t", H, I, lin);
  // (attn_grad_own_scratch: not grad_h_b, which the late output_w gradient may still read.)
  const CUdeviceptr spare = !pre ? ga : plan_.attn_grad_own_scratch ? t("attn_residual") : gb;
  const bool fold = plan_.attn_out_dropout_in_ln;  // the dropout's masked gradient -> spare
  if (pre) {
    // d_a = LN_attn_bwd(lin) + grad_output (residual) -> ga
    ln_bwd("layernorm_bwd_attn", lin, grad_output, t("attn_residual"), t("ln_attn_out"), "attn_nw", "attn_nb",
           "ln_attn_mean", "ln_attn_rstd", ga, inv, fold ? spare : 0);
    d_s1 = ga;
  } else {
    // d_s1 = LN_attn_bwd(lin + d_s2) straight into grad_input (the residual branch of the layer input's
    // gradient; the QKV data gradient is added to it last): grad_h_b may still be read by the
    // output_w gradient on the side stream, and grad_output is not read again.
    // (fold: the masked gradient goes into ga, which the LayerNorm reads as its residual: row by row,
    // each row read before it is written.)
    ln_bwd("layernorm_bwd_attn", lin, ga, t("attn_residual"), t("ln_attn_out"), "attn_nw", "attn_nb", "ln_attn_mean",
           "ln_attn_rstd", grad_input, inv, fold ? spare : 0);
    d_s1 = grad_input;
  }
  const CUdeviceptr d_ao = fold ? spare : dropout_bwd("dropout_bias_grad_attn_out", d_s1, spare, "attn_ob");
  gemm_side("gemm_attn_out_wgrad", {true, false, H, H, rows, H, H, H}, d_ao, t("attn_context"), grad("attn_ow"),
            epi_bias("attn_ob"));
  dgrad("gemm_attn_out_dgrad", d_ao, "attn_ow", "attn_ow_t", H, H, lin);  // d_ctx
  // ---- attention ----
  if (plan_.fused_attention) {
    // D = rowsum(dO ⊙ O); then dK, dV (per key tile) straight into grad_qkv and dQ by the batched GEMM
    // (default) or per query tile, or in stochastic_mode with DSKC_ATTN_DQ=atomic (plan
    // attn_dq_atomic) one pass: the dot kernel also zeroes the fp32 dQ
    // accumulator and tickets, attn_flash_bwd_dkdvdq adds each key tile's dQ share into it with
    // atomics, and the last key tile of each head writes that head's dQ into grad_qkv; or with
    // DSKC_ATTN_DQ=reduce (plan attn_dq_reduce) the wgmma dK/dV kernel adds the shares by TMA
    // reductions into the accumulator the dot kernel zeroed, and attn_dq_convert writes dQ.
    const bool dq_atomic = plan_.attn_dq_atomic, dq_reduce = plan_.attn_dq_reduce;
    float* dq_acc = dq_atomic || dq_reduce ? F(t("attn_dq_acc")) : nullptr;
    uint32_t* dq_tickets = dq_atomic ? U32(t("attn_dq_tickets")) : nullptr;
    // (attn_dot_in_dkdv: the wgmma dK/dV kernel computes D itself; the launch runs only for the bits.)
    const kp::AttnFlashDot pd{P(t("attn_context")), P(lin), F(t("attn_row_dot")), dq_acc, dq_tickets, batch_, seq};
    if (plan_.attn_bits_bwd_in_dot) {
      // attn_dropout_checkpoint: the same launch rewrites the keep bits for attn_flash_bwd_dkdv.
      const kp::AttnFlashDotBits pdb{pd, {U32(t("attn_dropout_bits")), batch_, seq, rng}};
      run_kernel("attn_flash_bwd_dot", &pdb, rows);
    } else if (!plan_.attn_dot_in_dkdv) {
      run_kernel("attn_flash_bwd_dot", &pd, rows);
    }
    // The dropout mask comes from attn_dropout_bits: saved by the forward, or (attn_dropout_checkpoint)
    // rewritten into the workspace (at the start on the side stream, else now).
    if (!regenerate_early) regenerate_bits(false);
    if (plan_.attn_keep_bits) main_waits_for(t("attn_dropout_bits"));
    main_waits_for(gq);
    const bool dq_gemm = plan_.attn_dq_gemm;
    if (dq_gemm) main_waits_for(t("grad_scores"));
    kp::AttnFlashBwd pb{P(t("qkv")), P(mask_), P(lin), F(t("attn_lse")), F(t("attn_row_dot")),
                        plan_.attn_keep_bits ? U32(t("attn_dropout_bits")) : nullptr, P(gq), dq_acc, dq_tickets,
                        dq_gemm ? P(t("grad_scores")) : nullptr, batch_, seq};
    if (dq_atomic) {
      run_kernel("attn_flash_bwd_dkdvdq", &pb, rows);
    } else if (dq_gemm || plan_.attn_dq_fused || dq_reduce) {
      // dK, dV and dSᵀ (row = key) per key tile; then dQ = dS·K/√d per head: A = grad_scores read
      // transposed, B = K in place in qkv, C = the dQ columns of grad_qkv. With attn_dq_fused the
      // wgmma kernel writes dQ itself (its block holds every key of the head).
      if (plan_.attn_bwd_wgmma) {
        // The wgmma kernel takes Q/K/V and dO by TMA (per-sequence 3-D views: rows past S read as
        // zero) and stores dSᵀ by TMA ([B·heads][S][padded S]).
        const DType dt = c.dtype();
        kp::AttnFlashBwdWg pw{};
        pw.qkv = tma_rows_3d_128b(t("qkv"), dt, 3 * H, seq, batch_, 3 * H, 64);
        pw.dctx = tma_rows_3d_128b(lin, dt, H, seq, batch_, H, 64);
        if (dq_gemm) pw.ds = tma_rows_3d_128b(t("grad_scores"), dt, sp, seq, batch_ * c.heads, sp, 64);
        if (plan_.attn_dot_in_dkdv) pw.ctx = tma_rows_3d_128b(t("attn_context"), dt, H, seq, batch_, H, 64);
        // stochastic_mode's dQ shares, added by TMA reductions into the fp32 accumulator (zeroed by
        // attn_flash_bwd_dot), then scaled and rounded into grad_qkv.
        if (dq_reduce) pw.dq_acc = tma_rows_3d_128b(t("attn_dq_acc"), DType::F32, H, seq, batch_, H, 64);
        // (kTmaOut: the fused-dQ form only; the persistent form always)
        if ((plan_.attn_tma_stores && plan_.attn_dq_fused) || plan_.attn_bwd_persist)
          pw.dqkv_out = tma_rows_3d_128b(gq, dt, 3 * H, seq, batch_, 3 * H, 64);
        pw.mask = P(mask_);
        pw.lse = F(t("attn_lse"));
        pw.dot = F(t("attn_row_dot"));
        pw.bits = pb.bits;
        pw.dqkv = P(gq);
        pw.batch = batch_;
        pw.seq = seq;
        run_kernel("attn_flash_bwd_dkdv", &pw, rows);
        if (plan_.attn_dq_wgmma) {
          // dQ from that dSᵀ and K by TMA (the same views), into grad_qkv's Q columns by TMA stores.
          const kp::AttnDqWg pq{pw.ds, pw.qkv, tma_rows_3d_128b(gq, dt, 3 * H, seq, batch_, 3 * H, 64), batch_, seq};
          run_kernel("attn_dq_wgmma", &pq, rows);
        }
        if (dq_reduce) {
          const kp::AttnDqConvert pc{dq_acc, P(gq), rows};
          run_kernel("attn_dq_convert", &pc, rows);
        }
      } else {
        run_kernel("attn_flash_bwd_dkdv", &pb, rows);
      }
      if (dq_gemm && !plan_.attn_dq_wgmma)
        gemm_batched("gemm_attn_dq", {true, false, seq, d, seq, sp, 3 * H, 3 * H}, array(kDScores), array(kK),
                     array(kDQ), n, scale);
    } else {
      run_kernel("attn_flash_bwd_dkdv", &pb, rows);
      run_kernel("attn_flash_bwd_dq", &pb, rows);
    }
  } else {
    if (c.attn_dropout_checkpoint && attn_drop) {
      kp::AttnDropoutRecompute p{P(t("attn_probs")), P(t("attn_probs_dropped")), batch_, seq, sp, rng};
      run_kernel("attn_dropout_recompute", &p, rows);
    }
    // dV = dropout(P)ᵀ · d_ctx ; d(P_drop) = d_ctx · Vᵀ
    gemm_batched("gemm_attn_dv", {true, false, seq, d, seq, sp, H, 3 * H}, array(kProbsDrop), array(kDCtx), array(kDV), n);
    gemm_batched("gemm_attn_dprobs", {false, true, seq, seq, d, H, 3 * H, sp}, array(kDCtx), array(kV), array(kDScores),
                 n);
    {
      kp::AttnSoftmaxBwd p{P(t("grad_scores")), P(t("attn_probs")), batch_, seq, sp, rng};
      run_kernel("attn_softmax_dropout_bwd", &p, rows);
    }
    // dQ = dS · K / sqrt(d) ; dK = dSᵀ · Q / sqrt(d)
    gemm_batched("gemm_attn_dq", {false, false, seq, d, seq, sp, 3 * H, 3 * H}, array(kDScores), array(kK), array(kDQ),
                 n, scale);
    gemm_batched("gemm_attn_dk", {true, false, seq, d, seq, sp, 3 * H, 3 * H}, array(kDScores), array(kQ), array(kDK),
                 n, scale);
  }
  if (!epi) {
    main_waits_for(part);
    kp::DropoutBiasGrad p{P(gq), P(0), F(part), rows, rng};
    run_kernel("bias_grad_qkv", &p, rows);
    reduce("param_grad_reduce_qkv", part, parts, grad("attn_qkvb"), 0);
  }
  // normalize_invertible kept only the statistics: LN(input) again (done already on the side stream).
  if (!regenerate_early) regenerate_ln(false);
  gemm_side("gemm_qkv_wgrad", {true, false, 3 * H, H, rows, 3 * H, H, H}, gq, h1, grad("attn_qkvw"),
            epi_bias("attn_qkvb"));
  if (pre) {
    dgrad("gemm_qkv_dgrad", gq, "attn_qkvw", "attn_qkvw_t", H, 3 * H, spare);
    ln_bwd("layernorm_bwd_norm", spare, d_s1, input_, 0, "norm_w", "norm_b", "ln_norm_mean", "ln_norm_rstd",
           grad_input, false);
  } else {
    // grad_input already holds d_s1.
    gemm("gemm_qkv_dgrad", {false, false, rows, H, 3 * H, 3 * H, H, H}, gq, param("attn_qkvw"), grad_input, 1.f, 1.f);
  }
  join();
}

}  // namespace dskc
