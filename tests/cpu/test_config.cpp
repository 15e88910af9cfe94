// Layer config tests (SPEC §2, §7): defaults, round trips, --max_seq_length fallback, the guide's
// BertEncoder derivation from the examples/ files, and a table of bad inputs, each of which must
// give an Error of the right kind whose message names the file and the offending key.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "compiler/config.h"
#include "compiler/errors.h"
#include "tests/test_util.h"

using namespace dskc;
using dskc_test::source_dir;
using dskc_test::TempDir;
using dskc_test::write_file;

using dskc_test::error_of;

namespace {

// A valid layer config body without braces, so cases can add or replace keys.
const std::string kBase =
    R"("batch_size": 8, "max_seq_length": 128, "hidden_size": 256, "heads": 4,
       "attn_dropout_ratio": 0.1, "hidden_dropout_ratio": 0.1, "num_hidden_layers": 2,
       "initializer_range": 0.02, "seed": 7)";

// kBase with `key` removed (every key in kBase is followed by a comma or ends the text).
std::string without(const std::string& key) {
  std::string s = kBase;
  size_t p = s.find("\"" + key + "\"");
  REQUIRE(p != std::string::npos);
  size_t end = s.find(',', p);
  if (end == std::string::npos) {  // last key: drop the comma before it instead
    size_t comma = s.rfind(',', p);
    return s.substr(0, comma);
  }
  return s.substr(0, p) + s.substr(end + 1);
}
// kBase with `key` set to `value` (raw JSON).
std::string with(const std::string& key, const std::string& value,
                 const std::string& base = kBase) {
  std::string s = base;
  size_t p = s.find("\"" + key + "\"");
  if (p == std::string::npos) return s + ", \"" + key + "\": " + value;
  size_t colon = s.find(':', p), end = s.find(',', colon);
  if (end == std::string::npos) end = s.size();
  return s.substr(0, colon + 1) + " " + value + s.substr(end);
}
std::string obj(const std::string& body) { return "{" + body + "}"; }

std::string examples(const std::string& name) { return source_dir() + "/examples/" + name; }


}  // namespace

