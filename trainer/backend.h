// TrainBackend: where BERT pre-training math happens. A backend owns the model parameters
// (fp32 master weights), their gradients and the optimizer state, and does every computation;
// the trainer loop (trainer.h) only orchestrates: data, loss scaling, clipping decisions, LR,
// checkpoints, logging. The CPU backend (bert_cpu.h) is the reference implementation; a CUDA
// backend implements the same interface with the JIT layers.
//
// Contract every backend keeps (tests compare backends against each other through it):
//  - Parameters are the tensors of model_param_specs(shape) (trainer/bert_model.h), fp32,
//    row-major, kernel layout. A fresh backend holds zeros: the trainer imports
//    init_model_params() or a checkpoint before the first step.
//  - forward_backward(batch, m) computes the losses of one micro-batch (MLM: mean
//    cross-entropy over its real predictions, NSP: mean over its sequences) and ADDS the
//    gradients of  m.loss_scale × (mlm + nsp) / m.accumulation  to the gradient buffers.
//    Compute precision: the backend's dtype (fp16/bf16 activations and gradients, fp32 master
//    weights and optimizer state); with fp16 an overflow leaves inf/NaN in the gradients.
//  - Dropout masks come from the Philox rule of templates/common/philox.cuh keyed by (seed,
//    layer, m.rng_step): encoder layer i uses layer id i with streams 1-3 (docs/DESIGN.md),
//    the embedding output stream kStreamEmbeddingOutput (bert_model.h). The trainer passes
//    rng_step = (step × world + rank) × accumulation + micro index, so masks depend on nothing but the seed
//    and the position in training (exact resume).
//  - Padding predictions: slot k of a sample is a real prediction while
//    masked_lm_positions[k] != 0; the first 0 ends the list (position 0 is [CLS], never
//    predicted; NVIDIA's convention, which `dskc prepare-data` writes). Attention mask is
//    additive: 0 where input_mask is 1, −10000 where it is 0.
//  - grads_finite / grad_norm / optimizer_step see the sum of all micro-batches since the
//    last zero_grads().
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/config.h"
#include "trainer/bert_model.h"
#include "trainer/hdf5_shard.h"
#include "trainer/optimizer.h"
#include "trainer/step_profile.h"

