// Layer config (SPEC §2): parsing, validation, serialization, and the guide's BertEncoder
// derivation from a DeepSpeed JSON + BERT model config.
// Invariants: every user-facing error is Error(Config) (or Error(Io) for unreadable files) whose
// message starts with the file it is about and names the offending key; every LayerConfig that
// leaves this file has passed validate(); to_json_text() output parses back to an equal config.
#include "compiler/config.h"

#include "compiler/json_read.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <variant>

#include "compiler/errors.h"

namespace dskc {
namespace {

using Json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Field table: one row per SPEC §2 field, in the order to_json_text writes them.

using Member = std::variant<int LayerConfig::*, double LayerConfig::*, bool LayerConfig::*,
                            uint64_t LayerConfig::*, GeluForm LayerConfig::*>;
struct Field {
  const char* name;
  bool required;
  Member member;
};

const std::vector<Field>& fields() {
  static const std::vector<Field> f = {
      {"batch_size", true, &LayerConfig::batch_size},
      {"max_seq_length", false, &LayerConfig::max_seq_length},  // else --max_seq_length
      {"hidden_size", true, &LayerConfig::hidden_size},
      {"heads", true, &LayerConfig::heads},
      {"intermediate_size", false, &LayerConfig::intermediate_size},
      {"attn_dropout_ratio", true, &LayerConfig::attn_dropout_ratio},
      {"hidden_dropout_ratio", true, &LayerConfig::hidden_dropout_ratio},
      {"num_hidden_layers", true, &LayerConfig::num_hidden_layers},
      {"initializer_range", true, &LayerConfig::initializer_range},
      {"layer_norm_eps", false, &LayerConfig::layer_norm_eps},
      {"local_rank", false, &LayerConfig::local_rank},
      {"seed", true, &LayerConfig::seed},
      {"fp16", false, &LayerConfig::fp16},
      {"bf16", false, &LayerConfig::bf16},
      {"pre_layer_norm", false, &LayerConfig::pre_layer_norm},
      {"attn_dropout_checkpoint", false, &LayerConfig::attn_dropout_checkpoint},
      {"normalize_invertible", false, &LayerConfig::normalize_invertible},
      {"gelu_checkpoint", false, &LayerConfig::gelu_checkpoint},
      {"stochastic_mode", false, &LayerConfig::stochastic_mode},
      {"adjust_init_range", false, &LayerConfig::adjust_init_range},
      {"training", false, &LayerConfig::training},
      {"gelu_approximation", false, &LayerConfig::gelu_approximation},
  };
  return f;
}

// Names people carry over from the BERT model config or the DeepSpeed JSON; edit distance alone
// would not find the layer-config spelling for these.
const char* known_alias(const std::string& key) {
  static const std::pair<const char*, const char*> aliases[] = {
      {"num_attention_heads", "heads"},
      {"attention_probs_dropout_prob", "attn_dropout_ratio"},
      {"hidden_dropout_prob", "hidden_dropout_ratio"},
      {"train_micro_batch_size_per_gpu", "batch_size"},
      {"max_position_embeddings", "max_seq_length"},
      {"hidden_act", "gelu_approximation"},
      {"attention_dropout_checkpoint", "attn_dropout_checkpoint"},
  };
  for (const auto& [from, to] : aliases)
    if (key == from) return to;
  return nullptr;
}

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

// ---------------------------------------------------------------------------------------------
// JSON reading helpers shared by the layer, DeepSpeed and model configs.

// 1-based line and column of a 1-based byte count as nlohmann reports it (the last byte read).
Json parse_json(const std::string& text, const std::string& source) { return json_read::parse(text, source); }

std::string read_text_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f)
    throw Error(ErrorKind::Io, fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  bool failed = std::ferror(f);
  int err = errno;
  std::fclose(f);
  if (failed)
    throw Error(ErrorKind::Io, fmt::format("{}: cannot open ({})", path, std::strerror(err)));
  return text;
}

using json_read::describe;

[[noreturn]] void config_error(const std::string& msg) { throw Error(ErrorKind::Config, msg); }

int64_t read_integer(const Json& v, const std::string& source, const std::string& key, int64_t lo,
                     int64_t hi) {
  if (!v.is_number_integer())  // true for signed and unsigned JSON integers, not for 1.0 or bools
    config_error(fmt::format("{}: {} must be an integer, got {}", source, key, describe(v)));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    config_error(fmt::format("{}: {} = {} is out of range", source, key, v.dump()));
  int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) config_error(fmt::format("{}: {} = {} is out of range", source, key, x));
  return x;
}

