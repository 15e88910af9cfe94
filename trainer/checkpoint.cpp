// Checkpoint save / load with validation (layout and atomicity in checkpoint.h).
#include "trainer/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <set>

#include "compiler/errors.h"
#include "compiler/fileio.h"
#include "compiler/json_read.h"

namespace dskc {
namespace {

namespace fs = std::filesystem;
using json_read::Json;

[[noreturn]] void input_error(const std::string& msg) { throw Error(ErrorKind::Input, msg); }

std::vector<double> to_doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<float> tensor_to_floats(const StTensor& t, const std::string& path, const std::string& name) {
  if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16" && t.dtype != "F64")
    input_error(fmt::format("{}: tensor '{}' has dtype {}; weights must be F32, F16, BF16 or F64", path, name, t.dtype));
  std::vector<double> d = tensor_to_doubles(t);
  return {d.begin(), d.end()};
}

// name -> fp32 values, with shapes checked against specs (prefix: "master." etc.).
ParamMap read_tensors(const SafeTensorsFile& f, const std::string& path, const std::vector<ModelParamSpec>& specs,
                      const std::string& prefix) {
  ParamMap out;
  std::set<std::string> known;
  for (const ModelParamSpec& s : specs) {
    const std::string name = prefix + s.name;
    known.insert(name);
    auto it = f.tensors.find(name);
    if (it == f.tensors.end()) input_error(fmt::format("{}: tensor '{}' is missing", path, name));
    if (it->second.shape != s.shape)
      input_error(fmt::format("{}: tensor '{}' has shape [{}], the model needs [{}]", path, name,
                              fmt::join(it->second.shape, ","), fmt::join(s.shape, ",")));
    out[name] = tensor_to_floats(it->second, path, name);
  }
  for (const auto& [name, t] : f.tensors)
    if (!known.count(name))
      input_error(fmt::format("{}: unexpected tensor '{}' (not part of this model's checkpoint)", path, name));
  return out;
}

std::string read_text(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) input_error(fmt::format("{}: missing (not a complete dskc checkpoint)", path));
  return read_file_bytes(path);
}

}  // namespace

std::string to_json_text(const TrainerState& s) {
  nlohmann::ordered_json j;
  j["format"] = "dskc-trainer-state";
  j["version"] = 1;
  j["step"] = s.step;
  j["optimizer_steps"] = s.optimizer_steps;
  j["skipped_steps"] = s.skipped_steps;
  j["loss_scaler"] = {{"scale", s.scaler.scale},
                      {"iteration", s.scaler.iteration},
                      {"last_overflow_iteration", s.scaler.last_overflow_iteration},
                      {"hysteresis_left", s.scaler.hysteresis_left}};
  j["data_position"] = {{"epoch", s.data.epoch}, {"shard", s.data.shard}, {"sample", s.data.sample}, {"taken", s.data.taken}};
  j["data_total_samples"] = s.data_total_samples;
  j["max_seq_length"] = s.max_seq_length;
  j["micro_batch"] = s.micro_batch;
  j["gradient_accumulation_steps"] = s.accumulation;
  j["world_size"] = s.world_size;
  j["rng"] = {{"seed", s.seed},
              {"kind", "philox4x32-10 counters keyed by (seed, layer, step * accumulation + micro); data order "
                       "keyed by (seed, epoch, shard)"}};
  j["lr_schedule"] = {{"name", s.lr_schedule}, {"origin_step", s.lr_origin_step}};
  j["dtype"] = s.dtype;
  j["config_hash"] = s.config_hash;
  return j.dump(2) + "\n";
}

