// CudaBackend: construction, parameter / optimizer-state / gradient transfer, gradient norms
// and the optimizer (design in bert_cuda.h; forward_backward is in bert_cuda_step.cpp).
#include "trainer/bert_cuda.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>

#include "compiler/env_choice.h"
#include "compiler/errors.h"
#include "compiler/model_codegen.h"
#include "compiler/nvrtc_compile.h"
#include "runtime/driver.h"
#include "runtime/host_tensor.h"
#include "runtime/layer_params.h"
#include "runtime/plain_layer.h"
#include "trainer/bert_cuda_params.h"
#include "trainer/peer_sum.h"
#include "trainer/process_group.h"

namespace dskc {
namespace {
constexpr size_t kAlignFloats = 64;  // 256 bytes
constexpr size_t kAlignBytes = 256;
constexpr int kPartials = 1024;      // fixed grid of the two-stage reductions
constexpr int kRangeParts = 128;     // sum_squares: blocks per range of the pending-layers table
// Elements per block of the one-launch optimizers (adam_multi, lamb_multi's stage 2): 8 per thread.
constexpr uint64_t kOptChunk = 2048;
constexpr unsigned kMaxGrid = 4096;  // grid-stride kernels
size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
// Adam's bias corrections 1 − β1^t and 1 − β2^t (1 without bias correction).
std::pair<double, double> bias_corrections(const OptimizerSettings& s, int64_t step) {
  const double t = static_cast<double>(step);
  return s.bias_correction ? std::pair{1.0 - std::pow(s.beta1, t), 1.0 - std::pow(s.beta2, t)} : std::pair{1.0, 1.0};
}
// Lamb's step size: lr, times sqrt(1 - beta2^t) / (1 - beta1^t) with bias_correction.
double lamb_step_size(const OptimizerSettings& s, const UpdateArgs& a) {
  const auto [bc1, bc2] = bias_corrections(s, a.step);
  return s.bias_correction ? a.lr * std::sqrt(bc2) / bc1 : a.lr;
}
// Lamb stage 1's blocks for a tensor of n elements (per tensor and in the three-launch form alike):
// one per 4·kModelBlock elements (each thread takes groups of four), at most kPartials.
uint64_t lamb_parts(uint64_t n) { return std::min<uint64_t>((n + 4 * kModelBlock - 1) / (4 * kModelBlock), kPartials); }
unsigned stride_grid(size_t n) {
  return static_cast<unsigned>(std::clamp<size_t>((n + kModelBlock - 1) / kModelBlock, 1, kMaxGrid));
}
// A device copy of a host table (range and segment tables set up once per run); returns when the
// copy is done, so `rows` may go out of scope.
template <typename T>
DeviceBuffer upload_table(Context& ctx, const std::vector<T>& rows) {
  DeviceBuffer b(ctx, rows.size() * sizeof(T));
  DSKC_CU(cuMemcpyHtoDAsync(b.ptr(), rows.data(), b.bytes(), ctx.stream()));
  ctx.synchronize();
  return b;
}
}  // namespace

CUdeviceptr CudaBackend::Growable::ensure(Context& ctx, size_t bytes) {
  if (buf.bytes() < bytes) {
    ctx.synchronize();  // kernels in flight may still use the old buffer
    buf = DeviceBuffer();
    buf = DeviceBuffer(ctx, align_up(bytes + bytes / 2, kAlignBytes));
  }
  return buf.ptr();
}

CudaBackend::CudaBackend(const BackendOptions& opt) : opt_(opt), dtype_(opt.dtype) {
  multi_tensor_optimizer_ =
      opt.multi_tensor_optimizer < 0
          ? env_choice("DSKC_OPTIMIZER", true, {{"multi", true}, {"per_tensor", false}},
                       "multi (the default: Adam / AdamW over every parameter in one launch, Lamb in three) or "
                       "per_tensor (two or three launches per parameter tensor)")
          : opt.multi_tensor_optimizer != 0;
  defer_layer_grads_ =
      opt.defer_layer_grads < 0
          ? env_choice("DSKC_LAYER_GRADS", true, {{"defer", true}, {"accumulate", false}},
                       "defer (the default: a step of one micro-batch leaves the layers' gradients in their own "
                       "buffers for the norm and the optimizer) or accumulate (widened into the fp32 accumulators "
                       "after each layer's backward)")
          : opt.defer_layer_grads != 0;
  pad_vocab_ = env_choice("DSKC_HEAD_GEMMS", true, {{"padded", true}, {"plain", false}},
                          "padded (the default: the MLM decoder's three GEMMs over the vocabulary rounded up to 8, "
                          "padding zero) or plain (over the exact vocabulary)");
  ctx_ = std::make_unique<Context>(opt.local_rank >= 0 ? opt.local_rank : -1);
  ctx_->set_memory_cap(opt.memory_cap_bytes);
  eb_ = static_cast<size_t>(dtype_bytes(dtype_));
  layer_cfg_ = backend_layer_config(opt);
  specs_ = model_param_specs(opt.shape);
  for (const ParamSpec& p : layer_param_specs(layer_cfg_)) layer_param_names_.push_back(p.name);
  DSKC_ASSERT(layer_param_names_.size() == kLayerParams, "twelve layer parameters");

  const BertShape& s = opt.shape;
  layer_idx_.assign(static_cast<size_t>(s.num_hidden_layers), {});
  // The vocabulary rounded up to 8: the logits' row stride, and the rows of the word table's compute
  // copy (rows V..Vp-1 stay zero), so the decoder GEMMs can run over Vp aligned columns.
  vocab_pad_ = static_cast<int>(align_up(static_cast<size_t>(s.vocab_size), 8));
  word_ = index_of("bert.embeddings.word_embeddings.weight");
  dec_b_ = index_of("cls.predictions.bias");
  size_t woff = 0;
  for (size_t i = 0; i < specs_.size(); ++i) {
    const ModelParamSpec& sp = specs_[i];
    offset_.push_back(total_floats_);
    total_floats_ += align_up(static_cast<size_t>(sp.numel()), kAlignFloats);
    if (sp.layer >= 0) {
      auto it = std::find(layer_param_names_.begin(), layer_param_names_.end(), sp.layer_param);
      DSKC_ASSERT(it != layer_param_names_.end(), "layer parameter " + sp.layer_param);
      layer_idx_[static_cast<size_t>(sp.layer)][static_cast<size_t>(it - layer_param_names_.begin())] =
          static_cast<int>(i);
      woffset_.push_back(std::numeric_limits<size_t>::max());
    } else {
      woffset_.push_back(woff);
      // The word table and the decoder bias hold Vp rows / entries (padding zero from the memset
      // below; nothing else writes it).
      const size_t vp = static_cast<size_t>(vocab_pad_);
      const int idx = static_cast<int>(i);
      const size_t slot = idx == word_    ? vp * static_cast<size_t>(s.hidden_size)
                          : idx == dec_b_ ? vp
                                          : static_cast<size_t>(sp.numel());
      woff += align_up(slot * eb_, kAlignBytes);
    }
  }
  // What zero_grads' deferred memset clears before a forward_backward: every parameter but the
  // layers' (which that call assigns), with the alignment gap after it; adjacent ones merged.
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].layer >= 0) continue;
    const size_t b = offset_[i], e = i + 1 < specs_.size() ? offset_[i + 1] : total_floats_;
    if (!non_layer_ranges_.empty() && non_layer_ranges_.back().first + non_layer_ranges_.back().second == b)
      non_layer_ranges_.back().second += e - b;
    else
      non_layer_ranges_.emplace_back(b, e - b);
  }
  {
    const size_t wb = offset_[static_cast<size_t>(word_)], we = wb + numel(word_);
    for (const auto& [off, n] : non_layer_ranges_) {
      if (off < wb) zero_ranges_less_word_.emplace_back(off, std::min(off + n, wb) - off);
      if (we < off + n) zero_ranges_less_word_.emplace_back(std::max(off, we), off + n - std::max(off, we));
    }
  }
  pos_ = index_of("bert.embeddings.position_embeddings.weight");
  type_ = index_of("bert.embeddings.token_type_embeddings.weight");
  emb_ln_w_ = index_of("bert.embeddings.LayerNorm.weight");
  emb_ln_b_ = index_of("bert.embeddings.LayerNorm.bias");
  if (s.pre_layer_norm) {
    final_ln_w_ = index_of("bert.encoder.FinalLayerNorm.weight");
    final_ln_b_ = index_of("bert.encoder.FinalLayerNorm.bias");
  }
  pool_w_ = index_of("bert.pooler.dense.weight");
  pool_b_ = index_of("bert.pooler.dense.bias");
  tr_w_ = index_of("cls.predictions.transform.dense.weight");
  tr_b_ = index_of("cls.predictions.transform.dense.bias");
  tr_ln_w_ = index_of("cls.predictions.transform.LayerNorm.weight");
  tr_ln_b_ = index_of("cls.predictions.transform.LayerNorm.bias");
  nsp_w_ = index_of("cls.seq_relationship.weight");
  nsp_b_ = index_of("cls.seq_relationship.bias");

  // The model module (embeddings, heads, accumulation, optimizer).
  ModelModuleConfig mc;
  mc.dtype = dtype_;
  mc.hidden_size = s.hidden_size;
  mc.layer_norm_eps = s.layer_norm_eps;
  mc.hidden_dropout = s.hidden_dropout_prob;
  mc.gelu = s.gelu;
  mc.embedding_stream = kStreamEmbeddingOutput;
  CompileOptions co;
  co.arch = detect_gpu_arch(ctx_->device()).value_or("sm_90");
  const GeneratedModelModule gen = emit_model_module(mc, co.arch, nvrtc_options(co));
  const CompiledModule cm = compile_cached(gen.source, "dskc_model.cu", co);
  module_ = std::make_unique<LoadedModule>(*ctx_, cm.image);
  module_->load(gen.kernel_names);  // before any activation memory (see TransformerLayer)
  gemm_ = std::make_unique<Gemm>(*ctx_, dtype_, false);

  for (int i = 0; i < s.num_hidden_layers; ++i) {
    LayerOptions lopt;
    lopt.layer_id = static_cast<uint32_t>(i);
    lopt.cuda_graphs = opt.cuda_graphs;
    if (opt.transformer_kernel)
      layers_.push_back(std::make_unique<TransformerLayer>(*ctx_, layer_cfg_, lopt));
    else
      layers_.push_back(std::make_unique<PlainTransformerLayer>(*ctx_, layer_cfg_, lopt));
  }

  const size_t H = static_cast<size_t>(s.hidden_size), V = static_cast<size_t>(s.vocab_size);
  const size_t rows = static_cast<size_t>(opt.micro_batch) * opt.max_seq_length, Bm = opt.micro_batch;
  const size_t fbytes = total_floats_ * 4;
  master_ = DeviceBuffer(*ctx_, fbytes);
  grads_ = DeviceBuffer(*ctx_, fbytes);
  exp_avg_ = DeviceBuffer(*ctx_, fbytes);
  exp_avg_sq_ = DeviceBuffer(*ctx_, fbytes);
  weights_ = DeviceBuffer(*ctx_, woff);
  for (int i = 0; i <= s.num_hidden_layers; ++i) acts_.emplace_back(*ctx_, rows * H * eb_);
  dgrad_a_ = DeviceBuffer(*ctx_, rows * H * eb_);
  dgrad_b_ = DeviceBuffer(*ctx_, rows * H * eb_);
  if (s.pre_layer_norm) final_out_ = DeviceBuffer(*ctx_, rows * H * eb_);
  emb_sum_ = DeviceBuffer(*ctx_, rows * H * 4);
  emb_dsum_ = DeviceBuffer(*ctx_, rows * H * 4);
  stats_ = DeviceBuffer(*ctx_, 4 * rows * 4);  // emb mean, emb rstd, final mean, final rstd
  mask_ = DeviceBuffer(*ctx_, align_up(rows * eb_, kAlignBytes));
  // cls, pooled, dpooled, dcls [Bm, H] (dtype), then nsp loss [Bm] and dl [Bm, 2] (fp32)
  nsp_bufs_ = DeviceBuffer(*ctx_, align_up(4 * Bm * H * eb_, kAlignBytes) + 3 * Bm * 4);
  // sum_squares' range tables (the pointers do not move): all of grads_; then, for pending layer
  // gradients, the non-layer ranges of grads_ and each layer's dtype gradient buffer (its alignment
  // gaps stay zero).
  {
    auto vp = [](CUdeviceptr x) { return reinterpret_cast<const void*>(x); };
    std::vector<mkp::SumSqRange> r{{vp(grads_.ptr()), total_floats_, 1, 0}};
    for (const auto& [off, n] : non_layer_ranges_) r.push_back({vp(grads_.ptr() + off * 4), n, 1, 0});
    for (const auto& l : layers_) r.push_back({vp(l->grads_base()), l->grads_bytes() / eb_, 0, 0});
    sumsq_pending_ranges_ = static_cast<int>(r.size()) - 1;
    sumsq_ranges_ = upload_table(*ctx_, r);
  }
  partial_slots_ = std::max<size_t>(2 * kPartials, static_cast<size_t>(sumsq_pending_ranges_) * kRangeParts);
  partials_ = DeviceBuffer(*ctx_, (partial_slots_ + 8) * sizeof(double));
  wgrad_.ensure(*ctx_, std::max(static_cast<size_t>(vocab_pad_), H) * H * eb_);
  for (DeviceBuffer* b : {&master_, &grads_, &exp_avg_, &exp_avg_sq_, &weights_})
    DSKC_CU(cuMemsetD8Async(b->ptr(), 0, b->bytes(), ctx_->stream()));
  sync_compute_params();
  ctx_->synchronize();

  if (opt.process_group) {
    pg_ = opt.process_group;
    pg_->init_nccl(*ctx_);
    // Buckets over the flat fp32 gradients: one GradParam per tensor with its aligned length, so
    // a bucket's parameters (consecutive indices) span one contiguous range of grads_.
    std::vector<GradParam> gp;
    for (size_t i = 0; i < specs_.size(); ++i)
      gp.push_back({specs_[i].name, align_up(static_cast<size_t>(specs_[i].numel()), kAlignFloats), 4});
    bucket_plan_ = std::make_unique<BucketPlan>(make_bucket_plan(gp, opt.bucket_cap_bytes, opt.delay_allreduce));
    for (const GradBucket& b : bucket_plan_->buckets) {
      const auto [lo, hi] = std::minmax_element(b.params.begin(), b.params.end());
      DSKC_ASSERT(static_cast<size_t>(*hi - *lo + 1) == b.params.size(), "bucket of consecutive parameters");
      bucket_first_.push_back(*lo);
    }
    tracker_ = std::make_unique<BucketTracker>(*bucket_plan_, std::move(gp));
    reduce_in_dtype_ = dtype_ != DType::F32 && !opt.fp32_allreduce;
    if (reduce_in_dtype_) reduce_stage_ = DeviceBuffer(*ctx_, total_floats_ * eb_);
    if (reduce_in_dtype_ && opt.allreduce_in_place && opt.word_split) {  // word_split_'s buffers
      DSKC_CU(cuMemAllocHost(reinterpret_cast<void**>(&union_host_), 3 * V * sizeof(int32_t)));
      word_rows_idx_ = DeviceBuffer(*ctx_, 2 * V * sizeof(int32_t));
      word_rows_ = DeviceBuffer(*ctx_, V * H * eb_);
    }
    if (reduce_in_dtype_ && opt.allreduce_in_place) {
      dp_path_ = "layer gradients summed in place over NCCL";
      if (opt.peer_copy) {  // the same decision on every rank (same config and environment)
        size_t off = 0;
        for (const auto& l : layers_) {
          peer_offset_.push_back(off);
          off += align_up(l->grads_bytes(), kAlignBytes);
        }
        std::string why;
        peer_ = PeerSum::create(*pg_, *ctx_, off, why);
        dp_path_ = peer_ ? "layer gradients exchanged in place by " + peer_->description()
                         : dp_path_ + " (not copy engines: " + why + ")";
      }
    }
  }

  optimizer_overlap_ =
      opt.optimizer_overlap < 0
          ? env_choice("DSKC_OPTIMIZER_OVERLAP", 0, {{"sync", 0}, {"async", 1}, {"overlap", 2}, {"overlap_low", 3}},
                       "sync (the default: the host waits for the update), async (the update queued on the main "
                       "stream, the host not waiting for it), overlap (the one-launch Adam on a high-priority stream "
                       "of its own, layer by layer under the next forward) or overlap_low (the same at normal "
                       "priority)")
          : opt.optimizer_overlap;
  DSKC_ASSERT(optimizer_overlap_ >= 0 && optimizer_overlap_ <= 3, "BackendOptions::optimizer_overlap is -1 or 0-3");
  if (pg_) optimizer_overlap_ = 0;  // data parallel as before: the other forms have no two-GPU test yet
  if (optimizer_overlap_ >= 2) {
    int least = 0, greatest = 0;
    DSKC_CU(cuCtxGetStreamPriorityRange(&least, &greatest));
    DSKC_CU(cuStreamCreateWithPriority(&opt_stream_, CU_STREAM_NON_BLOCKING,
                                       optimizer_overlap_ == 2 ? greatest : least));
    DSKC_CU(cuEventCreate(&opt_ready_, CU_EVENT_DISABLE_TIMING));
    opt_done_.assign(layers_.size() + 1, nullptr);
    for (CUevent& e : opt_done_) DSKC_CU(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    if (opt.test_hold_optimizer) {
      hold_word_ = DeviceBuffer(*ctx_, 256);
      DSKC_CU(cuMemsetD8Async(hold_word_.ptr(), 0, hold_word_.bytes(), ctx_->stream()));
      DSKC_CU(cuStreamCreate(&release_stream_, CU_STREAM_NON_BLOCKING));
      ctx_->synchronize();
    }
  }
}

