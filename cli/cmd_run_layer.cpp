// `dskc run-layer`: one layer forward (and backward) on tensors from a safetensors file, on the
// GPU (JIT kernels) or the CPU reference; writes `output` (+ `grad_input`, `grad_<param>`).
// All inputs are validated before any work; the output file is written atomically.
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/layer_args.h"
#include "compiler/errors.h"
#include "runtime/context.h"
#include "runtime/cpu_reference.h"
#include "runtime/host_tensor.h"
#include "runtime/layer_params.h"
#include "runtime/safetensors.h"
#include "runtime/transformer_layer.h"

namespace dskc::cli {

namespace {



std::string shape_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

const StTensor& need(const SafeTensorsFile& f, const std::string& path, const std::string& name,
                     const std::vector<int64_t>& shape, DType t) {
  auto it = f.tensors.find(name);
  if (it == f.tensors.end()) throw Error(ErrorKind::Input, fmt::format("{}: tensor '{}' is missing", path, name));
  if (it->second.shape != shape)
    throw Error(ErrorKind::Input, fmt::format("{}: tensor '{}' has shape {}, expected {}", path, name,
                                              shape_str(it->second.shape), shape_str(shape)));
  if (it->second.dtype != st_dtype_name(t))
    throw Error(ErrorKind::Input, fmt::format("{}: tensor '{}' is {}, but the layer config's dtype is {}", path, name,
                                              it->second.dtype, st_dtype_name(t)));
  return it->second;
}

std::vector<float> as_floats(const StTensor& t) {
  auto d = tensor_to_doubles(t);
  return std::vector<float>(d.begin(), d.end());
}

}  // namespace

int cmd_run_layer(const Args& args) {
  ArgParser p("run-layer", "Run one transformer layer on tensors from a safetensors file: input [B,S,H], "
                           "input_mask [B,1,1,S] (optional, additive), the 12 parameters by DeepSpeed name, and "
                           "grad_output for --backward. Writes output (+ grad_input and grad_<param>).");
  LayerArgs la;
  la.add_to(p);
  std::string inputs, out, backend = "cuda";
  bool backward = false;
  std::optional<int> step, layer_id;
  p.add_option("inputs", &inputs, "FILE", "input tensors (.safetensors)");
  p.add_option("out", &out, "FILE", "output tensors (.safetensors)");
  p.add_switch("backward", &backward, "also run backward (needs grad_output)");
  p.add_option("backend", &backend, "NAME", "cuda (JIT kernels, default) or cpu (double-precision reference)");
  p.add_int("step", &step, "training step keying the dropout RNG (default 0)");
  p.add_int("layer_id", &layer_id, "layer index keying the dropout RNG (default 0)");
  if (!p.parse(args)) return 0;
  if (inputs.empty()) throw Error(ErrorKind::Usage, "--inputs FILE is required");
  if (out.empty()) throw Error(ErrorKind::Usage, "--out FILE is required");
  if (backend != "cuda" && backend != "cpu")
    throw Error(ErrorKind::Usage, fmt::format("--backend must be cuda or cpu, not '{}'", backend));
  LayerConfig cfg = la.load();
  if (backward && !cfg.training) throw Error(ErrorKind::Usage, "--backward needs a layer with training = true");
  const DType t = cfg.dtype();
  SafeTensorsFile in = read_safetensors(inputs);
  auto xit = in.tensors.find("input");
  if (xit == in.tensors.end()) throw Error(ErrorKind::Input, fmt::format("{}: tensor 'input' is missing", inputs));
  const auto& xs = xit->second.shape;
  if (xs.size() != 3 || xs[2] != cfg.hidden_size)
    throw Error(ErrorKind::Input, fmt::format("{}: tensor 'input' has shape {}, expected [B, S, {}]", inputs,
                                              shape_str(xs), cfg.hidden_size));
  const int B = static_cast<int>(xs[0]), S = static_cast<int>(xs[1]);
  if (B > cfg.batch_size)
    throw Error(ErrorKind::Input, fmt::format("{}: batch {} exceeds the layer's batch_size {}: raise batch_size in the "
                                              "layer config or lower the prediction batch",
                                              inputs, B, cfg.batch_size));
  if (S > cfg.max_seq_length)
    throw Error(ErrorKind::Input, fmt::format("{}: sequence length {} exceeds the layer's max_seq_length {}", inputs, S,
                                              cfg.max_seq_length));
  std::vector<float> x = as_floats(need(in, inputs, "input", xs, t));
  std::vector<float> mask;
  if (in.tensors.count("input_mask")) mask = as_floats(need(in, inputs, "input_mask", {B, 1, 1, S}, t));
  std::map<std::string, std::vector<float>> params;
  for (const auto& ps : layer_param_specs(cfg)) params[ps.name] = as_floats(need(in, inputs, ps.name, ps.shape, t));
  std::vector<float> dy;
  if (backward) dy = as_floats(need(in, inputs, "grad_output", xs, t));

  SafeTensorsFile result;
  auto put = [&](const std::string& name, const std::vector<float>& v, const std::vector<int64_t>& shape) {
    result.tensors[name] = tensor_from_doubles(std::vector<double>(v.begin(), v.end()), shape, t);
  };
  auto put_d = [&](const std::string& name, const std::vector<double>& v, const std::vector<int64_t>& shape) {
    result.tensors[name] = tensor_from_doubles(v, shape, t);
  };
  const uint32_t st = static_cast<uint32_t>(step.value_or(0));
  if (backend == "cpu") {
    CpuReferenceLayer ref(cfg, static_cast<uint32_t>(layer_id.value_or(0)));
    CpuReferenceLayer::Tensors dp;
    for (auto& [k, v] : params) dp[k] = std::vector<double>(v.begin(), v.end());
    std::vector<double> md(mask.begin(), mask.end());
    put_d("output", ref.forward(std::vector<double>(x.begin(), x.end()), mask.empty() ? nullptr : &md, B, S, st, dp), xs);
    if (backward) {
      auto g = ref.backward(std::vector<double>(dy.begin(), dy.end()));
      put_d("grad_input", g.at("grad_input"), xs);
      for (const auto& ps : layer_param_specs(cfg)) put_d("grad_" + ps.name, g.at("grad_" + ps.name), ps.shape);
    }
  } else {
    Context ctx(cfg.local_rank);
    LayerOptions lo;
    lo.layer_id = static_cast<uint32_t>(layer_id.value_or(0));
    TransformerLayer layer(ctx, cfg, lo);
    layer.set_params(params);
    const size_t n = x.size(), eb = dtype_bytes(t);
    DeviceBuffer dx(ctx, n * eb), dout(ctx, n * eb), dm(ctx, std::max<size_t>(1, mask.size()) * eb);
    upload(ctx, dx.ptr(), x, t);
    if (!mask.empty()) upload(ctx, dm.ptr(), mask, t);
    layer.forward(dx.ptr(), mask.empty() ? 0 : dm.ptr(), dout.ptr(), B, S, st);
    put("output", download(ctx, dout.ptr(), n, t), xs);
    if (backward) {
      DeviceBuffer ddy(ctx, n * eb), dgx(ctx, n * eb);
      upload(ctx, ddy.ptr(), dy, t);
      layer.backward(ddy.ptr(), dgx.ptr());
      put("grad_input", download(ctx, dgx.ptr(), n, t), xs);
      auto grads = layer.get_grads();
      for (const auto& ps : layer_param_specs(cfg)) put("grad_" + ps.name, grads.at(ps.name), ps.shape);
    }
  }
  result.metadata["producer"] = "dskc run-layer";
  result.metadata["backend"] = backend;
  write_safetensors(out, result);
  std::printf("wrote %s (%zu tensors, batch %d, seq %d, %s, %s backend)\n", out.c_str(), result.tensors.size(), B, S,
              dtype_name(t), backend.c_str());
  return 0;
}

}  // namespace dskc::cli