TEST_CASE("bad layer configs name the file and the key") {
  struct Case {
    const char* name;
    std::string json;
    std::vector<std::string> must_contain;  // besides the file name
    std::optional<int> max_seq_cli = std::nullopt;
  };
  const std::vector<Case> cases = {
      {"malformed JSON", "{\"batch_size\": 8,\n  \"heads\" 4}", {":2:11:", "malformed JSON"}},
      {"truncated JSON", "{\"batch_size\": 8,", {"malformed JSON"}},
      {"not an object", "[1, 2]", {"JSON object"}},
      {"duplicate key", obj(kBase + ", \"heads\": 8"), {"duplicate key", "heads"}},
      {"unknown key with suggestion",
       obj(kBase + ", \"hiden_size\": 3"),
       {"unknown key 'hiden_size'", "did you mean 'hidden_size'?"}},
      {"model-config name",
       obj(kBase + ", \"num_attention_heads\": 4"),
       {"num_attention_heads", "did you mean 'heads'?"}},
      {"string for int",
       obj(with("hidden_size", "\"1024\"")),
       {"hidden_size", "must be an integer", "\"1024\""}},
      {"float for int", obj(with("batch_size", "8.0")), {"batch_size", "must be an integer"}},
      {"bool for number",
       obj(with("attn_dropout_ratio", "true")),
       {"attn_dropout_ratio", "must be a number"}},
      {"number for bool", obj(with("fp16", "1")), {"fp16", "must be true or false"}},
      {"negative seed", obj(with("seed", "-1")), {"seed", "non-negative integer"}},
      {"int overflow", obj(with("hidden_size", "4294967296")), {"hidden_size", "out of range"}},
      {"hidden not divisible by heads",
       obj(with("heads", "3")),
       {"hidden_size (256)", "heads (3)", "divisible"}},
      {"head dim > 256",
       obj(with("heads", "1", with("hidden_size", "512"))),
       {"head dimension", "512", "256"}},
      {"attn dropout 1.0",
       obj(with("attn_dropout_ratio", "1.0")),
       {"attn_dropout_ratio", "[0, 1)"}},
      {"hidden dropout -0.1",
       obj(with("hidden_dropout_ratio", "-0.1")),
       {"hidden_dropout_ratio", "[0, 1)"}},
      {"fp16 with bf16", obj(kBase + ", \"fp16\": true, \"bf16\": true"), {"fp16", "bf16"}},
      {"zero batch", obj(with("batch_size", "0")), {"batch_size", "greater than 0"}},
      {"zero hidden", obj(with("hidden_size", "0")), {"hidden_size", "greater than 0"}},
      {"zero heads", obj(with("heads", "0")), {"heads", "greater than 0"}},
      {"zero seq", obj(with("max_seq_length", "0")), {"max_seq_length", "greater than 0"}},
      {"seq too long", obj(with("max_seq_length", "8193")), {"max_seq_length", "8192"}},
      {"batch too large", obj(with("batch_size", "65536")), {"batch_size", "65535"}},
      {"negative intermediate", obj(with("intermediate_size", "-5")), {"intermediate_size"}},
      {"zero eps", obj(kBase + ", \"layer_norm_eps\": 0"), {"layer_norm_eps"}},
      {"local_rank -2", obj(kBase + ", \"local_rank\": -2"), {"local_rank"}},
      {"negative init range", obj(with("initializer_range", "-0.02")), {"initializer_range"}},
      {"zero layers", obj(with("num_hidden_layers", "0")), {"num_hidden_layers"}},
      {"missing hidden_size",
       obj(without("hidden_size")),
       {"missing required key", "'hidden_size'"}},
      {"missing seed", obj(without("seed")), {"missing required key", "'seed'"}},
      {"missing several",
       obj("\"batch_size\": 8"),
       {"missing required keys", "'hidden_size'", "'heads'", "'seed'"}},
      {"missing max_seq without CLI",
       obj(without("max_seq_length")),
       {"max_seq_length is not in", "--max_seq_length was not given"}},
      {"max_seq in JSON and CLI disagree",
       obj(kBase),
       {"max_seq_length", "--max_seq_length 512"},
       512},
      {"unknown gelu_approximation",
       obj(kBase + ", \"gelu_approximation\": \"tanhh\""),
       {"gelu_approximation", "\"tanhh\"", "did you mean \"tanh\"?"}},
      {"erf spelled out",
       obj(kBase + ", \"gelu_approximation\": \"erf\""),
       {"gelu_approximation", "did you mean \"none\"?"}},
      {"gelu_approximation not a string",
       obj(kBase + ", \"gelu_approximation\": false"),
       {"gelu_approximation"}},
  };
  TempDir tmp;
  for (const auto& c : cases) {
    CAPTURE(c.name);
    std::string path = tmp / "layer.json";
    write_file(path, c.json);
    std::string msg = error_of([&] { load_layer_config(path, c.max_seq_cli); }, ErrorKind::Config);
    CAPTURE(msg);
    CHECK(msg.rfind(path, 0) == 0);  // starts with the file name
    for (const auto& s : c.must_contain) CHECK(msg.find(s) != std::string::npos);
  }
}

TEST_CASE("bad DeepSpeed / model configs for the derivation") {
  TempDir tmp;
  const std::string model = examples("bert_large_adam_seq128.json");
  const std::string ds = examples("deepspeed_bsz4096_adam_config.json");
  struct Case {
    const char* name;
    std::string ds_json;     // empty: use the example file
    std::string model_json;  // empty: use the example file
    std::vector<std::string> must_contain;
    bool names_ds = true;  // the message starts with the DeepSpeed config's path, else the model's
  };
  const std::vector<Case> cases = {
      {"no batch", R"({"steps_per_print": 10})", "", {"train_micro_batch_size_per_gpu"}},
      {"batch not divisible",
       R"({"train_batch_size": 10, "gradient_accumulation_steps": 4})",
       "",
       {"train_batch_size (10)", "gradient_accumulation_steps (4)"}},
      {"fp16 not an object",
       R"({"train_micro_batch_size_per_gpu": 8, "fp16": true})",
       "",
       {"fp16", "enabled"}},
      {"fp16.enabled not bool",
       R"({"train_micro_batch_size_per_gpu": 8, "fp16": {"enabled": 1}})",
       "",
       {"fp16.enabled", "true or false"}},
      {"fp16 and bf16",
       R"({"train_micro_batch_size_per_gpu": 8, "fp16": {"enabled": true}, "bf16": {"enabled": true}})",
       "",
       {"fp16.enabled", "bf16.enabled"}},
      {"malformed DeepSpeed JSON",
       "{\n\"train_micro_batch_size_per_gpu\": 8,,\n}",
       "",
       {":2:", "malformed JSON"}},
      {"missing heads",
       "",
       R"({"hidden_size": 64, "num_hidden_layers": 2,
        "attention_probs_dropout_prob": 0.1, "hidden_dropout_prob": 0.1})",
       {"num_attention_heads"},
       false},
      {"heads do not divide",
       "",
       R"({"hidden_size": 100, "num_attention_heads": 3,
        "num_hidden_layers": 2, "attention_probs_dropout_prob": 0.1, "hidden_dropout_prob": 0.1})",
       {"hidden_size (100)", "heads (3)"},
       false},
      {"unsupported activation",
       "",
       R"({"hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": 2, "attention_probs_dropout_prob": 0.1, "hidden_dropout_prob": 0.1,
        "hidden_act": "relu"})",
       {"hidden_act", "relu"},
       false},
      {"seq beyond position embeddings",
       "",
       R"({"hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": 2, "attention_probs_dropout_prob": 0.1, "hidden_dropout_prob": 0.1,
        "max_position_embeddings": 64})",
       {"max_position_embeddings 64", "128"},
       false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    DeriveOptions o;
    o.deepspeed_config_path = ds;
    o.model_config_path = model;
    o.max_seq_length = 128;
    if (!c.ds_json.empty()) write_file(o.deepspeed_config_path = tmp / "ds.json", c.ds_json);
    if (!c.model_json.empty()) write_file(o.model_config_path = tmp / "model.json", c.model_json);
    std::string msg = error_of([&] { derive_layer_config(o); }, ErrorKind::Config);
    CAPTURE(msg);
    CHECK(msg.rfind(c.names_ds ? o.deepspeed_config_path : o.model_config_path, 0) == 0);
    for (const auto& s : c.must_contain) CHECK(msg.find(s) != std::string::npos);
  }
}