void CudaBackend::release_held_optimizer() {
  DSKC_ASSERT(release_stream_ != nullptr, "release_held_optimizer without BackendOptions::test_hold_optimizer");
  ctx_->make_current();
  DSKC_CU(cuMemsetD32Async(hold_word_.ptr(), hold_seq_, 1, release_stream_));
  DSKC_CU(cuStreamSynchronize(release_stream_));
}

void CudaBackend::join_optimizer() const {
  if (!opt_in_flight_) return;
  DSKC_CU(cuStreamWaitEvent(ctx_->stream(), opt_done_.back(), 0));  // the groups run in order
  opt_in_flight_ = false;
}

void CudaBackend::wait_optimizer_group(int g) const {
  if (opt_in_flight_) DSKC_CU(cuStreamWaitEvent(ctx_->stream(), opt_done_[static_cast<size_t>(g)], 0));
}

void CudaBackend::grad_ready(int idx) {
  if (!syncing_) return;
  // Gradients summed on their own: the layers' in place (reduce_layer_in_place), the word
  // table's in two parts (word_split_); the buckets carry the runs of the others.
  const auto own = [&](int i) {
    return (layers_in_place_ && specs_[static_cast<size_t>(i)].layer >= 0) || (word_split_ && i == word_);
  };
  for (int b : tracker_->mark_ready(idx)) {
    const int lo = bucket_first_[static_cast<size_t>(b)];
    const int hi = lo + static_cast<int>(bucket_plan_->buckets[static_cast<size_t>(b)].params.size());
    for (int i = lo; i < hi;) {
      if (own(i)) {
        ++i;
        continue;
      }
      int j = i + 1;
      while (j < hi && !own(j)) ++j;
      reduce_range(i, j);
      i = j;
    }
  }
}

