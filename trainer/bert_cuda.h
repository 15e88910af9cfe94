// CudaBackend: BERT pre-training on one GPU (TrainBackend; contract in backend.h), computing
// what CpuBackend computes: same parameters, losses, Philox dropout masks and gradient
// definition, in the configured dtype.
//
// Layout: every parameter has an fp32 master copy, an fp32 gradient accumulator and two fp32
// moments, each one flat device buffer with the same per-tensor offsets (model_param_specs
// order, 256-byte aligned; gaps stay zero). Compute copies in the dtype: the encoder layers'
// own parameter buffers (a dskc::GpuLayer with layer_id = i: the fused TransformerLayer with
// transformer_kernel, else the unfused PlainTransformerLayer) and one buffer of head /
// embedding weights; both are refreshed from the masters (cast kernel) after import and after
// every optimizer step. A layer's backward overwrites its gradient buffers, so they are added
// into the fp32 accumulators right after it (accumulation over micro-batches) — except, on one
// GPU, in a step's first micro-batch (BackendOptions::defer_layer_grads): the accumulators would
// hold exactly 0 + g, so the gradients stay in the layers' buffers, where the gradient norm and
// the one-launch Adam / three-launch Lamb read them, until a second micro-batch or another reader
// widens them.
// The one-launch Adam may also run without the host waiting for it, or on a stream of its own under
// the next forward (BackendOptions::optimizer_overlap; the same update, not faster on an H100).
//
// Model-level kernels come from one NVRTC-compiled "model module" (compiler/model_codegen.h,
// templates/model/*.cuh), built at construction; GEMMs of the heads run in cuBLASLt
// (runtime/gemm.h) in the dtype with fp32 accumulation.
//
// Precision: fp16/bf16 activations and activation gradients, fp32 LayerNorm statistics and
// embedding sums, fp32 accumulators rounded to the dtype after every add (as CpuBackend does,
// so a loss-scaled fp16 overflow leaves inf), fp32 masters and moments, Adam in fp32 math (each
// operation explicitly rounded), Lamb in fp32 math the same way with its norms summed in double. Determinism: no atomics anywhere; every reduction has a fixed order, and the embedding
// table gradients are grouped by token id on the host (CSR) so repeated ids add in a fixed
// order: forward_backward is bitwise reproducible run to run (stochastic_mode aside, which lets
// the layers autotune their GEMMs).
//
// Data parallel (BackendOptions::process_group): gradients are all-reduced over NCCL (in the
// fp16/bf16 dtype through a staging copy, or fp32 with fp32_allreduce) on
// the group's stream while backward goes on: after the last micro-batch's backward of a layer
// (or head) has added its gradients into grads_, the buckets it completes are enqueued in plan
// order (grad_buckets.h); forward_backward returns once all have finished (bounded wait).
// A step of one fp16/bf16 micro-batch sums each layer's own dtype gradient buffer right after
// its backward instead: in place over NCCL, or, for two ranks whose GPUs are peers on one host,
// over copy engines (peer_sum.h: no SMs taken from backward), bit-identical either way.
// Summed gradients are the same on every rank, so every rank takes the same overflow and
// clipping decisions and applies the same update.
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/context.h"
#include "runtime/gemm.h"
#include "runtime/gpu_layer.h"
#include "runtime/nccl_api.h"
#include "runtime/transformer_layer.h"
#include "trainer/backend.h"
#include "trainer/grad_buckets.h"

namespace dskc {

class PeerSum;
namespace mkp {
struct AdamSegment;
struct LnParamGrad;
}

class CudaBackend : public TrainBackend {
 public:
  // Error(Device) "no CUDA device: ..." without a GPU (from Context); Error(Config) for a bad
  // shape; Error(Compile) if the model module does not build.
  explicit CudaBackend(const BackendOptions& opt);
  ~CudaBackend() override;

  std::string name() const override;
  void import_params(const ParamMap& params, const std::string& source) override;
  ParamMap export_params() const override;
  void import_optimizer_state(const ParamMap& state, const std::string& source) override;
  ParamMap export_optimizer_state() const override;
  void zero_grads() override;
  StepLoss forward_backward(const Batch& batch, const MicroStep& m) override;
  // The index tables (embedding-gradient groups by a stable sort of the token ids, prediction and
  // [CLS] rows) and the attention mask in the dtype: host work the trainer's read-ahead thread does
  // while the GPU computes the micro-batch before.
  std::unique_ptr<PreparedBatch> prepare(const Batch& batch) const override;
  StepLoss forward_backward_prepared(const Batch& batch, const MicroStep& m, const PreparedBatch* prepared) override;
  bool grads_finite() override;
  double grad_norm(double grad_scale) override;
  void optimizer_step(const OptimizerSettings& s, const UpdateArgs& a) override;
  ParamMap export_grads() const override;
  void inject_grad_overflow() override;
  std::string data_parallel_path() const override { return dp_path_; }