TrainerState parse_trainer_state(const std::string& text, const std::string& src) {
  using namespace json_read;
  const ErrorKind K = ErrorKind::Input;
  Json j = parse(text, src, K);
  auto req = [&](const Json& obj, const char* key, const std::string& path) -> const Json& {
    const Json* v = find(obj, key);
    if (!v) throw Error(K, fmt::format("{}: missing key '{}'", src, path));
    return *v;
  };
  auto i64 = [&](const Json& obj, const char* key, const std::string& path, int64_t lo = INT64_MIN) {
    return get_int(req(obj, key, path), src, path, lo, INT64_MAX, K);
  };
  if (!j.is_object() || !find(j, "format") || j["format"] != "dskc-trainer-state")
    throw Error(K, fmt::format("{}: not a dskc trainer state (no \"format\": \"dskc-trainer-state\")", src));
  TrainerState s;
  s.step = i64(j, "step", "step", 0);
  s.optimizer_steps = i64(j, "optimizer_steps", "optimizer_steps", 0);
  s.skipped_steps = i64(j, "skipped_steps", "skipped_steps", 0);
  const Json& ls = req(j, "loss_scaler", "loss_scaler");
  s.scaler.scale = get_number(req(ls, "scale", "loss_scaler.scale"), src, "loss_scaler.scale", K);
  s.scaler.iteration = i64(ls, "iteration", "loss_scaler.iteration");
  s.scaler.last_overflow_iteration = i64(ls, "last_overflow_iteration", "loss_scaler.last_overflow_iteration");
  s.scaler.hysteresis_left = static_cast<int>(i64(ls, "hysteresis_left", "loss_scaler.hysteresis_left"));
  const Json& dp = req(j, "data_position", "data_position");
  s.data.epoch = static_cast<uint64_t>(i64(dp, "epoch", "data_position.epoch", 0));
  s.data.shard = static_cast<uint64_t>(i64(dp, "shard", "data_position.shard", 0));
  s.data.sample = static_cast<uint64_t>(i64(dp, "sample", "data_position.sample", 0));
  // "taken" came with multi-GPU training; older states lack it (0: resume by epoch/shard/sample).
  if (find(dp, "taken")) s.data.taken = static_cast<uint64_t>(i64(dp, "taken", "data_position.taken", 0));
  s.data_total_samples = static_cast<uint64_t>(i64(j, "data_total_samples", "data_total_samples", 0));
  s.max_seq_length = static_cast<int>(i64(j, "max_seq_length", "max_seq_length", 0));
  s.micro_batch = static_cast<int>(i64(j, "micro_batch", "micro_batch", 0));
  s.accumulation = static_cast<int>(i64(j, "gradient_accumulation_steps", "gradient_accumulation_steps", 0));
  s.world_size = static_cast<int>(i64(j, "world_size", "world_size", 1));
  const Json& rng = req(j, "rng", "rng");
  const Json& seed = req(rng, "seed", "rng.seed");
  if (!seed.is_number_unsigned() && !(seed.is_number_integer() && seed.get<int64_t>() >= 0))
    throw Error(K, fmt::format("{}: rng.seed must be a non-negative integer", src));
  s.seed = seed.get<uint64_t>();
  const Json& lr = req(j, "lr_schedule", "lr_schedule");
  s.lr_schedule = get_string(req(lr, "name", "lr_schedule.name"), src, "lr_schedule.name", K);
  s.lr_origin_step = i64(lr, "origin_step", "lr_schedule.origin_step", 0);
  s.dtype = get_string(req(j, "dtype", "dtype"), src, "dtype", K);
  s.config_hash = get_string(req(j, "config_hash", "config_hash"), src, "config_hash", K);
  return s;
}

WeightLayout detect_layout(const SafeTensorsFile& f) {
  if (auto it = f.metadata.find("layout"); it != f.metadata.end()) {
    if (it->second == kKernelLayout) return WeightLayout::Kernel;
    if (it->second == kHfLayout) return WeightLayout::HuggingFace;
  }
  static const std::regex kernel(R"(bert\.encoder\.layer\.\d+\.(attn_qkvw|attn_qkvb|inter_w|output_w|norm_w)$)");
  static const std::regex hf(R"(bert\.encoder\.layer\.\d+\.(attention\.self\.(query|key|value)|intermediate\.dense)\..*)");
  for (const auto& [name, t] : f.tensors) {
    if (std::regex_match(name, kernel)) return WeightLayout::Kernel;
    if (std::regex_match(name, hf)) return WeightLayout::HuggingFace;
  }
  return WeightLayout::Unknown;
}

ParamMap load_kernel_weights(const SafeTensorsFile& f, const std::string& path, const BertShape& expected) {
  const WeightLayout layout = detect_layout(f);
  if (layout == WeightLayout::HuggingFace)
    input_error(fmt::format(
        "{}: holds Hugging Face BERT names (separate attention.self.query/key/value), not the DeepSpeed "
        "transformer-kernel layout this model loads; convert it first: dskc convert --from hf --to kernel {} "
        "OUT.safetensors",
        path, path));
  if (auto it = f.metadata.find("layout"); it != f.metadata.end() && it->second != kKernelLayout)
    input_error(fmt::format("{}: has layout \"{}\"; expected \"{}\"", path, it->second, kKernelLayout));
  if (auto it = f.metadata.find("model_config"); it != f.metadata.end()) {
    BertShape saved = parse_bert_shape(it->second, path + " (model_config metadata)");
    std::string diff = saved.architecture_diff(expected);
    if (!diff.empty())
      input_error(fmt::format("{}: the checkpoint's model differs from the --cf model config: {} (checkpoint vs "
                              "--cf)",
                              path, diff));
  }
  if (expected.pre_layer_norm && !f.tensors.count("bert.encoder.FinalLayerNorm.weight") &&
      f.tensors.count("bert.encoder.layer.0.norm_w"))
    input_error(fmt::format("{}: has no bert.encoder.FinalLayerNorm: it is a Post-LN model, but the --cf model "
                            "config is Pre-LN (set \"pre_layer_norm\": false in it)",
                            path));
  return read_tensors(f, path, model_param_specs(expected), "");
}