void CudaBackend::reduce_range(int lo, int hi) {
  const size_t end = static_cast<size_t>(hi) < specs_.size() ? offset_[static_cast<size_t>(hi)] : total_floats_;
  const size_t n = end - offset_[static_cast<size_t>(lo)];
  pg_->wait_for_compute();
  if (!reduce_in_dtype_) {
    pg_->all_reduce(grad(lo), n, ncclFloat32);
    return;
  }
  // On the group's stream: dtype copy (exact: the accumulators hold dtype-rounded values),
  // all-reduce, then back into the fp32 accumulators (exact).
  const CUdeviceptr stage = reduce_stage_.ptr() + offset_[lo] * eb_;
  mkp::Cast to{reinterpret_cast<const float*>(grad(lo)), reinterpret_cast<void*>(stage), n};
  launch_on(pg_->stream(), "model_cast_params", stride_grid(n), &to);
  pg_->all_reduce(stage, n, nccl_dtype());
  mkp::Accumulate back{reinterpret_cast<const void*>(stage), reinterpret_cast<float*>(grad(lo)), n};
  launch_on(pg_->stream(), "model_widen", stride_grid(n), &back);
}

void CudaBackend::reduce_layer_in_place(int l) {
  const GpuLayer& layer = *layers_[static_cast<size_t>(l)];
  pg_->wait_for_compute();
  if (peer_) {
    // Ours to the other rank, theirs from it, then accumulators = T(ours + theirs) (assign:
    // layers_in_place_ means the accumulators are still zero).
    const CUstream s = pg_->stream();
    const size_t off = peer_offset_[static_cast<size_t>(l)];
    peer_->send(s, layer.grads_base(), off, layer.grads_bytes(), l);
    const CUdeviceptr theirs = peer_->wait(s, off, l);
    for (int k = 0; k < kLayerParams; ++k) {
      const int idx = layer_idx_[static_cast<size_t>(l)][static_cast<size_t>(k)];
      const CUdeviceptr ours = layer.grad(layer_param_names_[static_cast<size_t>(k)]);
      mkp::AddPair p{reinterpret_cast<const void*>(ours), reinterpret_cast<const void*>(theirs + (ours - layer.grads_base())),
                     reinterpret_cast<float*>(grad(idx)), numel(idx)};
      launch_on(s, "model_add_pair", stride_grid(p.n), &p);
    }
    return;
  }
  pg_->all_reduce(layer.grads_base(), layer.grads_bytes() / eb_, nccl_dtype());
  accumulate_layer(l, pg_->stream(), false);
}