TEST_CASE("sparse attention in the DeepSpeed config is rejected") {
  DeriveOptions o;
  o.deepspeed_config_path = examples("deepspeed_sparse_attention_config.json");
  o.model_config_path = examples("bert_large_adam_seq128.json");
  o.max_seq_length = 128;
  std::string msg = error_of([&] { derive_layer_config(o); }, ErrorKind::Config);
  CHECK(msg.rfind(o.deepspeed_config_path, 0) == 0);
  CHECK(msg.find("sparse_attention") != std::string::npos);
  CHECK(msg.find("does not support") != std::string::npos);
  CHECK(msg.find("remove") != std::string::npos);

  TempDir tmp;  // an explicit null section is not "enabled"
  write_file(tmp / "ds.json", R"({"train_micro_batch_size_per_gpu": 4, "sparse_attention": null})");
  o.deepspeed_config_path = tmp / "ds.json";
  CHECK(derive_layer_config(o).batch_size == 4);
}

TEST_CASE("missing files are I/O errors naming the path") {
  const std::string missing = "/nonexistent/dir/layer.json";
  std::string msg = error_of([&] { load_layer_config(missing); }, ErrorKind::Io);
  CHECK(msg.rfind(missing + ": cannot open", 0) == 0);

  DeriveOptions o;
  o.deepspeed_config_path = examples("deepspeed_bsz4096_adam_config.json");
  o.model_config_path = "/nonexistent/model.json";
  o.max_seq_length = 128;
  msg = error_of([&] { derive_layer_config(o); }, ErrorKind::Io);
  CHECK(msg.rfind("/nonexistent/model.json: cannot open", 0) == 0);
}

TEST_CASE("defaults") {
  LayerConfig c = parse_layer_config(obj(kBase), "defaults.json");
  CHECK(c.batch_size == 8);
  CHECK(c.max_seq_length == 128);
  CHECK(c.intermediate_size == 4 * 256);
  CHECK(c.layer_norm_eps == 1e-12);
  CHECK(c.local_rank == -1);
  CHECK(c.seed == 7);
  CHECK_FALSE(c.fp16);
  CHECK_FALSE(c.bf16);
  CHECK(c.dtype() == DType::F32);
  CHECK(c.pre_layer_norm);
  CHECK_FALSE(c.attn_dropout_checkpoint);
  CHECK_FALSE(c.normalize_invertible);
  CHECK_FALSE(c.gelu_checkpoint);
  CHECK_FALSE(c.stochastic_mode);
  CHECK(c.adjust_init_range);
  CHECK(c.training);
  CHECK(c.gelu_approximation == GeluForm::Erf);
  CHECK(c.head_dim() == 64);

  // 0 and DeepSpeed's -1 sentinel both mean 4 * hidden_size.
  CHECK(parse_layer_config(obj(with("intermediate_size", "0")), "x.json").intermediate_size ==
        1024);
  CHECK(parse_layer_config(obj(with("intermediate_size", "-1")), "x.json").intermediate_size ==
        1024);
  // Integers are fine where numbers are expected; seeds may use the whole uint64 range.
  LayerConfig d = parse_layer_config(
      obj(with("seed", "18446744073709551615", with("attn_dropout_ratio", "0"))), "x.json");
  CHECK(d.attn_dropout_ratio == 0.0);
  CHECK(d.seed == 18446744073709551615ull);
}