  Context& context() { return *ctx_; }
  // BackendOptions::cuda_graphs: the encoder layers' forward and backward calls launched as CUDA
  // graphs so far (all layers together).
  size_t layer_graph_launches() const;
  // BackendOptions::test_hold_optimizer: lets the held updates run. Callable from another thread
  // started after the optimizer_step it releases returned (it reads that step's hold count).
  void release_held_optimizer();

 protected:
  // Events on the main stream (the device time of a mark: when the GPU's queue reached it).
  std::unique_ptr<PhaseTimer> make_phase_timer() override;

 private:
  static constexpr int kLayerParams = 12;

  // A device buffer that grows on demand (synchronizing before it frees the old one).
  struct Growable {
    DeviceBuffer buf;
    CUdeviceptr ensure(Context& ctx, size_t bytes);
  };

  void launch(const char* kernel, unsigned grid, const void* params) const;
  void launch_on(CUstream stream, const char* kernel, unsigned grid, const void* params) const;
  void sync_compute_params();  // masters -> layer and head weights (dtype)
  // LayerNorm gamma/beta gradients += (p without part / chunk_rows): partial sums per 64-row chunk
  // by `part_kernel` over every block of the grid, then their ordered sum (ln_part_ the workspace).
  void ln_param_grad(const char* part_kernel, const mkp::LnParamGrad& args);
  // Adam / AdamW over every parameter in one launch that also writes the compute copies.
  void adam_multi(const OptimizerSettings& s, const UpdateArgs& a);
  // Lamb over every tensor in three launches (bitwise the per-tensor kernels; layers' pending
  // gradients read in place, compute copies written by the update).
  void lamb_multi(const OptimizerSettings& s, const UpdateArgs& a);
  std::vector<mkp::AdamSegment> optimizer_segments(bool lamb_blocks) const;
  void ensure_adam_segments();  // adam_segments_ and the overlapped form's groups, once
  int index_of(const std::string& name) const;
  CUdeviceptr master(int idx) const { return master_.ptr() + offset_[idx] * 4; }
  CUdeviceptr grad(int idx) const { return grads_.ptr() + offset_[idx] * 4; }
  CUdeviceptr weight(int idx) const;  // dtype copy of a non-encoder parameter
  CUdeviceptr compute_copy(int idx) const;  // dtype copy of any parameter (a layer's or weight(idx))
  size_t numel(int idx) const { return static_cast<size_t>(specs_[idx].numel()); }
  ncclDataType_t nccl_dtype() const { return dtype_ == DType::BF16 ? ncclBfloat16 : ncclFloat16; }
  ParamMap download_all(const DeviceBuffer& buf, const std::string& prefix_avg = "") const;
  void upload_all(DeviceBuffer& buf, const ParamMap& host, const std::string& prefix);
  // Deterministic Σ g² in double of the step's gradients: the fp32 accumulators, or, while
  // layers_pending_, their non-layer ranges and the layers' dtype gradient buffers.
  double sum_squares();
  // Before anything reads the accumulators outside forward_backward: the memset zero_grads deferred.
  void settle_zero() const;
  // Before anything but the norm and adam_multi reads the accumulators: settle_zero, then the
  // pending layer gradients widened into them (0 + g, as model_accumulate_first).
  void settle_grads() const;
  void widen_pending_layers() const;  // the second half of settle_grads
  // forward_backward pieces (bert_cuda_step.cpp)
  void accumulate(CUdeviceptr src_dtype, int idx);
  // dst_f32 += src (onto_zero: dst_f32 = 0 + src, for an accumulator region zero_grads left unzeroed).
  void accumulate_n(CUdeviceptr src_dtype, CUdeviceptr dst_f32, size_t n, CUstream stream = nullptr,
                    bool onto_zero = false) const;
  // Layer l's dtype gradients into the accumulators on `stream` (nullptr: the main one), as accumulate_n.
  void accumulate_layer(int l, CUstream stream, bool onto_zero) const;
  void colsum(CUdeviceptr src, int rows, int cols, int ld, int idx);
  void gemm(const GemmShape& s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr bias = 0);
  // Data parallel: parameter idx has its final gradient of this step in grads_; all-reduces the
  // buckets that became complete (no-op unless this call syncs).
  void grad_ready(int idx);
  // On the group's stream: all-reduce params [lo, hi) of grads_ (one contiguous range) in fp32,
  // or through reduce_stage_ in the dtype.
  void reduce_range(int lo, int hi);
  // On the group's stream: layer l's dtype gradients all-reduced in place, then added to grads_.
  void reduce_layer_in_place(int l);
  // The embedding backward's word-table rows with word_split_: this rank's row sums for the
  // union of the ranks' ids, all-reduced, added into grads_ (the groups of this batch's ids).
  void reduce_word_rows(CUdeviceptr group_start, CUdeviceptr group_member, const std::vector<int32_t>& targets);