int read_int(const Json& v, const std::string& source, const std::string& key) {
  return static_cast<int>(read_integer(v, source, key, std::numeric_limits<int>::min(),
                                       std::numeric_limits<int>::max()));
}

double read_number(const Json& v, const std::string& source, const std::string& key) {
  if (!v.is_number())  // booleans are not numbers in nlohmann
    config_error(fmt::format("{}: {} must be a number, got {}", source, key, describe(v)));
  return v.get<double>();
}

bool read_bool(const Json& v, const std::string& source, const std::string& key) {
  if (!v.is_boolean())
    config_error(fmt::format("{}: {} must be true or false, got {}", source, key, describe(v)));
  return v.get<bool>();
}

uint64_t read_seed(const Json& v, const std::string& source, const std::string& key) {
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
    config_error(
        fmt::format("{}: {} must be a non-negative integer, got {}", source, key, describe(v)));
  return v.get<uint64_t>();
}

GeluForm read_gelu(const Json& v, const std::string& source, const std::string& key) {
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s == "none") return GeluForm::Erf;
    if (s == "tanh") return GeluForm::Tanh;
    std::string hint = closest_match(s, {"none", "tanh"});
    if (s == "erf" || s == "exact") hint = "none";
    config_error(fmt::format("{}: {} must be \"none\" (exact erf GELU) or \"tanh\", got \"{}\"{}",
                             source, key, s,
                             hint.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", hint)));
  }
  config_error(fmt::format("{}: {} must be the string \"none\" or \"tanh\", got {}", source, key,
                           describe(v)));
}

// The object at `key` of a DeepSpeed / model config, or nullptr when absent or null.
const Json* find_key(const Json& obj, const char* key) { return json_read::find(obj, key); }

Json parse_object_file(const std::string& path, const char* what) {
  Json j = parse_json(read_text_file(path), path);
  if (!j.is_object())
    config_error(fmt::format("{}: a {} must be a JSON object, got {}", path, what, describe(j)));
  return j;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F16: return "fp16";
    case DType::BF16: return "bf16";
    default: return "fp32";
  }
}

const char* dtype_cuda_type(DType t) {
  switch (t) {
    case DType::F16: return "__half";
    case DType::BF16: return "__nv_bfloat16";
    default: return "float";
  }
}