CudaBackend::~CudaBackend() {
  // NCCL first: with a failed collective pending, the abort is what lets the streams drain.
  if (pg_) {
    if (std::uncaught_exceptions() > 0) pg_->mark_failed();
    // A peer that died or hangs may leave our stream waiting on its flags: release them.
    if (peer_) peer_->release_waits();
    pg_->release_nccl();
  }
  try {
    if (ctx_) {
      if (release_stream_) release_held_optimizer();  // a held update would never end
      join_optimizer();
      ctx_->synchronize();
    }
  } catch (...) {
  }
  if (opt_stream_) driver().cuStreamDestroy(opt_stream_);
  if (release_stream_) driver().cuStreamDestroy(release_stream_);
  if (opt_ready_) driver().cuEventDestroy(opt_ready_);
  for (CUevent e : opt_done_) driver().cuEventDestroy(e);
  if (union_host_) driver().cuMemFreeHost(union_host_);
  if (staging_) driver().cuMemFreeHost(staging_);
  if (staging_done_) driver().cuEventDestroy(staging_done_);
  release_phase_timer();  // its events belong to the Context
  // Members that allocate through the Context go before it.
  peer_.reset();
  layers_.clear();
  gemm_.reset();
  module_.reset();
}

int CudaBackend::index_of(const std::string& name) const {
  for (size_t i = 0; i < specs_.size(); ++i)
    if (specs_[i].name == name) return static_cast<int>(i);
  DSKC_ASSERT(false, "unknown parameter " + name);
  return -1;
}