  BackendOptions opt_;
  DType dtype_;
  size_t eb_ = 4;  // bytes per dtype element
  LayerConfig layer_cfg_;
  std::vector<ModelParamSpec> specs_;
  std::vector<size_t> offset_;        // in floats, into master_/grads_/exp_avg_/exp_avg_sq_
  std::vector<size_t> woffset_;       // in bytes into weights_ (non-encoder params), SIZE_MAX else
  size_t total_floats_ = 0;
  std::vector<std::array<int, kLayerParams>> layer_idx_;
  std::vector<std::string> layer_param_names_;
  int word_ = -1, pos_ = -1, type_ = -1, emb_ln_w_ = -1, emb_ln_b_ = -1, final_ln_w_ = -1, final_ln_b_ = -1,
      pool_w_ = -1, pool_b_ = -1, tr_w_ = -1, tr_b_ = -1, tr_ln_w_ = -1, tr_ln_b_ = -1, dec_b_ = -1, nsp_w_ = -1,
      nsp_b_ = -1;

  std::unique_ptr<Context> ctx_;
  std::unique_ptr<LoadedModule> module_;
  std::unique_ptr<Gemm> gemm_;
  std::vector<std::unique_ptr<GpuLayer>> layers_;
  DeviceBuffer master_, grads_, exp_avg_, exp_avg_sq_, weights_;
  // Activations at max batch × max seq: acts_[i] is layer i's input (acts_[N] the encoder output).
  std::vector<DeviceBuffer> acts_;
  size_t partial_slots_ = 0;  // doubles of partials_ before its result slots
  DeviceBuffer dgrad_a_, dgrad_b_, final_out_, emb_sum_, emb_dsum_, stats_, mask_, nsp_bufs_, partials_;
  Growable ints_, mlm_, wgrad_, ln_part_, grouped_part_;
  // Page-locked staging of each call's tables and mask (asynchronous uploads); reused once the
  // event after the previous call's copies has passed.
  uint8_t* staging_ = nullptr;
  size_t staging_bytes_ = 0;
  CUevent staging_done_ = nullptr;
  // Σ g² of the accumulated gradients, kept from grads_finite() for grad_norm() until they change.
  std::optional<double> sumsq_;
  // BackendOptions::multi_tensor_optimizer resolved; adam_multi's segment table (built at its first
  // step) and grid.
  bool multi_tensor_optimizer_ = true;
  DeviceBuffer adam_segments_;
  unsigned adam_chunks_ = 0;
  int adam_n_segs_ = 0;
  // lamb_multi's stage-1 table (first_chunk = a tensor's first block, parts its blocks), its grid,
  // and its partials [2 · lamb_blocks_] followed by the trust ratios [tensors] (doubles).
  DeviceBuffer lamb_segments_, lamb_part_;
  unsigned lamb_blocks_ = 0;
  // BackendOptions::optimizer_overlap resolved (0 with a process group). For 2 / 3: the update's
  // stream, its groups (adam_group_segments_: group after group, each one's first_chunk counted
  // from its own first block; [0] the embedding and head tensors, [1 + l] layer l's), the event
  // after each group's launch and the one it starts from. opt_in_flight_: an update whose groups
  // the main stream has not waited for yet (the next forward waits group by group; any other
  // reader of the parameters, gradients or moments calls join_optimizer first).
  int optimizer_overlap_ = 0;
  CUstream opt_stream_ = nullptr;
  CUevent opt_ready_ = nullptr;
  std::vector<CUevent> opt_done_;
  struct AdamGroup {
    size_t first_seg;
    int n_segs;
    unsigned chunks;
  };
  std::vector<AdamGroup> adam_groups_;
  DeviceBuffer adam_group_segments_;
  mutable bool opt_in_flight_ = false;
  DeviceBuffer hold_word_;  // test_hold_optimizer: the update's stream waits for it to reach hold_seq_
  uint32_t hold_seq_ = 0;
  CUstream release_stream_ = nullptr;
  void join_optimizer() const;           // the main stream waits for all of an update in flight
  void wait_optimizer_group(int g) const;  // ... for group g only (forward_backward)
  // Vp: the vocabulary rounded up to 8 elements: the logits' row stride and the rows of the word
  // table's (and the decoder bias's) compute copy, padding zero.
  int vocab_pad_ = 0;
  // DSKC_HEAD_GEMMS: the MLM decoder's three GEMMs over Vp (padded, the default) or over the exact
  // vocabulary V (plain: a dimension that is not a multiple of 8 makes cuBLASLt pick sm_80 kernels
  // for 2-element alignment on an H100, 2-3x slower; session 64, bench/NOTES.md t5).
  bool pad_vocab_ = true;