TEST_CASE("max_seq_length from the command line") {
  const std::string json = obj(without("max_seq_length") + ", \"intermediate_size\": 512");
  LayerConfig c = parse_layer_config(json, "ds_style.json", 384);
  CHECK(c.max_seq_length == 384);
  CHECK(c.intermediate_size == 512);
  // Both given and equal is fine.
  CHECK(parse_layer_config(obj(kBase), "x.json", 128).max_seq_length == 128);
}

TEST_CASE("to_json_text round trips") {
  std::vector<LayerConfig> configs;
  configs.push_back(parse_layer_config(obj(kBase), "a.json"));
  configs.push_back(load_layer_config(examples("bert_large_layer.json")));
  configs.push_back(load_layer_config(examples("bert_large_layer_seq512.json")));
  configs.push_back(load_layer_config(examples("tiny_layer.json")));
  LayerConfig odd = configs[0];
  odd.bf16 = true;
  odd.pre_layer_norm = false;
  odd.attn_dropout_checkpoint = odd.normalize_invertible = odd.gelu_checkpoint = true;
  odd.stochastic_mode = true;
  odd.adjust_init_range = odd.training = false;
  odd.gelu_approximation = GeluForm::Tanh;
  odd.attn_dropout_ratio = 1.0 / 3.0;
  odd.hidden_dropout_ratio = 0.0;
  odd.layer_norm_eps = 1e-5;
  odd.initializer_range = 0.0;
  odd.local_rank = 3;
  odd.seed = 0xFFFFFFFFFFFFFFFFull;
  odd.intermediate_size = 1000;
  configs.push_back(odd);
  for (const auto& c : configs) {
    std::string text = to_json_text(c);
    CAPTURE(text);
    CHECK(parse_layer_config(text, "roundtrip.json") == c);
    CHECK(parse_layer_config(to_json_text(c, -1), "roundtrip.json") == c);
    CHECK(to_json_text(parse_layer_config(text, "roundtrip.json")) == text);  // stable bytes
  }
  std::string t = to_json_text(odd);
  CHECK(t.find("\"gelu_approximation\": \"tanh\"") != std::string::npos);
  CHECK(t.find("\"seed\": 18446744073709551615") != std::string::npos);
}

TEST_CASE("example layer configs") {
  LayerConfig c = load_layer_config(examples("bert_large_layer.json"));
  CHECK(c.batch_size == 64);
  CHECK(c.max_seq_length == 128);
  CHECK(c.hidden_size == 1024);
  CHECK(c.heads == 16);
  CHECK(c.intermediate_size == 4096);
  CHECK(c.num_hidden_layers == 24);
  CHECK(c.dtype() == DType::F16);
  CHECK(c.seed == 42);
  LayerConfig s = load_layer_config(examples("bert_large_layer_seq512.json"));
  CHECK(s.batch_size == 16);
  CHECK(s.max_seq_length == 512);
  LayerConfig t = load_layer_config(examples("tiny_layer.json"));
  CHECK(t.dtype() == DType::F32);
  CHECK(t.head_dim() == 16);
}