CUdeviceptr CudaBackend::weight(int idx) const {
  const size_t off = woffset_[static_cast<size_t>(idx)];
  DSKC_ASSERT(off != std::numeric_limits<size_t>::max(), "no head weight copy of " + specs_[idx].name);
  return weights_.ptr() + off;
}

std::string CudaBackend::name() const {
  return fmt::format("cuda ({}, {}, {})",
                     opt_.transformer_kernel ? "DeepSpeed transformer kernel layer (JIT)"
                                             : "plain unfused BertLayer (one kernel per op)",
                     dtype_name(dtype_), ctx_->device_name());
}

void CudaBackend::launch(const char* kernel, unsigned grid, const void* params) const {
  launch_on(ctx_->stream(), kernel, grid, params);
}

void CudaBackend::launch_on(CUstream stream, const char* kernel, unsigned grid, const void* params) const {
  if (grid == 0) return;
  CUfunction f = module_->function(kernel);
  void* args[] = {const_cast<void*>(params)};
  DSKC_CU(cuLaunchKernel(f, grid, 1, 1, kModelBlock, 1, 1, 0, stream, args, nullptr));
}

CUdeviceptr CudaBackend::compute_copy(int idx) const {
  const ModelParamSpec& sp = specs_[static_cast<size_t>(idx)];
  return sp.layer >= 0 ? layers_[static_cast<size_t>(sp.layer)]->param(sp.layer_param) : weight(idx);
}

void CudaBackend::sync_compute_params() {
  ctx_->make_current();
  for (size_t i = 0; i < specs_.size(); ++i) {
    const int idx = static_cast<int>(i);
    mkp::Cast p{reinterpret_cast<const float*>(master(idx)), reinterpret_cast<void*>(compute_copy(idx)),
                static_cast<uint64_t>(specs_[i].numel())};
    launch("model_cast_params", stride_grid(p.n), &p);
  }
}

ParamMap CudaBackend::download_all(const DeviceBuffer& buf, const std::string& prefix) const {
  join_optimizer();
  const std::vector<float> all = download(*ctx_, buf.ptr(), total_floats_, DType::F32);
  ParamMap out;
  for (size_t i = 0; i < specs_.size(); ++i) {
    const auto* b = all.data() + offset_[i];
    out[prefix + specs_[i].name] = std::vector<float>(b, b + specs_[i].numel());
  }
  return out;
}

void CudaBackend::upload_all(DeviceBuffer& buf, const ParamMap& host, const std::string& prefix) {
  join_optimizer();
  std::vector<float> all(total_floats_, 0.0f);
  for (size_t i = 0; i < specs_.size(); ++i) {
    const std::vector<float>& v = host.at(prefix + specs_[i].name);
    std::copy(v.begin(), v.end(), all.begin() + static_cast<std::ptrdiff_t>(offset_[i]));
  }
  upload(*ctx_, buf.ptr(), all, DType::F32);
}