int dtype_bytes(DType t) { return t == DType::F32 ? 4 : 2; }

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  auto lower = [](std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  const std::string w = lower(word);
  // Levenshtein distance, one row at a time.
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    return row[b.size()];
  };
  const size_t limit = std::max<size_t>(2, w.size() / 3);
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& c : candidates) {
    size_t d = distance(w, lower(c));
    // Also require the word to keep something of itself: "ab" is not a typo of "ls".
    if (d <= limit && d < w.size() && d < best_d) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

void validate(const LayerConfig& c, const std::string& source) {
  auto positive = [&](const char* key, int v, int max) {
    if (v <= 0) config_error(fmt::format("{}: {} must be greater than 0, got {}", source, key, v));
    if (v > max)
      config_error(
          fmt::format("{}: {} = {} exceeds the supported maximum {}", source, key, v, max));
  };
  positive("batch_size", c.batch_size, 65535);
  positive("max_seq_length", c.max_seq_length, 8192);
  positive("hidden_size", c.hidden_size, 65536);
  positive("heads", c.heads, 65536);
  positive("intermediate_size", c.intermediate_size, 4 * 65536);
  if (c.hidden_size % c.heads != 0)
    config_error(fmt::format("{}: hidden_size ({}) must be divisible by heads ({})", source,
                             c.hidden_size, c.heads));
  if (c.head_dim() > 256)
    config_error(fmt::format(
        "{}: head dimension hidden_size / heads = {} / {} = {} exceeds the supported maximum 256 "
        "(use more heads)",
        source, c.hidden_size, c.heads, c.head_dim()));
  auto ratio = [&](const char* key, double r) {
    if (!(r >= 0.0 && r < 1.0))  // also rejects NaN
      config_error(fmt::format("{}: {} must be in [0, 1), got {}", source, key, r));
  };
  ratio("attn_dropout_ratio", c.attn_dropout_ratio);
  ratio("hidden_dropout_ratio", c.hidden_dropout_ratio);
  if (c.num_hidden_layers < 1)
    config_error(fmt::format("{}: num_hidden_layers must be at least 1, got {}", source,
                             c.num_hidden_layers));
  if (!(c.initializer_range >= 0.0) || !std::isfinite(c.initializer_range))
    config_error(fmt::format("{}: initializer_range must be a finite number >= 0, got {}", source,
                             c.initializer_range));
  if (!(c.layer_norm_eps > 0.0) || !std::isfinite(c.layer_norm_eps))
    config_error(
        fmt::format("{}: layer_norm_eps must be greater than 0, got {}", source, c.layer_norm_eps));
  if (c.local_rank < -1)
    config_error(
        fmt::format("{}: local_rank must be -1 (current device) or a GPU index >= 0, got {}",
                    source, c.local_rank));
  if (c.fp16 && c.bf16)
    config_error(fmt::format(
        "{}: fp16 and bf16 are both true; enable at most one (both false means fp32)", source));
}

LayerConfig parse_layer_config(const std::string& json_text, const std::string& source,
                               std::optional<int> max_seq_cli) {
  Json j = parse_json(json_text, source);
  if (!j.is_object())
    config_error(
        fmt::format("{}: a layer config must be a JSON object, got {}", source, describe(j)));

  std::vector<std::string> names;
  for (const auto& f : fields()) names.push_back(f.name);

  LayerConfig c;
  std::set<std::string> seen;
  for (const auto& [key, value] : j.items()) {
    auto f = std::find_if(fields().begin(), fields().end(),
                          [&](const Field& x) { return key == x.name; });
    if (f == fields().end()) {
      const char* alias = known_alias(key);
      std::string hint = alias ? alias : closest_match(key, names);
      config_error(fmt::format("{}: unknown key '{}'{}", source, key,
                               hint.empty()
                                   ? std::string(" (see SPEC §2 for the layer config fields)")
                                   : fmt::format(" (did you mean '{}'?)", hint)));
    }
    seen.insert(key);
    std::visit(Overloaded{
                   [&](int LayerConfig::*m) { c.*m = read_int(value, source, key); },
                   [&](double LayerConfig::*m) { c.*m = read_number(value, source, key); },
                   [&](bool LayerConfig::*m) { c.*m = read_bool(value, source, key); },
                   [&](uint64_t LayerConfig::*m) { c.*m = read_seed(value, source, key); },
                   [&](GeluForm LayerConfig::*m) { c.*m = read_gelu(value, source, key); },
               },
               f->member);
  }

  std::vector<std::string> missing;
  for (const auto& f : fields())
    if (f.required && !seen.count(f.name)) missing.push_back(fmt::format("'{}'", f.name));
  if (!missing.empty())
    config_error(fmt::format("{}: missing required key{} {}", source, missing.size() > 1 ? "s" : "",
                             fmt::join(missing, ", ")));

  if (!seen.count("max_seq_length")) {
    if (!max_seq_cli)
      config_error(fmt::format("{}: max_seq_length is not in {} and --max_seq_length was not given",
                               source, source));
    c.max_seq_length = *max_seq_cli;
  } else if (max_seq_cli && *max_seq_cli != c.max_seq_length) {
    config_error(fmt::format(
        "{}: max_seq_length is {} in {} but --max_seq_length {} was given; drop one of them",
        source, c.max_seq_length, source, *max_seq_cli));
  }
  // DeepSpeed's convention: a non-positive intermediate_size (0, or its default -1) means 4 * H.
  if (c.intermediate_size == 0 || c.intermediate_size == -1)
    c.intermediate_size = 4 * c.hidden_size;

  validate(c, source);
  return c;
}

LayerConfig load_layer_config(const std::string& path, std::optional<int> max_seq_cli) {
  return parse_layer_config(read_text_file(path), path, max_seq_cli);
}

std::string to_json_text(const LayerConfig& c, int indent) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& f : fields()) {
    std::visit(
        Overloaded{
            [&](int LayerConfig::*m) { j[f.name] = c.*m; },
            [&](double LayerConfig::*m) { j[f.name] = c.*m; },  // shortest round-trip form
            [&](bool LayerConfig::*m) { j[f.name] = c.*m; },
            [&](uint64_t LayerConfig::*m) { j[f.name] = c.*m; },
            [&](GeluForm LayerConfig::*m) { j[f.name] = c.*m == GeluForm::Tanh ? "tanh" : "none"; },
        },
        f.member);
  }
  return j.dump(indent) + (indent >= 0 ? "\n" : "");
}