void save_checkpoint(const std::string& output_dir, const std::string& tag, const BertShape& shape, DType dtype,
                     const ParamMap& params, const ParamMap& optimizer_state, const TrainerState& state) {
  const std::vector<ModelParamSpec> specs = model_param_specs(shape);
  SafeTensorsFile model, optim;
  model.metadata = {{"layout", kKernelLayout},
                    {"dtype", dtype_name(dtype)},
                    {"model_config", to_json_text(shape)},
                    {"format", "pt"}};
  optim.metadata = {{"layout", kKernelLayout}, {"contents", "fp32 master weights and Adam/Lamb moments"}};
  for (const ModelParamSpec& s : specs) {
    const std::vector<float>& p = params.at(s.name);
    model.tensors[s.name] = tensor_from_doubles(to_doubles(p), s.shape, dtype);
    optim.tensors["master." + s.name] = tensor_from_doubles(to_doubles(p), s.shape, DType::F32);
    optim.tensors["exp_avg." + s.name] = tensor_from_doubles(to_doubles(optimizer_state.at("exp_avg." + s.name)),
                                                             s.shape, DType::F32);
    optim.tensors["exp_avg_sq." + s.name] = tensor_from_doubles(
        to_doubles(optimizer_state.at("exp_avg_sq." + s.name)), s.shape, DType::F32);
  }

  std::error_code ec;
  fs::create_directories(output_dir, ec);
  if (ec) throw Error(ErrorKind::Io, fmt::format("{}: cannot create directory: {}", output_dir, ec.message()));
  const fs::path out(output_dir);
  const fs::path tmp = out / fmt::format(".{}.tmp-{}", tag, ::getpid());
  const fs::path final_dir = out / tag;
  const fs::path old = out / fmt::format(".{}.old-{}", tag, ::getpid());
  try {
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    write_safetensors((tmp / "model.safetensors").string(), model);
    write_safetensors((tmp / "optimizer.safetensors").string(), optim);
    write_file_atomic((tmp / "trainer_state.json").string(), to_json_text(state));
    bool had_old = fs::exists(final_dir);
    if (had_old) fs::rename(final_dir, old);
    fs::rename(tmp, final_dir);
    if (had_old) fs::remove_all(old);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    throw Error(ErrorKind::Io, fmt::format("{}: cannot write checkpoint: {}", final_dir.string(), e.what()));
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  write_file_atomic((out / "latest").string(), tag + "\n");
}

std::string resolve_checkpoint_dir(const std::string& dir, const std::string& tag) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    input_error(fmt::format("{}: no such checkpoint directory (--load_training_checkpoint)", dir));
  if (!tag.empty()) {
    fs::path p = fs::path(dir) / tag;
    if (!fs::is_directory(p, ec))
      input_error(fmt::format("{}: no checkpoint '{}' here (--load_checkpoint_id)", dir, tag));
    return p.string();
  }
  if (fs::exists(fs::path(dir) / "model.safetensors", ec)) return dir;
  const fs::path latest = fs::path(dir) / "latest";
  if (!fs::exists(latest, ec))
    input_error(fmt::format("{}: has no 'latest' file and no model.safetensors; name a checkpoint with "
                            "--load_checkpoint_id",
                            dir));
  std::string name = read_file_bytes(latest.string());
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  fs::path p = fs::path(dir) / name;
  if (name.empty() || !fs::is_directory(p, ec))
    input_error(fmt::format("{}: names checkpoint '{}', which does not exist", latest.string(), name));
  return p.string();
}

CheckpointData load_checkpoint(const std::string& checkpoint_dir, const BertShape& expected) {
  CheckpointData c;
  c.dir = checkpoint_dir;
  const fs::path d(checkpoint_dir);
  const std::string model_path = (d / "model.safetensors").string();
  const std::string optim_path = (d / "optimizer.safetensors").string();
  const std::string state_path = (d / "trainer_state.json").string();
  std::error_code ec;
  if (!fs::is_regular_file(model_path, ec)) input_error(fmt::format("{}: missing (not a dskc checkpoint)", model_path));
  SafeTensorsFile model = read_safetensors(model_path);
  load_kernel_weights(model, model_path, expected);  // validates layout, shape and names
  if (!fs::is_regular_file(optim_path, ec))
    input_error(fmt::format("{}: missing (the checkpoint is incomplete: training state cannot resume)", optim_path));
  SafeTensorsFile optim = read_safetensors(optim_path);
  const std::vector<ModelParamSpec> specs = model_param_specs(expected);
  std::vector<ModelParamSpec> all;
  for (const char* prefix : {"master.", "exp_avg.", "exp_avg_sq."})
    for (const ModelParamSpec& s : specs) all.push_back({prefix + s.name, s.shape, -1, ""});
  ParamMap everything = read_tensors(optim, optim_path, all, "");
  for (auto& [name, v] : everything) {
    if (name.rfind("master.", 0) == 0) {
      c.params[name.substr(7)] = std::move(v);
    } else {
      c.optimizer_state[name] = std::move(v);
    }
  }
  c.state = parse_trainer_state(read_text(state_path), state_path);
  return c;
}

}  // namespace dskc