namespace dskc {

struct StepLoss {
  double mlm_loss = 0.0;    // mean over the micro-batch's real predictions (0 when it has none)
  double nsp_loss = 0.0;    // mean over its sequences
  int64_t predictions = 0;  // real masked-LM predictions in the micro-batch
  int64_t sequences = 0;
};

struct MicroStep {
  double loss_scale = 1.0;  // gradients carry this factor (fp16 loss scaling)
  int accumulation = 1;     // gradients are divided by this (micro-batches per step)
  uint32_t rng_step = 0;    // dropout RNG step key
  // The last micro-batch of a step: a data-parallel backend all-reduces the gradients during
  // this call (bucket by bucket, overlapped with backward) and returns with the sums of all
  // ranks in its gradient buffers. Earlier micro-batches only accumulate locally.
  bool sync_grads = true;
};

class ProcessGroup;

// A backend's host-side work on one micro-batch that needs no device (TrainBackend::prepare).
struct PreparedBatch {
  virtual ~PreparedBatch() = default;
};

struct BackendOptions {
  BertShape shape;
  int micro_batch = 1;       // largest batch forward_backward takes
  int max_seq_length = 128;  // longest sequence
  DType dtype = DType::F32;  // compute precision (fp16 / bf16 / fp32)
  // The guide's --deepspeed_transformer_kernel: the fused DeepSpeed layer. Off: the plain
  // (unfused) BertLayer with the same math and parameters.
  bool transformer_kernel = true;
  bool attention_dropout_checkpoint = false, normalize_invertible = false, gelu_checkpoint = false,
       stochastic_mode = false;
  uint64_t seed = 42;  // dropout RNG
  // transformer_kernel: each layer's forward and backward launched as a CUDA graph after its first
  // step (LayerOptions::cuda_graphs; -1: from DSKC_LAYER_GRAPHS).
  int cuda_graphs = -1;
  int local_rank = -1;
  // Data parallel (world size > 1, CUDA backend only): the group whose NCCL communicator the
  // backend creates on its device and all-reduces gradients over (not owned; must outlive the
  // backend). Gradient buckets of bucket_cap_bytes (fp32 gradients), released in reverse
  // parameter order as backward produces them; delay_allreduce: one all-reduce after backward.
  ProcessGroup* process_group = nullptr;
  // CUDA backend: a cap on the device memory its Context may allocate (0 = none), applied
  // before the first allocation (the memory benchmark's emulated smaller GPU).
  size_t memory_cap_bytes = 0;
  bool delay_allreduce = false;
  size_t bucket_cap_bytes = 25u * 1000u * 1000u;
  // fp16/bf16 training all-reduces gradients in that dtype (DeepSpeed's default; the fp32
  // accumulators hold dtype-rounded values, so the conversion is exact and the sum is rounded
  // once, like an accumulation step); true: in fp32 (DeepSpeed's "fp32_allreduce").
  bool fp32_allreduce = false;
  // fp16/bf16, a step of one micro-batch per rank: each layer's dtype gradient buffer is
  // all-reduced in place and then added to the (zero) fp32 accumulators, instead of fp32 ->
  // staging copy -> all-reduce -> back. Same sums bit for bit, a third of the memory traffic.
  // false: every gradient whole through the staging copy (test hook DSKC_TEST_ALLREDUCE=staged).
  bool allreduce_in_place = true;
  // With allreduce_in_place and two ranks whose GPUs are peers on one host: the layer gradients
  // move by copy engines (trainer/peer_sum.h) instead of NCCL kernels; same sums bit for bit.
  // false: NCCL (test hook DSKC_TEST_ALLREDUCE=nccl compares the two).
  bool peer_copy = true;
  // fp16/bf16 with allreduce_in_place, any accumulation: the word-embedding gradient is summed as
  // its decoder share right after the MLM head plus, at the end, only the rows some rank's batch
  // used, instead of the whole table at the end. Off: on two H200s it shortens the exposed tail
  // by 0.2 ms but makes the step 0.6 ms longer (bench/NOTES.md, dp4); test hook
  // DSKC_TEST_ALLREDUCE=split_word turns it on.
  bool word_split = false;
  // CUDA backend: Adam / AdamW in one launch over every parameter tensor that also refreshes the
  // compute copies (Lamb in three: moments and norm partials, trust ratios, update and copies),
  // instead of two (Lamb: three) launches per tensor plus a cast each; bitwise the same.
  // -1: from DSKC_OPTIMIZER ("multi" or unset: on; "per_tensor": off).
  int multi_tensor_optimizer = -1;
  // CUDA backend, one GPU: a step of one micro-batch leaves the encoder layers' gradients in the
  // layers' own dtype buffers (the fp32 accumulators would hold exactly 0 + g); the gradient norm
  // and the one-launch Adam / AdamW and three-launch Lamb read them there, and anything else that
  // reads the gradients (another micro-batch, export_grads, the per-tensor optimizers) first widens
  // them into the accumulators. Bitwise the same update. -1: from DSKC_LAYER_GRADS ("defer" or unset: on;
  // "accumulate": off, each layer's gradients widened right after its backward).
  int defer_layer_grads = -1;
  // CUDA backend, one GPU, the one-launch Adam / AdamW: how the update meets the next step.
  // 0 "sync": the host waits for the update before it goes on; 1 "async": the update queued on the
  // main stream, the host goes on to the next step's batch; 2 "overlap": the update on a stream of
  // its own at the highest priority, one launch per group (the embedding and head tensors, then
  // each encoder layer's), and the next forward waits for a group only right before the first
  // kernel that reads it (the embeddings, layer l), so the update runs under the forward's GEMMs;
  // 3 "overlap_low": as 2 at the main stream's priority. Bitwise the same update in every form.
  // All four trained BERT-Large at the same rate on an H100 (bench/NOTES.md t4: the update's 3.2 ms
  // left the main stream and the forward grew by as much), so the default stays 0.
  // -1: from DSKC_OPTIMIZER_OVERLAP (unset: sync).
  int optimizer_overlap = -1;
  // Test hook (optimizer_overlap 2 / 3): each update's stream first waits until
  // CudaBackend::release_held_optimizer() is called (from any thread), so a test can hold the
  // update while the next forward is queued and see that the forward waited for it.
  bool test_hold_optimizer = false;
};

class TrainBackend {
 public:
  virtual ~TrainBackend() = default;

