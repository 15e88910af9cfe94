// BERT model description: config parsing, parameter specs, initialization (see bert_model.h).
#include "runtime/normal_generator.h"
#include "trainer/bert_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <numbers>
#include <random>
#include <set>

#include "compiler/fileio.h"
#include "runtime/layer_params.h"
#include "compiler/json_read.h"

namespace dskc {
namespace {

using json_read::Json;

BertShape read_shape(const Json& model, const std::string& src) {
  using namespace json_read;
  auto required = [&](const char* key) -> const Json& {
    const Json* v = find(model, key);
    if (!v) throw Error(ErrorKind::Config, fmt::format("{}: missing required key '{}'", src, key));
    return *v;
  };
  auto int_key = [&](const char* key, int lo, int hi) {
    return static_cast<int>(get_int(required(key), src, key, lo, hi));
  };
  BertShape s;
  s.vocab_size = int_key("vocab_size", 1, 1 << 24);
  s.hidden_size = int_key("hidden_size", 1, 65536);
  s.num_hidden_layers = int_key("num_hidden_layers", 1, 4096);
  s.num_attention_heads = int_key("num_attention_heads", 1, 65536);
  if (const Json* v = find(model, "intermediate_size"))
    s.intermediate_size = static_cast<int>(get_int(*v, src, "intermediate_size", -1, 1 << 20));
  if (s.intermediate_size <= 0) s.intermediate_size = 4 * s.hidden_size;
  if (const Json* v = find(model, "max_position_embeddings"))
    s.max_position_embeddings = static_cast<int>(get_int(*v, src, "max_position_embeddings", 1, 1 << 20));
  if (const Json* v = find(model, "type_vocab_size"))
    s.type_vocab_size = static_cast<int>(get_int(*v, src, "type_vocab_size", 1, 1024));
  s.hidden_dropout_prob = get_number(required("hidden_dropout_prob"), src, "hidden_dropout_prob");
  s.attention_probs_dropout_prob =
      get_number(required("attention_probs_dropout_prob"), src, "attention_probs_dropout_prob");
  if (const Json* v = find(model, "initializer_range")) s.initializer_range = get_number(*v, src, "initializer_range");
  if (const Json* v = find(model, "layer_norm_eps")) s.layer_norm_eps = get_number(*v, src, "layer_norm_eps");
  if (const Json* v = find(model, "pre_layer_norm")) s.pre_layer_norm = get_bool(*v, src, "pre_layer_norm");
  if (const Json* v = find(model, "hidden_act")) {
    std::string act = get_string(*v, src, "hidden_act");
    if (act == "gelu") {
      s.gelu = GeluForm::Erf;
    } else if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast" || act == "tanh_gelu") {
      s.gelu = GeluForm::Tanh;
    } else {
      throw Error(ErrorKind::Config,
                  fmt::format("{}: hidden_act \"{}\" is not supported (the transformer kernel fuses GELU: use "
                              "\"gelu\", \"gelu_new\", \"gelu_pytorch_tanh\" or \"gelu_fast\")",
                              src, act));
    }
  }
  if (s.hidden_size % s.num_attention_heads != 0)
    throw Error(ErrorKind::Config, fmt::format("{}: hidden_size ({}) must be divisible by num_attention_heads ({})",
                                               src, s.hidden_size, s.num_attention_heads));
  auto ratio = [&](const char* key, double r) {
    if (!(r >= 0.0 && r < 1.0))
      throw Error(ErrorKind::Config, fmt::format("{}: {} must be in [0, 1), got {}", src, key, r));
  };
  ratio("hidden_dropout_prob", s.hidden_dropout_prob);
  ratio("attention_probs_dropout_prob", s.attention_probs_dropout_prob);
  if (!(s.initializer_range >= 0.0) || !std::isfinite(s.initializer_range))
    throw Error(ErrorKind::Config,
                fmt::format("{}: initializer_range must be a finite number >= 0, got {}", src, s.initializer_range));
  if (!(s.layer_norm_eps > 0.0) || !std::isfinite(s.layer_norm_eps))
    throw Error(ErrorKind::Config, fmt::format("{}: layer_norm_eps must be greater than 0, got {}", src, s.layer_norm_eps));
  return s;
}


uint64_t mix_seed(uint64_t seed, uint64_t salt) {  // splitmix64 of seed + salt
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (salt + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool BertShape::same_architecture(const BertShape& o) const { return architecture_diff(o).empty(); }

std::string BertShape::architecture_diff(const BertShape& o) const {
  std::vector<std::string> d;
  auto cmp = [&](const char* name, auto a, auto b) {
    if (a != b) d.push_back(fmt::format("{} {} vs {}", name, a, b));
  };
  cmp("vocab_size", vocab_size, o.vocab_size);
  cmp("hidden_size", hidden_size, o.hidden_size);
  cmp("num_hidden_layers", num_hidden_layers, o.num_hidden_layers);
  cmp("num_attention_heads", num_attention_heads, o.num_attention_heads);
  cmp("intermediate_size", intermediate_size, o.intermediate_size);
  cmp("max_position_embeddings", max_position_embeddings, o.max_position_embeddings);
  cmp("type_vocab_size", type_vocab_size, o.type_vocab_size);
  cmp("layer_norm_eps", layer_norm_eps, o.layer_norm_eps);
  cmp("pre_layer_norm", pre_layer_norm, o.pre_layer_norm);
  if (gelu != o.gelu)
    d.push_back(fmt::format("hidden_act {} vs {}", gelu == GeluForm::Tanh ? "gelu_new" : "gelu",
                            o.gelu == GeluForm::Tanh ? "gelu_new" : "gelu"));
  return fmt::format("{}", fmt::join(d, ", "));
}

BertModelConfig parse_bert_model_config(const std::string& json_text, const std::string& source) {
  using namespace json_read;
  Json file = parse(json_text, source);
  if (!file.is_object())
    throw Error(ErrorKind::Config, fmt::format("{}: a BERT model config must be a JSON object, got {}", source,
                                               describe(file)));
  const Json* model = &file;
  if (const Json* nested = find(file, "bert_model_config")) {
    if (!nested->is_object())
      throw Error(ErrorKind::Config,
                  fmt::format("{}: bert_model_config must be an object, got {}", source, describe(*nested)));
    model = nested;
  }
  BertModelConfig c;
  c.shape = read_shape(*model, source);
  if (const Json* t = find(file, "training"); t && t->is_object()) {
    BertTrainingHints& h = c.training;
    if (const Json* v = find(*t, "learning_rate")) h.learning_rate = get_number(*v, source, "training.learning_rate");
    if (const Json* v = find(*t, "warmup_proportion"))
      h.warmup_proportion = get_number(*v, source, "training.warmup_proportion");
    if (const Json* v = find(*t, "decay_rate")) h.decay_rate = get_number(*v, source, "training.decay_rate");
    if (const Json* v = find(*t, "decay_step")) h.decay_step = get_int(*v, source, "training.decay_step", 1, INT64_MAX);
    if (const Json* v = find(*t, "total_training_steps"))
      h.total_training_steps = get_int(*v, source, "training.total_training_steps", 1, INT64_MAX);
  }
  return c;
}

BertModelConfig load_bert_model_config(const std::string& path) {
  return parse_bert_model_config(read_file_bytes(path), path);
}

BertShape parse_bert_shape(const std::string& json_text, const std::string& source) {
  return parse_bert_model_config(json_text, source).shape;
}

std::string to_json_text(const BertShape& s, int indent) {
  nlohmann::ordered_json j;
  j["vocab_size"] = s.vocab_size;
  j["hidden_size"] = s.hidden_size;
  j["num_hidden_layers"] = s.num_hidden_layers;
  j["num_attention_heads"] = s.num_attention_heads;
  j["intermediate_size"] = s.intermediate_size;
  j["hidden_act"] = s.gelu == GeluForm::Tanh ? "gelu_new" : "gelu";
  j["hidden_dropout_prob"] = s.hidden_dropout_prob;
  j["attention_probs_dropout_prob"] = s.attention_probs_dropout_prob;
  j["max_position_embeddings"] = s.max_position_embeddings;
  j["type_vocab_size"] = s.type_vocab_size;
  j["initializer_range"] = s.initializer_range;
  j["layer_norm_eps"] = s.layer_norm_eps;
  j["pre_layer_norm"] = s.pre_layer_norm;
  return j.dump(indent);
}

int64_t ModelParamSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string encoder_param_name(int layer, const std::string& layer_param) {
  return fmt::format("bert.encoder.layer.{}.{}", layer, layer_param);
}

std::vector<ModelParamSpec> model_param_specs(const BertShape& s) {
  const int64_t V = s.vocab_size, H = s.hidden_size, P = s.max_position_embeddings, T = s.type_vocab_size;
  std::vector<ModelParamSpec> out;
  auto add = [&](std::string name, std::vector<int64_t> shape) { out.push_back({std::move(name), std::move(shape), -1, ""}); };
  add("bert.embeddings.word_embeddings.weight", {V, H});
  add("bert.embeddings.position_embeddings.weight", {P, H});
  add("bert.embeddings.token_type_embeddings.weight", {T, H});
  add("bert.embeddings.LayerNorm.weight", {H});
  add("bert.embeddings.LayerNorm.bias", {H});
  LayerConfig lc;
  lc.hidden_size = s.hidden_size;
  lc.intermediate_size = s.intermediate_size;
  const std::vector<ParamSpec> layer_specs = layer_param_specs(lc);
  for (int i = 0; i < s.num_hidden_layers; ++i) {
    for (const ParamSpec& p : layer_specs) {
      ModelParamSpec m{encoder_param_name(i, p.name), p.shape, i, p.name};
      out.push_back(std::move(m));
    }
  }
  if (s.pre_layer_norm) {
    add("bert.encoder.FinalLayerNorm.weight", {H});
    add("bert.encoder.FinalLayerNorm.bias", {H});
  }
  add("bert.pooler.dense.weight", {H, H});
  add("bert.pooler.dense.bias", {H});
  add("cls.predictions.transform.dense.weight", {H, H});
  add("cls.predictions.transform.dense.bias", {H});
  add("cls.predictions.transform.LayerNorm.weight", {H});
  add("cls.predictions.transform.LayerNorm.bias", {H});
  add("cls.predictions.bias", {V});
  add("cls.seq_relationship.weight", {2, H});
  add("cls.seq_relationship.bias", {2});
  return out;
}

int64_t count_parameters(const BertShape& s) {
  int64_t n = 0;
  for (const auto& p : model_param_specs(s)) n += p.numel();
  return n;
}

LayerConfig encoder_layer_config(const BertShape& s, const EncoderLayerOptions& o, const std::string& source) {
  LayerConfig c;
  c.batch_size = o.micro_batch;
  c.max_seq_length = o.max_seq_length;
  c.hidden_size = s.hidden_size;
  c.heads = s.num_attention_heads;
  c.intermediate_size = s.intermediate_size;
  c.attn_dropout_ratio = s.attention_probs_dropout_prob;
  c.hidden_dropout_ratio = s.hidden_dropout_prob;
  c.num_hidden_layers = s.num_hidden_layers;
  c.initializer_range = s.initializer_range;
  c.layer_norm_eps = s.layer_norm_eps;
  c.local_rank = o.local_rank;
  c.seed = o.seed;
  c.fp16 = o.dtype == DType::F16;
  c.bf16 = o.dtype == DType::BF16;
  c.pre_layer_norm = s.pre_layer_norm;
  c.attn_dropout_checkpoint = o.attention_dropout_checkpoint;
  c.normalize_invertible = o.normalize_invertible;
  c.gelu_checkpoint = o.gelu_checkpoint;
  c.stochastic_mode = o.stochastic_mode;
  c.gelu_approximation = s.gelu;
  validate(c, source);
  return c;
}

ParamMap init_model_params(const BertShape& s, uint64_t seed) {
  ParamMap out;
  NormalGenerator gen(mix_seed(seed, 0));
  EncoderLayerOptions lo;
  const LayerConfig lc = encoder_layer_config(s, lo, "model config");
  for (const ModelParamSpec& spec : model_param_specs(s)) {
    if (spec.layer >= 0) {
      if (spec.layer_param == "attn_qkvw") {  // the first of a layer's twelve: init all of them
        ParamMap layer = init_layer_params(lc, mix_seed(seed, 1000 + static_cast<uint64_t>(spec.layer)));
        for (auto& [name, v] : layer) out[encoder_param_name(spec.layer, name)] = std::move(v);
      }
      continue;
    }
    std::vector<float> v(static_cast<size_t>(spec.numel()), 0.0f);
    if (ends_with(spec.name, "LayerNorm.weight")) {
      std::fill(v.begin(), v.end(), 1.0f);
    } else if (spec.shape.size() >= 2) {
      for (float& x : v) x = static_cast<float>(gen.next() * s.initializer_range);
    }
    out[spec.name] = std::move(v);
  }
  return out;
}

void check_param_map(const ParamMap& params, const std::vector<ModelParamSpec>& specs, const std::string& source,
                     const std::string& prefix) {
  std::set<std::string> known;
  for (const ModelParamSpec& spec : specs) {
    const std::string name = prefix + spec.name;
    known.insert(name);
    auto it = params.find(name);
    if (it == params.end())
      throw Error(ErrorKind::Input, fmt::format("{}: tensor '{}' is missing", source, name));
    if (static_cast<int64_t>(it->second.size()) != spec.numel())
      throw Error(ErrorKind::Input, fmt::format("{}: tensor '{}' has {} values, the model needs shape [{}]", source,
                                                name, it->second.size(), fmt::join(spec.shape, ",")));
  }
  for (const auto& [name, v] : params)
    if (!known.count(name))
      throw Error(ErrorKind::Input, fmt::format("{}: unexpected tensor '{}' (not a parameter of this model)", source, name));
}

}  // namespace dskc