void CudaBackend::import_params(const ParamMap& params, const std::string& source) {
  check_param_map(params, specs_, source);
  ctx_->make_current();
  upload_all(master_, params, "");
  sync_compute_params();
  ctx_->synchronize();
}

ParamMap CudaBackend::export_params() const { return download_all(master_); }

void CudaBackend::import_optimizer_state(const ParamMap& state, const std::string& source) {
  std::vector<ModelParamSpec> both;
  for (const ModelParamSpec& s : specs_) {
    both.push_back({exp_avg_name(s.name), s.shape, -1, ""});
    both.push_back({exp_avg_sq_name(s.name), s.shape, -1, ""});
  }
  check_param_map(state, both, source);
  ctx_->make_current();
  upload_all(exp_avg_, state, "exp_avg.");
  upload_all(exp_avg_sq_, state, "exp_avg_sq.");
}

ParamMap CudaBackend::export_optimizer_state() const {
  ParamMap out = download_all(exp_avg_, "exp_avg.");
  ParamMap sq = download_all(exp_avg_sq_, "exp_avg_sq.");
  out.merge(sq);
  return out;
}

void CudaBackend::zero_grads() {
  grads_zero_ = true;
  layers_pending_ = false;  // dropped, not widened
  sumsq_.reset();
  if (pg_) {  // data parallel: cleared now (the deferred form's paths through the all-reduces are
              // not on a two-GPU test yet)
    ctx_->make_current();
    DSKC_CU(cuMemsetD8Async(grads_.ptr(), 0, grads_.bytes(), ctx_->stream()));
    return;
  }
  zero_pending_ = true;  // forward_backward_prepared or settle_zero clears
}

void CudaBackend::settle_zero() const {
  join_optimizer();  // every caller reads or writes what an update in flight may still use
  if (!zero_pending_) return;
  ctx_->make_current();
  DSKC_CU(cuMemsetD8Async(grads_.ptr(), 0, grads_.bytes(), ctx_->stream()));
  zero_pending_ = false;
}

void CudaBackend::widen_pending_layers() const {
  if (!layers_pending_) return;
  join_optimizer();
  ctx_->make_current();
  for (size_t l = 0; l < layers_.size(); ++l) accumulate_layer(static_cast<int>(l), nullptr, true);
  layers_pending_ = false;
}

void CudaBackend::settle_grads() const {
  settle_zero();
  widen_pending_layers();
}

ParamMap CudaBackend::export_grads() const {
  settle_grads();
  return download_all(grads_);
}

void CudaBackend::inject_grad_overflow() {
  ctx_->make_current();
  settle_grads();
  const float inf = std::numeric_limits<float>::infinity();
  sumsq_.reset();
  DSKC_CU(cuMemcpyHtoDAsync(grad(0), &inf, sizeof(inf), ctx_->stream()));
  ctx_->synchronize();
}

double CudaBackend::sum_squares() {
  ctx_->make_current();
  settle_zero();
  const bool pending = layers_pending_;
  const int ranges = pending ? sumsq_pending_ranges_ : 1, parts = pending ? kRangeParts : kPartials;
  double* part = reinterpret_cast<double*>(partials_.ptr());
  mkp::SumSq p{reinterpret_cast<const mkp::SumSqRange*>(sumsq_ranges_.ptr()) + (pending ? 1 : 0), part, parts};
  launch("model_sumsq_partial", static_cast<unsigned>(ranges * parts), &p);
  mkp::ReducePartials r{part, part + partial_slots_, ranges * parts, 1};
  launch("model_reduce_partials", 1, &r);
  double out = 0;
  DSKC_CU(cuMemcpyDtoHAsync(&out, reinterpret_cast<CUdeviceptr>(part + partial_slots_), sizeof(out), ctx_->stream()));
  ctx_->synchronize();
  return out;
}

// Σ g² in double is finite iff every element is: |g| <= FLT_MAX gives g² <= 1.2e77, and the
// sum of fewer than 2^60 such terms stays below DBL_MAX.
// The trainer asks for both in one step: one pass over the gradients serves the two.
bool CudaBackend::grads_finite() {
  if (!sumsq_) sumsq_ = sum_squares();
  return std::isfinite(*sumsq_);
}

double CudaBackend::grad_norm(double grad_scale) {
  if (!sumsq_) sumsq_ = sum_squares();
  return std::sqrt(*sumsq_) / grad_scale;
}