TEST_CASE("derivation from the guide's DeepSpeed and model configs") {
  DeriveOptions o;
  o.deepspeed_config_path = examples("deepspeed_bsz4096_adam_config.json");
  o.model_config_path = examples("bert_large_adam_seq128.json");
  o.max_seq_length = 128;
  o.attention_dropout_checkpoint = true;
  o.gelu_checkpoint = true;
  o.local_rank = 2;
  o.seed = 1234;
  LayerConfig c = derive_layer_config(o);
  CHECK(c.batch_size == 64);
  CHECK(c.max_seq_length == 128);
  CHECK(c.fp16);
  CHECK_FALSE(c.bf16);
  CHECK(c.hidden_size == 1024);
  CHECK(c.heads == 16);
  CHECK(c.num_hidden_layers == 24);
  CHECK(c.attn_dropout_ratio == 0.1);
  CHECK(c.hidden_dropout_ratio == 0.1);
  CHECK(c.intermediate_size == 4096);
  CHECK(c.initializer_range == 0.02);
  CHECK(c.gelu_approximation == GeluForm::Erf);
  CHECK(c.attn_dropout_checkpoint);
  CHECK_FALSE(c.normalize_invertible);
  CHECK(c.gelu_checkpoint);
  CHECK_FALSE(c.stochastic_mode);
  CHECK(c.pre_layer_norm);
  CHECK(c.local_rank == 2);
  CHECK(c.seed == 1234);

  // The derived config equals the guide's standalone layer config with the same flags.
  LayerConfig standalone = load_layer_config(examples("bert_large_layer.json"));
  standalone.attn_dropout_checkpoint = standalone.gelu_checkpoint = true;
  standalone.local_rank = 2;
  standalone.seed = 1234;
  CHECK(c == standalone);

  // Lamb seq512 run of the guide: micro batch 16.
  o.deepspeed_config_path = examples("deepspeed_bsz32K_lamb_config_seq512.json");
  o.model_config_path = examples("bert_large_lamb.json");
  o.max_seq_length = 512;
  o.normalize_invertible = o.stochastic_mode = true;
  LayerConfig l = derive_layer_config(o);
  CHECK(l.batch_size == 16);
  CHECK(l.max_seq_length == 512);
  CHECK(l.fp16);
  CHECK(l.normalize_invertible);
  CHECK(l.stochastic_mode);

  // The tiny model for quick runs.
  o.model_config_path = examples("bert_tiny_model.json");
  o.max_seq_length = 64;
  LayerConfig tiny = derive_layer_config(o);
  CHECK(tiny.hidden_size == 128);
  CHECK(tiny.heads == 2);
  CHECK(tiny.intermediate_size == 512);
}

TEST_CASE("derivation variants") {
  TempDir tmp;
  DeriveOptions o;
  o.max_seq_length = 128;
  o.model_config_path = examples("bert_large_lamb.json");

  // train_batch_size / gradient_accumulation_steps when the micro batch is not given; bf16.
  write_file(
      o.deepspeed_config_path = tmp / "ds.json",
      R"({"train_batch_size": 256, "gradient_accumulation_steps": 4, "bf16": {"enabled": true}})");
  LayerConfig c = derive_layer_config(o);
  CHECK(c.batch_size == 64);
  CHECK(c.dtype() == DType::BF16);

  // bing_bert's --cf format nests the BertConfig under "bert_model_config"; tanh GELU; eps.
  write_file(o.model_config_path = tmp / "bing.json", R"({"name": "bing_bert_large",
      "bert_model_config": {"vocab_size_or_config_json_file": 119547, "hidden_size": 768,
        "num_hidden_layers": 12, "num_attention_heads": 12, "hidden_act": "gelu_new",
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.05,
        "layer_norm_eps": 1e-5, "max_position_embeddings": 512}})");
  LayerConfig b = derive_layer_config(o);
  CHECK(b.hidden_size == 768);
  CHECK(b.intermediate_size == 3072);
  CHECK(b.gelu_approximation == GeluForm::Tanh);
  CHECK(b.layer_norm_eps == 1e-5);
  CHECK(b.hidden_dropout_ratio == 0.0);
  CHECK(b.attn_dropout_ratio == 0.05);

  // No --max_seq_length: the derivation has nowhere else to take it from.
  o.max_seq_length.reset();
  std::string msg = error_of([&] { derive_layer_config(o); }, ErrorKind::Config);
  CHECK(msg.find("--max_seq_length") != std::string::npos);
}

TEST_CASE("closest_match") {
  const std::vector<std::string> keys = {"hidden_size", "heads", "batch_size", "max_seq_length"};
  CHECK(closest_match("hiden_size", keys) == "hidden_size");
  CHECK(closest_match("Hidden_Size", keys) == "hidden_size");
  CHECK(closest_match("head", keys) == "heads");
  CHECK(closest_match("max_seq_len", keys) == "max_seq_length");
  CHECK(closest_match("learning_rate", keys).empty());
  CHECK(closest_match("ab", {"ls"}).empty());
  CHECK(closest_match("x", {}).empty());
}

TEST_CASE("dtype helpers") {
  CHECK(std::string(dtype_name(DType::F32)) == "fp32");
  CHECK(std::string(dtype_name(DType::F16)) == "fp16");
  CHECK(std::string(dtype_name(DType::BF16)) == "bf16");
  CHECK(std::string(dtype_cuda_type(DType::F32)) == "float");
  CHECK(std::string(dtype_cuda_type(DType::F16)) == "__half");
  CHECK(std::string(dtype_cuda_type(DType::BF16)) == "__nv_bfloat16");
  CHECK(dtype_bytes(DType::F32) == 4);
  CHECK(dtype_bytes(DType::F16) == 2);
  CHECK(dtype_bytes(DType::BF16) == 2);
}