  // e.g. "cpu (DeepSpeed kernel layer)"; printed at start.
  virtual std::string name() const = 0;

  // Replaces all parameters (fp32 master weights). Error(Input) naming `source` when a tensor
  // is missing, has the wrong size, or is unknown (check_param_map).
  virtual void import_params(const ParamMap& params, const std::string& source) = 0;
  virtual ParamMap export_params() const = 0;
  // Optimizer moments: "exp_avg.<param>" and "exp_avg_sq.<param>" for every parameter, fp32.
  // A fresh backend has zeros.
  virtual void import_optimizer_state(const ParamMap& state, const std::string& source) = 0;
  virtual ParamMap export_optimizer_state() const = 0;

  virtual void zero_grads() = 0;
  virtual StepLoss forward_backward(const Batch& batch, const MicroStep& m) = 0;
  // The host-side work on `batch` that needs no device (the CUDA backend's index tables): may run
  // on another thread (the trainer's read-ahead worker) while this backend computes; const and
  // thread-safe. nullptr where there is none, or where the batch is invalid (forward_backward then
  // reports it). forward_backward_prepared(batch, m, prepare(batch)) is forward_backward(batch, m).
  virtual std::unique_ptr<PreparedBatch> prepare(const Batch& batch) const {
    (void)batch;
    return nullptr;
  }
  virtual StepLoss forward_backward_prepared(const Batch& batch, const MicroStep& m, const PreparedBatch* prepared) {
    (void)prepared;
    return forward_backward(batch, m);
  }
  // True when every accumulated gradient element is finite.
  virtual bool grads_finite() = 0;
  // L2 norm over all parameters of the accumulated gradients divided by grad_scale.
  virtual double grad_norm(double grad_scale) = 0;
  // Updates every parameter with its gradient (optimizer.h); decay per
  // ModelParamSpec::weight_decay(). Does not zero the gradients.
  virtual void optimizer_step(const OptimizerSettings& s, const UpdateArgs& a) = 0;

  // The accumulated gradients as they are (still scaled), by parameter name: for tests and
  // backend-vs-backend comparisons.
  virtual ParamMap export_grads() const = 0;
  // Test hook: make one gradient element +inf, as an fp16 overflow would.
  virtual void inject_grad_overflow() = 0;
  // Data parallel: how layer gradients are summed, for the log ("" when not distributed).
  virtual std::string data_parallel_path() const { return {}; }

  // Step profile (step_profile.h, `dskc train --profile_steps`): after start_phase_marks(), mark()
  // sets a mark (the backend also sets its own inside forward_backward) and take_phase_marks()
  // returns those since the last take. Before it, mark() does nothing.
  void start_phase_marks() {
    if (!phase_timer_) phase_timer_ = make_phase_timer();
  }
  void mark(const char* phase) {
    if (phase_timer_) phase_timer_->mark(phase);
  }
  std::vector<PhaseMark> take_phase_marks() { return phase_timer_ ? phase_timer_->take() : std::vector<PhaseMark>{}; }

 protected:
  // The backend's timer: the host clock unless its work runs elsewhere.
  virtual std::unique_ptr<PhaseTimer> make_phase_timer() { return std::make_unique<HostPhaseTimer>(); }
  // For a backend whose timer holds device resources: free them while the device context lives.
  void release_phase_timer() { phase_timer_.reset(); }

 private:
  std::unique_ptr<PhaseTimer> phase_timer_;
};

// "cpu" -> CpuBackend; "cuda" -> nullptr for now (the CUDA backend is not written yet; the
// caller reports it). Error(Usage) for another name.
std::unique_ptr<TrainBackend> make_backend(const std::string& kind, const BackendOptions& opt);

// Error(Input) when a micro-batch does not fit the backend (sizes, ids out of range).
void check_batch(const Batch& b, const BackendOptions& opt);
// The encoder's layer config for these options (both backends build their layers from it).
LayerConfig backend_layer_config(const BackendOptions& opt);

// The moment names of one parameter.
inline std::string exp_avg_name(const std::string& p) { return "exp_avg." + p; }
inline std::string exp_avg_sq_name(const std::string& p) { return "exp_avg_sq." + p; }

}  // namespace dskc
