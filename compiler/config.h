// The layer config: DeepSpeed's DeepSpeedTransformerConfig fields (SPEC §2), parsed from JSON
// or derived from a DeepSpeed JSON + BERT model config + flags (the guide's BertEncoder code).
// Invariant: a LayerConfig returned by any parse/derive function has passed validate().
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dskc {

enum class DType { F32, F16, BF16 };
enum class GeluForm { Erf, Tanh };

const char* dtype_name(DType t);          // "fp32" | "fp16" | "bf16"
const char* dtype_cuda_type(DType t);     // "float" | "__half" | "__nv_bfloat16"
int dtype_bytes(DType t);

struct LayerConfig {
  int batch_size = 0;
  int max_seq_length = 0;
  int hidden_size = 0;
  int heads = 0;
  int intermediate_size = 0;  // 0 in JSON input means 4 * hidden_size
  double attn_dropout_ratio = 0.0;
  double hidden_dropout_ratio = 0.0;
  int num_hidden_layers = 0;
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-12;
  int local_rank = -1;
  uint64_t seed = 0;
  bool fp16 = false;
  bool bf16 = false;
  bool pre_layer_norm = true;
  bool attn_dropout_checkpoint = false;
  bool normalize_invertible = false;
  bool gelu_checkpoint = false;
  bool stochastic_mode = false;
  bool adjust_init_range = true;
  bool training = true;
  GeluForm gelu_approximation = GeluForm::Erf;

  DType dtype() const { return bf16 ? DType::BF16 : (fp16 ? DType::F16 : DType::F32); }
  int head_dim() const { return hidden_size / heads; }
  bool operator==(const LayerConfig&) const = default;  // exact, field by field
};

// Parses a layer config JSON text. `source` names the file in messages. `max_seq_cli` is the
// command line's --max_seq_length, used when the JSON has none (SPEC §2). Throws
// Error(Config) naming the key (and the closest known key for an unknown one).
LayerConfig parse_layer_config(const std::string& json_text, const std::string& source,
                               std::optional<int> max_seq_cli = std::nullopt);
LayerConfig load_layer_config(const std::string& path, std::optional<int> max_seq_cli = std::nullopt);

// Checks ranges and consistency; throws Error(Config) naming the field.
void validate(const LayerConfig& c, const std::string& source);

// Serializes every field (round-trips through parse_layer_config).
std::string to_json_text(const LayerConfig& c, int indent = 2);

// The guide's BertEncoder derivation: --deepspeed_config ds.json --cf model.json
// --max_seq_length N plus the four memory/speed switches.
struct DeriveOptions {
  std::string deepspeed_config_path;
  std::string model_config_path;
  std::optional<int> max_seq_length;
  bool attention_dropout_checkpoint = false;
  bool normalize_invertible = false;
  bool gelu_checkpoint = false;
  bool stochastic_mode = false;
  bool pre_layer_norm = true;
  int local_rank = -1;
  uint64_t seed = 42;
};
LayerConfig derive_layer_config(const DeriveOptions& opt);

// Closest string by edit distance (for "did you mean" hints); empty if nothing is close.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace dskc