void CudaBackend::optimizer_step(const OptimizerSettings& s, const UpdateArgs& a) {
  ctx_->make_current();
  settle_zero();
  if (multi_tensor_optimizer_)  // pending layers read there
    return s.type == OptimizerType::Lamb ? lamb_multi(s, a) : adam_multi(s, a);
  widen_pending_layers();
  const double gmul = a.clip_coef / a.grad_scale;
  const auto [bc1, bc2] = bias_corrections(s, a.step);
  for (size_t i = 0; i < specs_.size(); ++i) {
    const int idx = static_cast<int>(i);
    const double wd = specs_[i].weight_decay() ? s.weight_decay : 0.0;
    const uint64_t n = numel(idx);
    float* p = reinterpret_cast<float*>(master(idx));
    const float* g = reinterpret_cast<const float*>(grad(idx));
    float* m = reinterpret_cast<float*>(exp_avg_.ptr() + offset_[i] * 4);
    float* v = reinterpret_cast<float*>(exp_avg_sq_.ptr() + offset_[i] * 4);
    if (s.type == OptimizerType::Lamb) {
      const int parts = static_cast<int>(lamb_parts(n));
      const double step_size = lamb_step_size(s, a);
      mkp::Lamb l{p, g, m, v, reinterpret_cast<double*>(partials_.ptr()), gmul, s.beta1, s.beta2, s.eps, wd,
                  step_size, s.max_coeff, s.min_coeff, n, parts};
      launch("model_lamb_stage1", static_cast<unsigned>(parts), &l);
      launch("model_lamb_stage2", stride_grid(n), &l);
    } else {
      const bool adamw = s.type == OptimizerType::AdamW || s.adam_w_mode;
      mkp::Adam ad{p, g, m, v, gmul, s.beta1, s.beta2, bc1, std::sqrt(bc2), s.eps, a.lr, wd, n};
      launch(adamw ? "model_adamw_step" : "model_adam_step", stride_grid(n), &ad);
    }
  }
  sync_compute_params();
  ctx_->synchronize();
}

// The one-launch optimizers' table of every parameter tensor: its place in the flat fp32 buffers,
// compute copy, layer gradient (encoder tensors) and decay, and its first block: in 2048-element
// chunks (`lamb_blocks` false: Adam, Lamb's stage 2), or, for Lamb's stage 1, the per-tensor stage
// 1's grid (lamb_parts(n) blocks per tensor).
std::vector<mkp::AdamSegment> CudaBackend::optimizer_segments(bool lamb_blocks) const {
  std::vector<mkp::AdamSegment> segs;
  uint64_t first = 0;
  for (size_t i = 0; i < specs_.size(); ++i) {
    const ModelParamSpec& sp = specs_[i];
    const uint64_t n = static_cast<uint64_t>(sp.numel());
    const void* gsrc = sp.layer >= 0 ? reinterpret_cast<const void*>(
                                            layers_[static_cast<size_t>(sp.layer)]->grad(sp.layer_param))
                                      : nullptr;
    const uint64_t blocks = lamb_blocks ? lamb_parts(n) : (n + kOptChunk - 1) / kOptChunk;
    segs.push_back({offset_[i], n, first, reinterpret_cast<void*>(compute_copy(static_cast<int>(i))), gsrc,
                    sp.weight_decay() ? 1 : 0, lamb_blocks ? static_cast<int32_t>(blocks) : 0});
    first += blocks;
  }
  DSKC_ASSERT(first <= 0x7fffffffu, "optimizer_segments: grid too large");
  return segs;
}

void CudaBackend::ensure_adam_segments() {
  if (adam_segments_.bytes() != 0) return;  // the compute copies do not move: one table for the run
  const std::vector<mkp::AdamSegment> segs = optimizer_segments(false);
  adam_segments_ = upload_table(*ctx_, segs);
  const auto chunks_of = [](uint64_t n) { return (n + kOptChunk - 1) / kOptChunk; };
  // The overlapped form's groups: the same segments, group after group, each group's chunks
  // counted from 0 (its own launch), so every element gets the same block-relative place.
  std::vector<mkp::AdamSegment> grouped;
  for (size_t g = 0; g < opt_done_.size(); ++g) {
    AdamGroup grp{grouped.size(), 0, 0};
    for (size_t i = 0; i < specs_.size(); ++i) {
      if (static_cast<size_t>(specs_[i].layer + 1) != g) continue;  // layer -1: the embeddings and heads
      mkp::AdamSegment sg = segs[i];
      sg.first_chunk = grp.chunks;
      grp.chunks += static_cast<unsigned>(chunks_of(sg.n));
      grp.n_segs += 1;
      grouped.push_back(sg);
    }
    adam_groups_.push_back(grp);
  }
  if (!grouped.empty()) {
    DSKC_ASSERT(grouped.size() == segs.size(), "adam_multi: every tensor in one group");
    adam_group_segments_ = upload_table(*ctx_, grouped);
  }
  adam_chunks_ = static_cast<unsigned>(segs.back().first_chunk + chunks_of(segs.back().n));
  adam_n_segs_ = static_cast<int>(segs.size());
}

