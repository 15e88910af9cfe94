// DeepSpeed JSON parsing for the trainer and DeepSpeed's batch-size rule (see ds_config.h).
#include "trainer/ds_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>

#include "compiler/config.h"
#include "compiler/fileio.h"
#include "compiler/json_read.h"

namespace dskc {
namespace {

using json_read::Json;

[[noreturn]] void fail(const std::string& msg) { throw Error(ErrorKind::Config, msg); }

std::optional<int> positive_int(const Json& ds, const char* key, const std::string& src) {
  const Json* v = json_read::find(ds, key);
  if (!v) return std::nullopt;
  const int64_t x = json_read::get_int(*v, src, key, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  if (x <= 0) fail(fmt::format("{}: {} must be greater than 0, got {}", src, key, x));
  return static_cast<int>(x);
}

// {"enabled": bool} sections; a bare boolean is accepted too.
bool section_enabled(const Json& ds, const char* section, const std::string& src) {
  const Json* s = json_read::find(ds, section);
  if (!s) return false;
  if (s->is_boolean()) return s->get<bool>();
  if (!s->is_object())
    fail(fmt::format("{}: {} must be an object like {{\"enabled\": true}}, got {}", src, section, json_read::describe(*s)));
  const Json* e = json_read::find(*s, "enabled");
  return e ? json_read::get_bool(*e, src, fmt::format("{}.enabled", section)) : false;
}

void read_optimizer(const Json& opt, const std::string& src, DsConfig& c) {
  using namespace json_read;
  if (!opt.is_object()) fail(fmt::format("{}: optimizer must be an object, got {}", src, describe(opt)));
  const Json* type = find(opt, "type");
  if (!type) fail(fmt::format("{}: optimizer.type is missing (use \"Adam\", \"AdamW\" or \"Lamb\")", src));
  std::string t = get_string(*type, src, "optimizer.type");
  std::string lower = t;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  OptimizerSettings& o = c.optimizer;
  if (lower == "adam") {
    o.type = OptimizerType::Adam;
  } else if (lower == "adamw") {
    o.type = OptimizerType::AdamW;
  } else if (lower == "lamb") {
    o.type = OptimizerType::Lamb;
  } else {
    std::string hint = closest_match(t, {"Adam", "AdamW", "Lamb"});
    fail(fmt::format("{}: optimizer.type \"{}\" is not supported by dskc train (use \"Adam\", \"AdamW\" or "
                     "\"Lamb\"){}",
                     src, t, hint.empty() ? "" : fmt::format("; did you mean \"{}\"?", hint)));
  }
  c.has_optimizer = true;
  const Json* params = find(opt, "params");
  if (!params) return;
  if (!params->is_object()) fail(fmt::format("{}: optimizer.params must be an object, got {}", src, describe(*params)));
  static const std::set<std::string> known = {"lr", "betas", "eps", "weight_decay", "bias_correction", "adam_w_mode",
                                              "max_grad_norm", "max_coeff", "min_coeff", "torch_adam",
                                              "eps_inside_sqrt", "amsgrad"};
  for (const auto& [key, value] : params->items()) {
    const std::string k = "optimizer.params." + key;
    if (!known.count(key)) {
      std::vector<std::string> names(known.begin(), known.end());
      std::string hint = closest_match(key, names);
      fail(fmt::format("{}: unknown optimizer parameter '{}'{}", src, k,
                       hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
    }
    if (value.is_null()) continue;
    if (key == "lr") {
      o.lr = get_number(value, src, k);
      if (!(o.lr >= 0.0)) fail(fmt::format("{}: {} must be >= 0, got {}", src, k, o.lr));
    } else if (key == "betas") {
      if (!value.is_array() || value.size() != 2)
        fail(fmt::format("{}: {} must be an array of two numbers like [0.9, 0.999], got {}", src, k, describe(value)));
      o.beta1 = get_number(value[0], src, k + "[0]");
      o.beta2 = get_number(value[1], src, k + "[1]");
      for (double b : {o.beta1, o.beta2})
        if (!(b >= 0.0 && b < 1.0)) fail(fmt::format("{}: {} must lie in [0, 1), got {}", src, k, b));
    } else if (key == "eps") {
      o.eps = get_number(value, src, k);
    } else if (key == "weight_decay") {
      o.weight_decay = get_number(value, src, k);
    } else if (key == "bias_correction") {
      o.bias_correction = get_bool(value, src, k);
    } else if (key == "adam_w_mode") {
      o.adam_w_mode = get_bool(value, src, k);
    } else if (key == "max_grad_norm") {
      o.max_grad_norm = get_number(value, src, k);
    } else if (key == "max_coeff") {
      o.max_coeff = get_number(value, src, k);
    } else if (key == "min_coeff") {
      o.min_coeff = get_number(value, src, k);
    } else if (key == "amsgrad" && get_bool(value, src, k)) {
      fail(fmt::format("{}: {} is not supported (DeepSpeed's fused Adam does not support it either)", src, k));
    }
  }
}

void read_fp16(const Json& ds, const std::string& src, DsConfig& c) {
  using namespace json_read;
  LossScalerConfig& s = c.fp16_scaler;
  s.enabled = c.fp16;
  const Json* f = find(ds, "fp16");
  if (!f || !f->is_object()) return;
  if (const Json* v = find(*f, "loss_scale")) {
    s.static_scale = get_number(*v, src, "fp16.loss_scale");
    if (s.static_scale < 0.0) fail(fmt::format("{}: fp16.loss_scale must be 0 (dynamic) or positive, got {}", src, s.static_scale));
  }
  if (const Json* v = find(*f, "initial_scale_power"))
    s.initial_scale_power = static_cast<int>(get_int(*v, src, "fp16.initial_scale_power", 0, 126));
  if (const Json* v = find(*f, "loss_scale_window"))
    s.loss_scale_window = get_int(*v, src, "fp16.loss_scale_window", 1, std::numeric_limits<int64_t>::max());
  if (const Json* v = find(*f, "hysteresis")) s.hysteresis = static_cast<int>(get_int(*v, src, "fp16.hysteresis", 1, 1 << 20));
  if (const Json* v = find(*f, "min_loss_scale")) {
    s.min_loss_scale = get_number(*v, src, "fp16.min_loss_scale");
    if (!(s.min_loss_scale > 0.0)) fail(fmt::format("{}: fp16.min_loss_scale must be positive, got {}", src, s.min_loss_scale));
  }
}

}  // namespace

DsConfig parse_ds_config(const std::string& json_text, const std::string& source) {
  using namespace json_read;
  Json ds = parse(json_text, source);
  if (!ds.is_object())
    fail(fmt::format("{}: a DeepSpeed config must be a JSON object, got {}", source, describe(ds)));
  DsConfig c;
  c.source = source;
  c.train_batch_size = positive_int(ds, "train_batch_size", source);
  c.micro_batch = positive_int(ds, "train_micro_batch_size_per_gpu", source);
  c.gradient_accumulation_steps = positive_int(ds, "gradient_accumulation_steps", source);
  if (auto p = positive_int(ds, "steps_per_print", source)) c.steps_per_print = *p;
  if (const Json* o = find(ds, "optimizer")) read_optimizer(*o, source, c);
  if (const Json* g = find(ds, "gradient_clipping")) {
    const double clip = get_number(*g, source, "gradient_clipping");
    if (clip < 0.0) fail(fmt::format("{}: gradient_clipping must be >= 0, got {}", source, clip));
    if (clip > 0.0) c.optimizer.max_grad_norm = clip;
  }
  c.fp16 = section_enabled(ds, "fp16", source);
  c.bf16 = section_enabled(ds, "bf16", source) || section_enabled(ds, "bfloat16", source);
  if (c.fp16 && c.bf16) fail(fmt::format("{}: fp16.enabled and bf16.enabled are both true; enable at most one", source));
  read_fp16(ds, source, c);
  if (const Json* sa = find(ds, "sparse_attention")) c.sparse_attention = !(sa->is_boolean() && !sa->get<bool>());
  if (const Json* fa = find(ds, "fp32_allreduce")) c.fp32_allreduce = get_bool(*fa, source, "fp32_allreduce");

  static const std::set<std::string> handled = {
      "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "steps_per_print",
      "optimizer",        "gradient_clipping",              "fp16",                        "bf16",
      "bfloat16",         "sparse_attention",               "fp32_allreduce"};
  for (const auto& [key, value] : ds.items())
    if (!handled.count(key)) c.ignored_keys.push_back(key);
  return c;
}

DsConfig load_ds_config(const std::string& path) { return parse_ds_config(read_file_bytes(path), path); }

BatchSizes resolve_batch_sizes(const BatchSizeInputs& in, int world_size, const std::string& source) {
  if (world_size < 1) fail(fmt::format("WORLD_SIZE {} must be at least 1", world_size));
  BatchSizes b;
  b.world_size = world_size;
  const auto& tb = in.train_batch_size;
  const auto& mb = in.micro_batch;
  const auto& ga = in.accumulation;
  if (tb && mb && ga) {
    b = {*tb, *mb, *ga, world_size};
  } else if (tb && mb) {
    b = {*tb, *mb, std::max(1, *tb / *mb / world_size), world_size};
  } else if (tb && ga) {
    b = {*tb, std::max(1, *tb / world_size / *ga), *ga, world_size};
  } else if (mb && ga) {
    b = {*mb * *ga * world_size, *mb, *ga, world_size};
  } else if (tb) {
    b = {*tb, std::max(1, *tb / world_size), 1, world_size};
  } else if (mb) {
    b = {*mb * world_size, *mb, 1, world_size};
  } else {
    fail(fmt::format("{}: neither train_batch_size nor train_micro_batch_size_per_gpu is set (give one of them, "
                     "or --train_batch_size)",
                     source));
  }
  const int64_t product = static_cast<int64_t>(b.micro_batch) * b.accumulation * b.world_size;
  if (product != b.train_batch_size) {
    auto describe_value = [](const char* name, const std::optional<int>& given, const std::string& origin, int value) {
      return given ? fmt::format("{} {} (from {})", name, value, origin) : fmt::format("{} {} (derived)", name, value);
    };
    fail(fmt::format(
        "{}: inconsistent batch sizes: train_batch_size must equal train_micro_batch_size_per_gpu × "
        "gradient_accumulation_steps × world size, but {} != {} × {} × world size {} (= {}); fix one of them "
        "(any one of the three may be left out and is then derived)",
        source, describe_value("train_batch_size", tb, in.train_batch_size_origin, b.train_batch_size),
        describe_value("micro batch", mb, in.micro_batch_origin, b.micro_batch),
        describe_value("gradient_accumulation_steps", ga, in.accumulation_origin, b.accumulation), b.world_size,
        product));
  }
  return b;
}

}  // namespace dskc