  // Data parallel: buckets over grads_ (each bucket is a run of consecutive parameters, so one
  // contiguous range of the flat fp32 buffer, alignment gaps included).
  ProcessGroup* pg_ = nullptr;
  std::unique_ptr<BucketPlan> bucket_plan_;
  std::vector<int> bucket_first_;  // per bucket: its first (lowest) parameter index
  std::unique_ptr<BucketTracker> tracker_;
  bool syncing_ = false;
  bool reduce_in_dtype_ = false;  // fp16/bf16 all-reduce through reduce_stage_ (same offsets)
  DeviceBuffer reduce_stage_;
  bool grads_zero_ = true;        // no gradient accumulated since zero_grads()
  // One GPU: zero_grads() defers its memset (mutable: settle_zero() const). The next
  // forward_backward zeroes only zero_ranges_less_word_ (floats of grads_, alignment gaps included) and
  // assigns the layers' gradients (layers_onto_zero_): the encoder's 90% of the buffer is neither
  // cleared nor read back.
  mutable bool zero_pending_ = false;
  bool layers_onto_zero_ = false;
  // BackendOptions::defer_layer_grads resolved (one GPU only). layers_pending_: the last
  // forward_backward was the step's first and left the layers' gradients in their dtype buffers
  // (mutable: settle_grads() const widens them).
  bool defer_layer_grads_ = true;
  mutable bool layers_pending_ = false;
  // sum_squares' range tables, uploaded once: [0] all of grads_ (fp32), then for layers_pending_
  // the non-layer ranges (fp32) and each layer's gradient buffer (dtype).
  DeviceBuffer sumsq_ranges_;
  int sumsq_pending_ranges_ = 0;
  std::vector<std::pair<size_t, size_t>> non_layer_ranges_;  // [offset, count) in floats
  // non_layer_ranges_ less the word table's elements: what that memset clears, because the call's
  // MLM decoder assigns the word table's gradient instead of adding it onto a cleared accumulator
  // (at BERT-Large's vocabulary 125 MB less written and read back).
  std::vector<std::pair<size_t, size_t>> zero_ranges_less_word_;
  bool layers_in_place_ = false;  // this call: layer gradients via reduce_layer_in_place
  std::vector<int> deferred_layers_;  // --delay_allreduce: layers reduced after backward
  // Two ranks on one host: layer gradients exchanged by copy engines (peer_sum.h) instead of
  // NCCL; layer l's region of the receive buffer starts at peer_offset_[l].
  std::unique_ptr<PeerSum> peer_;
  std::vector<size_t> peer_offset_;
  std::string dp_path_;
  // This call (fp16/bf16, syncing, BackendOptions::word_split): the word-embedding gradient is summed in two parts, its
  // dense decoder share right after the MLM head (overlapped with the encoder's backward) and,
  // after the embedding backward, only the rows of the union of the ranks' token ids (compact
  // [U, H] all-reduce) instead of the whole [V, H] table at the end of the step.
  bool word_split_ = false;
  // Page-locked [3V]: how many ranks use each token id ([V]), then the compact rows' index
  // ([2U]: union ids, then this rank's group of each or -1) on its way to word_rows_idx_.
  int32_t* union_host_ = nullptr;
  DeviceBuffer word_rows_idx_, word_rows_;  // [2V] int32 and [V, H] dtype: room for every id
};

}  // namespace dskc