void CudaBackend::lamb_multi(const OptimizerSettings& s, const UpdateArgs& a) {
  ensure_adam_segments();  // stage 2's table
  if (lamb_segments_.bytes() == 0) {
    const std::vector<mkp::AdamSegment> segs = optimizer_segments(true);
    lamb_blocks_ = static_cast<unsigned>(segs.back().first_chunk + static_cast<uint64_t>(segs.back().parts));
    lamb_segments_ = upload_table(*ctx_, segs);
    lamb_part_ = DeviceBuffer(*ctx_, (2 * static_cast<size_t>(lamb_blocks_) + segs.size()) * sizeof(double));
  }
  double* part = reinterpret_cast<double*>(lamb_part_.ptr());
  mkp::LambMulti p{reinterpret_cast<float*>(master_.ptr()),
                   reinterpret_cast<const float*>(grads_.ptr()),
                   reinterpret_cast<float*>(exp_avg_.ptr()),
                   reinterpret_cast<float*>(exp_avg_sq_.ptr()),
                   reinterpret_cast<const mkp::AdamSegment*>(lamb_segments_.ptr()),
                   reinterpret_cast<const mkp::AdamSegment*>(adam_segments_.ptr()),
                   part,
                   part + 2 * static_cast<size_t>(lamb_blocks_),
                   a.clip_coef / a.grad_scale,
                   s.beta1,
                   s.beta2,
                   s.eps,
                   s.weight_decay,
                   lamb_step_size(s, a),
                   s.max_coeff,
                   s.min_coeff,
                   kOptChunk,
                   adam_n_segs_,
                   layers_pending_ ? 1 : 0};
  launch("model_lamb_multi_stage1", lamb_blocks_, &p);
  launch("model_lamb_multi_trust", static_cast<unsigned>(adam_n_segs_), &p);
  launch("model_lamb_multi_stage2", adam_chunks_, &p);
  if (optimizer_overlap_ == 0) ctx_->synchronize();
}

void CudaBackend::adam_multi(const OptimizerSettings& s, const UpdateArgs& a) {
  ensure_adam_segments();
  const auto [bc1, bc2] = bias_corrections(s, a.step);
  mkp::AdamMulti p{reinterpret_cast<float*>(master_.ptr()),
                   reinterpret_cast<const float*>(grads_.ptr()),
                   reinterpret_cast<float*>(exp_avg_.ptr()),
                   reinterpret_cast<float*>(exp_avg_sq_.ptr()),
                   reinterpret_cast<const mkp::AdamSegment*>(adam_segments_.ptr()),
                   a.clip_coef / a.grad_scale,
                   s.beta1,
                   s.beta2,
                   bc1,
                   std::sqrt(bc2),
                   s.eps,
                   a.lr,
                   s.weight_decay,
                   kOptChunk,
                   adam_n_segs_,
                   layers_pending_ ? 1 : 0};
  const char* kernel = s.type == OptimizerType::AdamW || s.adam_w_mode ? "model_adamw_multi" : "model_adam_multi";
  if (optimizer_overlap_ >= 2) {  // group by group on opt_stream_, after everything queued so far
    DSKC_CU(cuEventRecord(opt_ready_, ctx_->stream()));
    DSKC_CU(cuStreamWaitEvent(opt_stream_, opt_ready_, 0));
    if (release_stream_)  // test hook: held until release_held_optimizer()
      DSKC_CU(cuStreamWaitValue32(opt_stream_, hold_word_.ptr(), ++hold_seq_, CU_STREAM_WAIT_VALUE_GEQ));
    const auto* table = reinterpret_cast<const mkp::AdamSegment*>(adam_group_segments_.ptr());
    for (size_t g = 0; g < adam_groups_.size(); ++g) {
      p.segs = table + adam_groups_[g].first_seg;
      p.n_segs = adam_groups_[g].n_segs;
      launch_on(opt_stream_, kernel, adam_groups_[g].chunks, &p);
      DSKC_CU(cuEventRecord(opt_done_[g], opt_stream_));
    }
    opt_in_flight_ = true;  // the next forward waits for each group where it needs it
    return;
  }
  launch(kernel, adam_chunks_, &p);
  if (optimizer_overlap_ == 0) ctx_->synchronize();
}

namespace {
// PhaseTimer over CUDA events recorded on one stream (a pool reused by every sequence).
class EventPhaseTimer : public PhaseTimer {
 public:
  explicit EventPhaseTimer(Context& ctx) : ctx_(ctx) {}
  ~EventPhaseTimer() override {
    for (CUevent e : events_) driver().cuEventDestroy(e);
  }
  void mark(const char* phase) override {
    if (used_ == events_.size()) {
      CUevent e = nullptr;
      DSKC_CU(cuEventCreate(&e, CU_EVENT_DEFAULT));
      events_.push_back(e);
    }
    DSKC_CU(cuEventRecord(events_[used_], ctx_.stream()));
    marks_.emplace_back(phase, Clock::now());
    ++used_;
  }
  std::vector<PhaseMark> take() override {
    std::vector<PhaseMark> out;
    if (used_ == 0) return out;
    DSKC_CU(cuEventSynchronize(events_[used_ - 1]));
    for (size_t i = 0; i < used_; ++i) {
      float ms = 0.f;
      DSKC_CU(cuEventElapsedTime(&ms, events_[0], events_[i]));
      out.push_back({marks_[i].first, static_cast<double>(ms),
                     std::chrono::duration<double, std::milli>(marks_[i].second - marks_[0].second).count()});
    }
    used_ = 0;
    marks_.clear();
    return out;
  }

 private:
  using Clock = std::chrono::steady_clock;
  Context& ctx_;
  std::vector<CUevent> events_;
  size_t used_ = 0;
  std::vector<std::pair<std::string, Clock::time_point>> marks_;
};
}  // namespace

std::unique_ptr<PhaseTimer> CudaBackend::make_phase_timer() {
  ctx_->make_current();
  return std::make_unique<EventPhaseTimer>(*ctx_);
}

size_t CudaBackend::layer_graph_launches() const {
  size_t n = 0;
  for (const auto& l : layers_)
    if (const auto* t = dynamic_cast<const TransformerLayer*>(l.get())) n += t->graph_launches();
  return n;
}

}  // namespace dskc