// ---------------------------------------------------------------------------------------------
// The guide's BertEncoder: DeepSpeedTransformerConfig(batch_size =
// ds_config.train_micro_batch_size_per_gpu, max_seq_length = args.max_seq_length, hidden_size =
// config.hidden_size, heads = config.num_attention_heads, ..., fp16 = ds_config.fp16_enabled).

LayerConfig derive_layer_config(const DeriveOptions& opt) {
  const std::string& ds_path = opt.deepspeed_config_path;
  const std::string& model_path = opt.model_config_path;
  Json ds = parse_object_file(ds_path, "DeepSpeed config");
  Json model_file = parse_object_file(model_path, "BERT model config");

  if (const Json* sa = find_key(ds, "sparse_attention");
      sa && !(sa->is_boolean() && !sa->get<bool>()))
    config_error(fmt::format(
        "{}: enables \"sparse_attention\", which the DeepSpeed transformer kernel does not support "
        "(the two cannot be used together); remove \"sparse_attention\" from the DeepSpeed config, "
        "or train without the transformer kernel",
        ds_path));

  LayerConfig c;
  // batch_size: DeepSpeed's micro batch per GPU. Without it, DeepSpeed derives it as
  // train_batch_size / (gradient_accumulation_steps * GPUs); a layer config is per GPU, and one
  // GPU is assumed here (the trainer checks the product against the real world size).
  if (const Json* mb = find_key(ds, "train_micro_batch_size_per_gpu")) {
    c.batch_size = read_int(*mb, ds_path, "train_micro_batch_size_per_gpu");
    if (c.batch_size <= 0)
      config_error(fmt::format("{}: train_micro_batch_size_per_gpu must be greater than 0, got {}",
                               ds_path, c.batch_size));
  } else if (const Json* tb = find_key(ds, "train_batch_size")) {
    int total = read_int(*tb, ds_path, "train_batch_size");
    int gas = 1;
    if (const Json* g = find_key(ds, "gradient_accumulation_steps"))
      gas = read_int(*g, ds_path, "gradient_accumulation_steps");
    if (total <= 0 || gas <= 0 || total % gas != 0)
      config_error(
          fmt::format("{}: train_batch_size ({}) must be a positive multiple of "
                      "gradient_accumulation_steps ({}); "
                      "or set train_micro_batch_size_per_gpu",
                      ds_path, total, gas));
    c.batch_size = total / gas;
  } else {
    config_error(fmt::format(
        "{}: neither train_micro_batch_size_per_gpu nor train_batch_size is set; the kernel's "
        "batch_size comes from train_micro_batch_size_per_gpu",
        ds_path));
  }
  if (c.batch_size > 65535)
    config_error(fmt::format("{}: micro batch size {} exceeds the supported maximum 65535", ds_path,
                             c.batch_size));

  auto enabled = [&](const char* section) {
    const Json* s = find_key(ds, section);
    if (!s) return false;
    if (!s->is_object())
      config_error(fmt::format("{}: {} must be an object like {{\"enabled\": true}}, got {}",
                               ds_path, section, describe(*s)));
    const Json* e = find_key(*s, "enabled");
    return e ? read_bool(*e, ds_path, fmt::format("{}.enabled", section)) : false;
  };
  c.fp16 = enabled("fp16");
  c.bf16 = enabled("bf16") || enabled("bfloat16");  // DeepSpeed accepts either spelling
  if (c.fp16 && c.bf16)
    config_error(fmt::format("{}: fp16.enabled and bf16.enabled are both true; enable at most one",
                             ds_path));

  // Model config: a Hugging Face style BertConfig, or bing_bert's --cf file, which nests it
  // under "bert_model_config".
  const Json* model = &model_file;
  if (const Json* nested = find_key(model_file, "bert_model_config")) {
    if (!nested->is_object())
      config_error(fmt::format("{}: bert_model_config must be an object, got {}", model_path,
                               describe(*nested)));
    model = nested;
  }
  auto required = [&](const char* key) -> const Json& {
    const Json* v = find_key(*model, key);
    if (!v) config_error(fmt::format("{}: missing required key '{}'", model_path, key));
    return *v;
  };
  c.hidden_size = read_int(required("hidden_size"), model_path, "hidden_size");
  c.heads = read_int(required("num_attention_heads"), model_path, "num_attention_heads");
  c.num_hidden_layers = read_int(required("num_hidden_layers"), model_path, "num_hidden_layers");
  c.attn_dropout_ratio = read_number(required("attention_probs_dropout_prob"), model_path,
                                     "attention_probs_dropout_prob");
  c.hidden_dropout_ratio =
      read_number(required("hidden_dropout_prob"), model_path, "hidden_dropout_prob");
  if (const Json* v = find_key(*model, "initializer_range"))  // BertConfig default 0.02
    c.initializer_range = read_number(*v, model_path, "initializer_range");
  if (const Json* v = find_key(*model, "intermediate_size"))
    c.intermediate_size = read_int(*v, model_path, "intermediate_size");
  if (c.intermediate_size == 0 || c.intermediate_size == -1)
    c.intermediate_size = 4 * c.hidden_size;
  if (const Json* v = find_key(*model, "layer_norm_eps"))
    c.layer_norm_eps = read_number(*v, model_path, "layer_norm_eps");
  if (const Json* v = find_key(*model, "hidden_act")) {
    if (!v->is_string())
      config_error(
          fmt::format("{}: hidden_act must be a string, got {}", model_path, describe(*v)));
    std::string act = v->get<std::string>();
    if (act == "gelu")
      c.gelu_approximation = GeluForm::Erf;
    else if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast")
      c.gelu_approximation = GeluForm::Tanh;
    else
      config_error(fmt::format(
          "{}: hidden_act \"{}\" is not supported by the transformer kernel (it fuses GELU: use "
          "\"gelu\", \"gelu_new\", \"gelu_pytorch_tanh\" or \"gelu_fast\")",
          model_path, act));
  }

  if (!opt.max_seq_length)
    config_error(
        fmt::format("{}: the kernel needs a maximum sequence length and --max_seq_length "
                    "was not given",
                    model_path));
  c.max_seq_length = *opt.max_seq_length;
  if (c.max_seq_length <= 0 || c.max_seq_length > 8192)
    config_error(fmt::format("--max_seq_length must be in [1, 8192], got {}", c.max_seq_length));
  if (const Json* v = find_key(*model, "max_position_embeddings")) {
    int max_pos = read_int(*v, model_path, "max_position_embeddings");
    if (c.max_seq_length > max_pos)
      config_error(
          fmt::format("{}: --max_seq_length {} exceeds max_position_embeddings {} of the model",
                      model_path, c.max_seq_length, max_pos));
  }

  c.local_rank = opt.local_rank;
  c.seed = opt.seed;
  c.pre_layer_norm = opt.pre_layer_norm;
  c.attn_dropout_checkpoint = opt.attention_dropout_checkpoint;
  c.normalize_invertible = opt.normalize_invertible;
  c.gelu_checkpoint = opt.gelu_checkpoint;
  c.stochastic_mode = opt.stochastic_mode;

  // Batch, dtype and sequence length were checked above against their own sources; what is
  // left comes from the model config.
  validate(c, model_path);
  return c;
}

}  // namespace dskc
