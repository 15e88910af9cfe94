// The BERT pre-training model as data: its shape (parsed from the --cf model config), the
// names, shapes and order of every parameter in the kernel layout, and BERT's initialization.
// Shared by every TrainBackend, the checkpoint code and `dskc convert`.
//
// Parameter names (the "kernel layout": DeepSpeed's checkpoint names with the transformer
// kernel, which match Hugging Face's BertForPreTraining outside the encoder layers):
//   bert.embeddings.word_embeddings.weight        [V,H]  (also the MLM decoder: tied)
//   bert.embeddings.position_embeddings.weight    [P,H]
//   bert.embeddings.token_type_embeddings.weight  [T,H]
//   bert.embeddings.LayerNorm.weight / .bias      [H]
//   bert.encoder.layer.{i}.{attn_qkvw, attn_qkvb, attn_ow, attn_ob, attn_nw, attn_nb, inter_w,
//                           inter_b, output_w, output_b, norm_w, norm_b}   (runtime/layer_params.h)
//   bert.encoder.FinalLayerNorm.weight / .bias    [H]    (Pre-LN only; bing_bert's name)
//   bert.pooler.dense.weight [H,H] / .bias [H]
//   cls.predictions.transform.dense.weight [H,H] / .bias [H]
//   cls.predictions.transform.LayerNorm.weight / .bias [H]
//   cls.predictions.bias                          [V]    (decoder bias)
//   cls.seq_relationship.weight [2,H] / .bias [2]
// Linear weights are [out, in] (y = x·Wᵀ + b) as in PyTorch.
//
// Model-level dropout (the CUDA backend must match the CPU backend bit for bit): the
// embedding output (after its LayerNorm) uses Philox stream kStreamEmbeddingOutput (4) with
// layer 0, element index (b·S + s)·H + c, keyed by (seed, micro-step) like the layers
// (templates/common/philox.cuh; the layer streams 1-3 and layer ids in the upper bits never
// collide with it). BERT's pre-training heads have no dropout.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/config.h"

namespace dskc {

inline constexpr uint32_t kStreamEmbeddingOutput = 4;

struct BertShape {
  int vocab_size = 0;
  int hidden_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int intermediate_size = 0;  // 4 × hidden when the config omits it
  int max_position_embeddings = 512;
  int type_vocab_size = 2;
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-12;
  bool pre_layer_norm = true;  // the guide's kernel config; a "pre_layer_norm" key overrides
  GeluForm gelu = GeluForm::Erf;

  bool operator==(const BertShape&) const = default;
  // Everything that fixes parameter shapes or the function computed, dropouts and init aside:
  // a checkpoint loads into a model iff this matches.
  bool same_architecture(const BertShape& o) const;
  // "hidden_size 64 vs 128" style list of architecture differences (empty when the same).
  std::string architecture_diff(const BertShape& o) const;
};

// Optional values of bing_bert's nested config ("training": {...}) the LR schedule uses.
struct BertTrainingHints {
  std::optional<double> learning_rate, warmup_proportion, decay_rate;
  std::optional<int64_t> decay_step, total_training_steps;
};

struct BertModelConfig {
  BertShape shape;
  BertTrainingHints training;
};

// A Hugging Face style BertConfig (flat) or bing_bert's --cf file (the model nested under
// "bert_model_config", training values under "training"). Unknown keys are ignored (model
// configs carry many). Error(Config) naming the file and key.
BertModelConfig parse_bert_model_config(const std::string& json_text, const std::string& source);
BertModelConfig load_bert_model_config(const std::string& path);
// The shape alone from a JSON text (e.g. checkpoint metadata).
BertShape parse_bert_shape(const std::string& json_text, const std::string& source);
// Flat HF-style JSON with every field (parses back to an equal BertShape).
std::string to_json_text(const BertShape& s, int indent = -1);

struct ModelParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  int layer = -1;           // encoder layer index, -1 outside the encoder
  std::string layer_param;  // "attn_qkvw", ... for encoder layers
  int64_t numel() const;
  // Weight decay applies to matrices (embeddings and linear weights), never to biases or
  // LayerNorm parameters (bing_bert's no_decay rule, decided by shape so that the kernel's
  // attn_qkvb / attn_nw names are covered too).
  bool weight_decay() const { return shape.size() >= 2; }
};

using ParamMap = std::map<std::string, std::vector<float>>;

std::string encoder_param_name(int layer, const std::string& layer_param);
// Every parameter in the fixed order above.
std::vector<ModelParamSpec> model_param_specs(const BertShape& s);
int64_t count_parameters(const BertShape& s);

// The DeepSpeed layer config of each encoder layer. micro_batch / max_seq bound the inputs;
// dtype, memory flags and seed as given; dropouts, sizes, eps, GELU form from the shape.
struct EncoderLayerOptions {
  int micro_batch = 1;
  int max_seq_length = 128;
  DType dtype = DType::F32;
  bool attention_dropout_checkpoint = false, normalize_invertible = false, gelu_checkpoint = false,
       stochastic_mode = false;
  uint64_t seed = 42;
  int local_rank = -1;
};
LayerConfig encoder_layer_config(const BertShape& s, const EncoderLayerOptions& o, const std::string& source);

// BERT's initialization: weights normal(0, initializer_range), LayerNorm weights 1, biases 0;
// encoder layers by init_layer_params (DeepSpeed's, with adjust_init_range) seeded per layer.
// Deterministic (mt19937_64 + Box-Muller).
ParamMap init_model_params(const BertShape& s, uint64_t seed);

// Error(Input) naming `source` when `params` lacks a parameter, has one of the wrong size, or
// has a name the model does not know.
void check_param_map(const ParamMap& params, const std::vector<ModelParamSpec>& specs, const std::string& source,
                     const std::string& prefix = "");

}  // namespace dskc
