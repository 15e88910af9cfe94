// CpuBackend: BERT pre-training on the CPU (the reference TrainBackend; contract in backend.h).
//
// Model: embeddings (word + position + token type, LayerNorm, dropout), N encoder layers of
// runtime/cpu_reference.h's CpuReferenceLayer (the DeepSpeed layer math; layer i has
// layer_id i, its dropout keyed by the micro-step), a final LayerNorm for Pre-LN, the MLM head
// (dense H→H, GELU, LayerNorm, decoder tied to the word embeddings + bias) evaluated only at
// the real masked positions, and the NSP head (pooler dense + tanh on [CLS], classifier H→2).
// Losses: cross-entropy, MLM mean over the real predictions, NSP mean over the batch.
//
// Precision: master weights, gradients and moments are fp32 vectors. Activations are double.
// With fp16/bf16 the encoder layers emulate storage rounding (CpuReferenceLayer's storage
// mode), the weights they see are the master weights rounded to the dtype, and every
// accumulated gradient element is rounded to the dtype, so a loss-scaled fp16 gradient beyond
// 65504 becomes inf as on a GPU. Embeddings and heads compute in double in every mode.
//
// --deepspeed_transformer_kernel on or off computes the same function here (the CPU layer is
// both the fused kernel's and the plain BertLayer's reference); only name() differs.
#pragma once
#include <array>
#include <vector>

#include "runtime/cpu_reference.h"
#include "trainer/backend.h"

namespace dskc {

class CpuBackend : public TrainBackend {
 public:
  explicit CpuBackend(const BackendOptions& opt);

  std::string name() const override;
  void import_params(const ParamMap& params, const std::string& source) override;
  ParamMap export_params() const override;
  void import_optimizer_state(const ParamMap& state, const std::string& source) override;
  ParamMap export_optimizer_state() const override;
  void zero_grads() override;
  StepLoss forward_backward(const Batch& batch, const MicroStep& m) override;
  bool grads_finite() override;
  double grad_norm(double grad_scale) override;
  void optimizer_step(const OptimizerSettings& s, const UpdateArgs& a) override;
  ParamMap export_grads() const override;
  void inject_grad_overflow() override;

 private:
  using Vec = std::vector<double>;
  static constexpr int kLayerParams = 12;

  Vec param(int idx) const;                  // master weights as the compute dtype sees them
  void add_grad(int idx, const Vec& g);      // gradient buffer += g, rounded to the dtype
  int index_of(const std::string& name) const;

  BackendOptions opt_;
  LayerConfig layer_cfg_;
  std::vector<ModelParamSpec> specs_;
  std::vector<std::vector<float>> params_, grads_, exp_avg_, exp_avg_sq_;
  std::vector<CpuReferenceLayer> layers_;
  std::vector<std::array<int, kLayerParams>> layer_idx_;  // spec index per layer parameter
  std::vector<std::string> layer_param_names_;            // layer_param_specs order
  int word_ = -1, pos_ = -1, type_ = -1, emb_ln_w_ = -1, emb_ln_b_ = -1, final_ln_w_ = -1, final_ln_b_ = -1,
      pool_w_ = -1, pool_b_ = -1, tr_w_ = -1, tr_b_ = -1, tr_ln_w_ = -1, tr_ln_b_ = -1, dec_b_ = -1, nsp_w_ = -1,
      nsp_b_ = -1;
};

}  // namespace dskc
