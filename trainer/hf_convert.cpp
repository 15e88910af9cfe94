// Kernel <-> Hugging Face weight layouts (mapping in hf_convert.h). Tensors move as raw bytes.
#include "trainer/hf_convert.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <regex>
#include <set>

#include "compiler/errors.h"
#include "trainer/checkpoint.h"

namespace dskc {
namespace {

[[noreturn]] void input_error(const std::string& msg) { throw Error(ErrorKind::Input, msg); }

// kernel layer parameter -> HF suffix, for the parameters that map one to one.
std::vector<std::pair<std::string, std::string>> simple_names(bool pre_ln) {
  std::vector<std::pair<std::string, std::string>> m = {
      {"attn_ow", "attention.output.dense.weight"}, {"attn_ob", "attention.output.dense.bias"},
      {"inter_w", "intermediate.dense.weight"},     {"inter_b", "intermediate.dense.bias"},
      {"output_w", "output.dense.weight"},          {"output_b", "output.dense.bias"},
  };
  if (pre_ln) {
    m.insert(m.end(), {{"norm_w", "PreAttentionLayerNorm.weight"},
                       {"norm_b", "PreAttentionLayerNorm.bias"},
                       {"attn_nw", "PostAttentionLayerNorm.weight"},
                       {"attn_nb", "PostAttentionLayerNorm.bias"}});
  } else {
    m.insert(m.end(), {{"attn_nw", "attention.output.LayerNorm.weight"},
                       {"attn_nb", "attention.output.LayerNorm.bias"},
                       {"norm_w", "output.LayerNorm.weight"},
                       {"norm_b", "output.LayerNorm.bias"}});
  }
  return m;
}

const std::regex& layer_regex() {
  static const std::regex r(R"(bert\.encoder\.layer\.(\d+)\.(.+))");
  return r;
}

// Checks the tensors of `f` (kernel layout) against the model's specs.
void check_against_shape(const SafeTensorsFile& f, const std::string& source, const BertShape& shape) {
  std::set<std::string> known;
  for (const ModelParamSpec& s : model_param_specs(shape)) {
    known.insert(s.name);
    auto it = f.tensors.find(s.name);
    if (it == f.tensors.end()) input_error(fmt::format("{}: tensor '{}' is missing (--cf model)", source, s.name));
    if (it->second.shape != s.shape)
      input_error(fmt::format("{}: tensor '{}' has shape [{}], the --cf model needs [{}]", source, s.name,
                              fmt::join(it->second.shape, ","), fmt::join(s.shape, ",")));
  }
  for (const auto& [name, t] : f.tensors)
    if (!known.count(name)) input_error(fmt::format("{}: unexpected tensor '{}' for the --cf model", source, name));
}

std::map<std::string, std::string> converted_metadata(const SafeTensorsFile& in, const char* layout,
                                                      const std::optional<BertShape>& shape) {
  std::map<std::string, std::string> m = in.metadata;
  m["layout"] = layout;
  if (shape) m["model_config"] = to_json_text(*shape);
  return m;
}

bool metadata_pre_ln(const SafeTensorsFile& in, const std::string& source, bool fallback) {
  auto it = in.metadata.find("model_config");
  if (it == in.metadata.end()) return fallback;
  return parse_bert_shape(it->second, source + " (model_config metadata)").pre_layer_norm;
}

}  // namespace

ConvertResult convert_kernel_to_hf(const SafeTensorsFile& in, const std::string& source,
                                   const std::optional<BertShape>& shape) {
  if (detect_layout(in) == WeightLayout::HuggingFace)
    input_error(fmt::format("{}: is already in the Hugging Face layout (use --from hf --to kernel)", source));
  if (shape) check_against_shape(in, source, *shape);
  const bool has_final = in.tensors.count("bert.encoder.FinalLayerNorm.weight") != 0;
  const bool pre_ln = shape ? shape->pre_layer_norm : metadata_pre_ln(in, source, has_final);
  ConvertResult r;
  r.file.metadata = converted_metadata(in, kHfLayout, shape);
  std::map<std::string, std::string> renames;
  for (const auto& [k, h] : simple_names(pre_ln)) renames[k] = h;
  std::map<int, std::set<std::string>> seen;  // layer -> kernel parameters found
  for (const auto& [name, t] : in.tensors) {
    std::smatch m;
    if (!std::regex_match(name, m, layer_regex())) {
      r.file.tensors[name] = t;
      continue;
    }
    const int layer = std::stoi(m[1].str());
    const std::string param = m[2].str();
    const std::string prefix = fmt::format("bert.encoder.layer.{}.", layer);
    seen[layer].insert(param);
    if (param == "attn_qkvw" || param == "attn_qkvb") {
      const bool w = param == "attn_qkvw";
      if ((w && (t.shape.size() != 2 || t.shape[0] % 3 != 0)) || (!w && (t.shape.size() != 1 || t.shape[0] % 3 != 0)))
        input_error(fmt::format("{}: tensor '{}' has shape [{}]; expected [3H,H] / [3H]", source, name,
                                fmt::join(t.shape, ",")));
      const size_t part = t.bytes.size() / 3;
      const char* names[3] = {"query", "key", "value"};
      for (int q = 0; q < 3; ++q) {
        StTensor piece{t.dtype, t.shape, t.bytes.substr(part * q, part)};
        piece.shape[0] /= 3;
        r.file.tensors[prefix + "attention.self." + names[q] + (w ? ".weight" : ".bias")] = std::move(piece);
      }
    } else if (auto it = renames.find(param); it != renames.end()) {
      r.file.tensors[prefix + it->second] = t;
    } else {
      input_error(fmt::format("{}: unexpected tensor '{}' (not one of the twelve kernel layer parameters)", source, name));
    }
  }
  for (const auto& [layer, params] : seen)
    for (const char* p : {"attn_qkvw", "attn_qkvb", "attn_ow", "attn_ob", "attn_nw", "attn_nb", "inter_w", "inter_b",
                          "output_w", "output_b", "norm_w", "norm_b"})
      if (!params.count(p))
        input_error(fmt::format("{}: tensor '{}' is missing", source, encoder_param_name(layer, p)));
  return r;
}

ConvertResult convert_hf_to_kernel(const SafeTensorsFile& in_file, const std::string& source,
                                   const std::optional<BertShape>& shape) {
  if (detect_layout(in_file) == WeightLayout::Kernel)
    input_error(fmt::format("{}: is already in the kernel layout (use --from kernel --to hf)", source));
  ConvertResult r;
  // Normalize old names first.
  std::map<std::string, StTensor> in;
  for (const auto& [name, t] : in_file.tensors) {
    std::string n = name;
    auto ends = [&](const std::string& s) { return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0; };
    if (ends("LayerNorm.gamma")) {
      n = n.substr(0, n.size() - 5) + "weight";
      r.notes.push_back(fmt::format("renamed {} to {}", name, n));
    } else if (ends("LayerNorm.beta")) {
      n = n.substr(0, n.size() - 4) + "bias";
      r.notes.push_back(fmt::format("renamed {} to {}", name, n));
    }
    in[n] = t;
  }
  bool pre_ln = false;
  for (const auto& [name, t] : in)
    if (name.find("PreAttentionLayerNorm") != std::string::npos) pre_ln = true;
  if (shape && shape->pre_layer_norm != pre_ln)
    input_error(fmt::format("{}: holds a {} model but the --cf model config says pre_layer_norm {}", source,
                            pre_ln ? "Pre-LN (PreAttentionLayerNorm names)" : "Post-LN", shape->pre_layer_norm));
  std::map<std::string, std::string> renames;  // HF suffix -> kernel parameter
  for (const auto& [k, h] : simple_names(pre_ln)) renames[h] = k;

  std::map<int, std::map<std::string, const StTensor*>> layers;  // layer -> HF suffix -> tensor
  for (const auto& [name, t] : in) {
    std::smatch m;
    if (std::regex_match(name, m, layer_regex())) {
      layers[std::stoi(m[1].str())][m[2].str()] = &t;
      continue;
    }
    if (name == "bert.embeddings.position_ids") {
      r.notes.push_back("dropped bert.embeddings.position_ids (a constant buffer, not a parameter)");
    } else if (name == "cls.predictions.decoder.weight") {
      auto w = in.find("bert.embeddings.word_embeddings.weight");
      if (w == in.end() || w->second.bytes != t.bytes || w->second.dtype != t.dtype)
        input_error(fmt::format("{}: cls.predictions.decoder.weight differs from the word embeddings; the kernel "
                                "layout ties them (BERT does) and cannot hold an untied decoder",
                                source));
      r.notes.push_back("dropped cls.predictions.decoder.weight (tied to the word embeddings)");
    } else if (name == "cls.predictions.decoder.bias") {
      if (!in.count("cls.predictions.bias")) {
        r.file.tensors["cls.predictions.bias"] = t;
        r.notes.push_back("renamed cls.predictions.decoder.bias to cls.predictions.bias");
      } else {
        r.notes.push_back("dropped cls.predictions.decoder.bias (the same parameter as cls.predictions.bias)");
      }
    } else {
      r.file.tensors[name] = t;
    }
  }
  for (const auto& [layer, parts] : layers) {
    auto need = [&](const std::string& suffix) -> const StTensor& {
      auto it = parts.find(suffix);
      if (it == parts.end())
        input_error(fmt::format("{}: tensor 'bert.encoder.layer.{}.{}' is missing", source, layer, suffix));
      return *it->second;
    };
    std::set<std::string> used;
    for (const char* kind : {"weight", "bias"}) {
      const StTensor& q = need(fmt::format("attention.self.query.{}", kind));
      const StTensor& k = need(fmt::format("attention.self.key.{}", kind));
      const StTensor& v = need(fmt::format("attention.self.value.{}", kind));
      if (q.dtype != k.dtype || q.dtype != v.dtype || q.shape != k.shape || q.shape != v.shape || q.shape.empty())
        input_error(fmt::format("{}: layer {}: attention.self.query/key/value.{} differ in dtype or shape", source,
                                layer, kind));
      StTensor qkv{q.dtype, q.shape, q.bytes + k.bytes + v.bytes};
      qkv.shape[0] *= 3;
      r.file.tensors[encoder_param_name(layer, std::string(kind) == "weight" ? "attn_qkvw" : "attn_qkvb")] =
          std::move(qkv);
      for (const char* p : {"query", "key", "value"}) used.insert(fmt::format("attention.self.{}.{}", p, kind));
    }
    for (const auto& [hf, kernel] : renames) {
      r.file.tensors[encoder_param_name(layer, kernel)] = need(hf);
      used.insert(hf);
    }
    for (const auto& [suffix, t] : parts)
      if (!used.count(suffix))
        input_error(fmt::format("{}: unexpected tensor 'bert.encoder.layer.{}.{}' for a {} model", source, layer,
                                suffix, pre_ln ? "Pre-LN" : "Post-LN"));
  }
  r.file.metadata = converted_metadata(in_file, kKernelLayout, shape);
  if (shape) check_against_shape(r.file, source, *shape);
  return r;
}

}  // namespace dskc
