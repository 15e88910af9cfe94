// `dskc bench-memory`: the guide's memory table for dskc. In one process, finds the largest BERT
// pre-training micro-batch that fits in GPU memory for each memory-flag set and each cap, by
// running real training steps: every probe builds the CUDA training backend (trainer/bert_cuda.h)
// for that micro-batch, imports the initial weights, runs forward_backward on a synthetic batch
// of full-length sequences, grads_finite, grad_norm and optimizer_step, records the Context's
// peak allocated bytes, and frees everything. The search itself is cli/batch_search.h.
//
// What fits means: no allocation past the cap (Context::allocate throws "out of memory ...
// cap"), and no real out-of-memory from the driver or cuBLAS; any other error aborts the run.
// What the cap counts: every device allocation dskc makes (weights, gradients, optimizer state,
// activations, workspaces: all go through Context::allocate). Not counted: the CUDA context
// itself, loaded modules' code, cuBLAS handles' internal state, kernel local memory the driver
// reserves (bench/NOTES.md).
//
// The backend builds its own Context, so the cap is set right after construction and the
// construction's allocations are checked against it by their peak (Context::allocate keeps the
// running peak): since the cap is pure accounting, "peak after construction > cap" is exactly
// "an allocation during construction would have thrown".
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "cli/args.h"
#include "cli/batch_search.h"
#include "cli/commands.h"
#include "compiler/config.h"
#include "compiler/errors.h"
#include "compiler/fileio.h"
#include "compiler/version.h"
#include "runtime/driver.h"
#include "trainer/bert_cuda.h"
#include "trainer/bert_model.h"
#include "trainer/optimizer.h"

namespace dskc::cli {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

const std::vector<std::string> kFlagNames = {"attention_dropout_checkpoint", "normalize_invertible", "gelu_checkpoint"};

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string s;
  for (const std::string& x : parts) s += (s.empty() ? "" : sep) + x;
  return s;
}

struct FlagSet {
  std::string name;  // "none", "all", or the flags joined by '+'
  bool attn = false, invertible = false, gelu = false;
};

// "none" | "all" | flag[+flag...]; Error(Usage) naming the closest flag for a typo.
FlagSet parse_flag_set(const std::string& item) {
  FlagSet f;
  if (item == "none") {
    f.name = "none";
    return f;
  }
  if (item == "all") {
    f = {"all", true, true, true};
    return f;
  }
  std::stringstream ss(item);
  std::string flag;
  while (std::getline(ss, flag, '+')) {
    if (flag == kFlagNames[0])
      f.attn = true;
    else if (flag == kFlagNames[1])
      f.invertible = true;
    else if (flag == kFlagNames[2])
      f.gelu = true;
    else {
      std::vector<std::string> known = kFlagNames;
      known.push_back("none");
      known.push_back("all");
      const std::string hint = closest_match(flag, known);
      throw Error(ErrorKind::Usage,
                  fmt::format("--flag-sets: unknown memory flag '{}'{}; use none, all, or {} joined by '+'", flag,
                              hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint),
                              fmt::format("{}, {}, {}", kFlagNames[0], kFlagNames[1], kFlagNames[2])));
    }
  }
  if (f.attn && f.invertible && f.gelu) {
    f.name = "all";
  } else {
    std::vector<std::string> parts;
    if (f.attn) parts.push_back(kFlagNames[0]);
    if (f.invertible) parts.push_back(kFlagNames[1]);
    if (f.gelu) parts.push_back(kFlagNames[2]);
    f.name = join(parts, "+");
  }
  return f;
}

std::vector<std::string> split_list(const std::string& s, const std::string& opt) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) throw Error(ErrorKind::Usage, fmt::format("--{} '{}': empty item in the list", opt, s));
    out.push_back(item);
  }
  if (out.empty()) throw Error(ErrorKind::Usage, fmt::format("--{} needs at least one item", opt));
  return out;
}

// "32" / "31.5" GiB, or "none" / "0" for no cap. Sorted ascending, no cap last.
std::vector<size_t> parse_caps(const std::string& s) {
  std::vector<size_t> caps;
  for (const std::string& item : split_list(s, "memory-cap-gib")) {
    if (item == "none" || item == "0") {
      caps.push_back(0);
      continue;
    }
    double gib = 0;
    size_t pos = 0;
    try {
      gib = std::stod(item, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos != item.size() || !std::isfinite(gib) || gib <= 0 || gib > 1e6)
      throw Error(
          ErrorKind::Usage,
          fmt::format("--memory-cap-gib: '{}' is not a positive number of GiB (or 'none' for the whole GPU)", item));
    caps.push_back(static_cast<size_t>(gib * kGiB));
  }
  std::sort(caps.begin(), caps.end(), [](size_t a, size_t b) { return a != 0 && (b == 0 || a < b); });
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  return caps;
}

std::string cap_label(size_t cap) { return cap ? fmt::format("{:g} GiB", cap / kGiB) : std::string("none"); }

bool is_out_of_memory(const Error& e) {
  if (e.kind() != ErrorKind::Device) return false;
  const std::string m = e.what();
  for (const char* needle : {"out of memory", "out of GPU memory", "OUT_OF_MEMORY", "ALLOC_FAILED"})
    if (m.find(needle) != std::string::npos) return true;
  return false;
}

// The primary context of the device, held for the whole run so that each probe's backend does
// not tear it down and rebuild it; also the free-memory baseline that shows a probe cleaned up.
class DeviceHold {
 public:
  explicit DeviceHold(int device) {
    dev_ = checked_device(device);
    DSKC_CU(cuDevicePrimaryCtxRetain(&ctx_, dev_));
    DSKC_CU(cuCtxSetCurrent(ctx_));
    char name[256] = {0};
    DSKC_CU(cuDeviceGetName(name, sizeof(name), dev_));
    name_ = name;
  }
  ~DeviceHold() {
    if (ctx_) driver().cuDevicePrimaryCtxRelease(dev_);
  }
  DeviceHold(const DeviceHold&) = delete;
  DeviceHold& operator=(const DeviceHold&) = delete;
  const std::string& name() const { return name_; }
  // {free, total} bytes of the device.
  std::pair<size_t, size_t> mem_info() const {
    DSKC_CU(cuCtxSetCurrent(ctx_));
    size_t free = 0, total = 0;
    DSKC_CU(cuMemGetInfo(&free, &total));
    return {free, total};
  }

 private:
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  std::string name_;
};

// A full-length synthetic pre-training batch: every token real, `max_pred` masked predictions
// at positions 1..max_pred (distinct, never [CLS]), two segments, alternating NSP labels.
Batch synthetic_batch(const BertShape& s, int batch, int seq, int max_pred) {
  Batch b;
  b.batch = batch;
  b.seq_len = seq;
  b.max_pred = max_pred;
  const size_t tokens = static_cast<size_t>(batch) * seq;
  b.input_ids.resize(tokens);
  b.input_mask.assign(tokens, 1);
  b.segment_ids.resize(tokens);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  auto next = [&x](int n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int32_t>((x >> 33) % static_cast<uint64_t>(n));
  };
  for (size_t i = 0; i < tokens; ++i) {
    b.input_ids[i] = 1 + next(s.vocab_size - 1);
    b.segment_ids[i] = (i % seq) < static_cast<size_t>(seq / 2) ? 0 : std::min(1, s.type_vocab_size - 1);
  }
  for (int i = 0; i < batch; ++i) {
    for (int k = 0; k < max_pred; ++k) {
      b.masked_lm_positions.push_back(1 + k);
      b.masked_lm_ids.push_back(1 + next(s.vocab_size - 1));
    }
    b.next_sentence_labels.push_back(i % 2);
  }
  return b;
}

struct RunSetup {
  BackendOptions base;  // everything but micro_batch and the flags
  int seq = 128, max_pred = 20;
  OptimizerSettings optimizer;
  double loss_scale = 65536.0;  // DeepSpeed's initial dynamic scale (2^16)
  const ParamMap* params = nullptr;
  const DeviceHold* device = nullptr;
  size_t free_at_start = 0;  // device free bytes before any probe
};

// One probe: a fresh backend for `batch`, one training step, peak bytes; everything freed.
ProbeOutcome run_probe(const RunSetup& rs, const FlagSet& f, int batch, size_t cap) {
  const auto t0 = Clock::now();
  ProbeOutcome o;
  o.batch = batch;
  o.cap_bytes = cap;
  std::unique_ptr<CudaBackend> be;
  try {
    BackendOptions opt = rs.base;
    opt.micro_batch = batch;
    opt.attention_dropout_checkpoint = f.attn;
    opt.normalize_invertible = f.invertible;
    opt.gelu_checkpoint = f.gelu;
    opt.memory_cap_bytes = cap;  // the backend's Context refuses allocations past it from the start
    be = std::make_unique<CudaBackend>(opt);
    Context& ctx = be->context();
    be->import_params(*rs.params, "initial weights");
    be->zero_grads();
    MicroStep m;
    m.loss_scale = rs.loss_scale;
    m.accumulation = 1;
    m.rng_step = 0;
    be->forward_backward(synthetic_batch(rs.base.shape, batch, rs.seq, rs.max_pred), m);
    // The update runs even after an fp16 overflow: the probe measures memory, not training.
    const bool finite = be->grads_finite();
    const double norm = be->grad_norm(rs.loss_scale);
    UpdateArgs a;
    a.lr = rs.optimizer.lr;
    a.grad_scale = rs.loss_scale;
    a.clip_coef = std::isfinite(norm) ? clip_coefficient(norm, 1.0) : 1.0;
    a.step = 1;
    be->optimizer_step(rs.optimizer, a);
    ctx.synchronize();
    o.fits = true;
    o.peak_bytes = ctx.peak_allocated_bytes();
    const size_t used = rs.free_at_start - std::min(rs.free_at_start, rs.device->mem_info().first);
    o.overhead_bytes = used > ctx.allocated_bytes() ? used - ctx.allocated_bytes() : 0;
    if (!finite) o.note = "fp16 gradient overflow at the initial loss scale (update applied anyway)";
  } catch (const Error& e) {
    if (!is_out_of_memory(e)) throw;
    o.fits = false;
    o.note = e.what();
    if (be) o.peak_bytes = be->context().peak_allocated_bytes();  // reached before the failure
  }
  be.reset();  // frees every buffer (the destructor synchronizes first)
  o.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return o;
}

std::string describe(const ProbeOutcome& o) {
  if (o.fits)
    return fmt::format("fits, peak {:.2f} GiB ({:.1f} MiB/seq; {:.0f} MiB uncounted device memory)",
                       o.peak_bytes / kGiB, o.peak_bytes / kMiB / o.batch, o.overhead_bytes / kMiB);
  std::string why = o.note;
  if (why.size() > 140) why = why.substr(0, 137) + "...";
  return "does not fit: " + why;
}

nlohmann::ordered_json probe_json(const ProbeOutcome& o) {
  nlohmann::ordered_json j;
  j["batch"] = o.batch;
  j["memory_cap_bytes"] = o.cap_bytes;
  j["fits"] = o.fits;
  if (o.fits) {
    j["peak_bytes"] = o.peak_bytes;
    j["uncounted_bytes"] = o.overhead_bytes;
  } else {
    j["peak_bytes_before_failure"] = o.peak_bytes;
  }
  j["seconds"] = o.seconds;
  if (!o.note.empty()) j["note"] = o.note;
  return j;
}

}  // namespace

int cmd_bench_memory(const Args& args) {
  ArgParser p("bench-memory",
              "The guide's memory table: the largest BERT pre-training micro-batch that fits in GPU memory, per\n"
              "memory-flag set and memory cap, found by real training steps (CUDA backend, fused JIT layers).\n"
              "Each probe builds the backend for one micro-batch, imports the initial weights, runs one step\n"
              "(forward + backward on full-length sequences, grads_finite, grad_norm, optimizer update) and\n"
              "records the peak device memory dskc allocated; the search is an extrapolation from the first\n"
              "probes' bytes per sequence, then exponential steps and bisection (bench/NOTES.md).");
  std::string model_config, dtype_s = "fp16", flag_sets_s, caps_s = "none", optimizer_s = "adam", json_path;
  std::optional<int> seq, max_batch, start_batch, max_pred, local_rank;
  FlagSet switches{"", false, false, false};
  bool plain = false;
  p.add_option("cf", &model_config, "FILE", "BERT model config (e.g. examples/bert_large_adam_seq128.json; required)");
  p.add_int("seq", &seq, "sequence length of every sample (default 128)");
  p.add_option("dtype", &dtype_s, "T", "fp16 (default), bf16 or fp32");
  p.add_switch("attention_dropout_checkpoint", &switches.attn, "memory flag (the flag set when --flag-sets is absent)");
  p.add_switch("normalize_invertible", &switches.invertible, "memory flag");
  p.add_switch("gelu_checkpoint", &switches.gelu, "memory flag");
  p.add_option("flag-sets", &flag_sets_s, "LIST",
               "flag sets to measure, comma-separated: none, all, or flags joined by '+' (e.g. "
               "none,attention_dropout_checkpoint,normalize_invertible,gelu_checkpoint,all)");
  p.add_option("memory-cap-gib", &caps_s, "LIST",
               "caps in GiB on what dskc may allocate, comma-separated; 'none' (default) = the whole GPU");
  p.add_int("max-batch", &max_batch, "largest micro-batch probed (default 4096 x 128 / seq)");
  p.add_int("start-batch", &start_batch, "first probe (default 1024 / seq, at least 1)");
  p.add_int("max-predictions", &max_pred, "masked-LM predictions per sequence (default 20 at seq <= 128, 80 at 512)");
  p.add_option("optimizer", &optimizer_s, "NAME", "adam (default: DeepSpeed Adam = AdamW) or lamb");
  p.add_switch("plain-layer", &plain, "the plain unfused layer instead of the DeepSpeed kernel layer");
  p.add_int("local_rank", &local_rank, "GPU index (default 0)");
  p.add_option("json", &json_path, "FILE", "write every result and probe as JSON");
  if (!p.parse(args)) return 0;

  // Validate everything before touching the GPU.
  if (model_config.empty())
    throw Error(ErrorKind::Usage,
                "--cf MODEL.json is required (the BERT model config, e.g. examples/bert_large_adam_seq128.json)");
  const int S = seq.value_or(128);
  if (S < 2) throw Error(ErrorKind::Usage, fmt::format("--seq must be at least 2, got {}", S));
  DType dtype;
  if (dtype_s == "fp16")
    dtype = DType::F16;
  else if (dtype_s == "bf16")
    dtype = DType::BF16;
  else if (dtype_s == "fp32")
    dtype = DType::F32;
  else
    throw Error(ErrorKind::Usage, fmt::format("--dtype '{}' is not known: use fp16, bf16 or fp32", dtype_s));
  std::vector<FlagSet> flag_sets;
  if (!flag_sets_s.empty()) {
    if (switches.attn || switches.invertible || switches.gelu)
      throw Error(ErrorKind::Usage, "give the memory flags either as switches or in --flag-sets, not both");
    for (const std::string& item : split_list(flag_sets_s, "flag-sets")) flag_sets.push_back(parse_flag_set(item));
  } else {
    std::vector<std::string> parts;
    for (size_t i = 0; i < 3; ++i)
      if ((i == 0 && switches.attn) || (i == 1 && switches.invertible) || (i == 2 && switches.gelu))
        parts.push_back(kFlagNames[i]);
    flag_sets.push_back(parse_flag_set(parts.empty() ? "none" : join(parts, "+")));
  }
  const std::vector<size_t> caps = parse_caps(caps_s);
  const int max_b = max_batch.value_or(std::max(1, 4096 * 128 / S));
  const int start_b = start_batch.value_or(std::max(1, 1024 / S));
  const int P = max_pred.value_or(S >= 512 ? 80 : std::max(1, static_cast<int>(std::ceil(0.15 * S))));
  if (max_b < 1) throw Error(ErrorKind::Usage, fmt::format("--max-batch must be >= 1, got {}", max_b));
  if (start_b < 1 || start_b > max_b)
    throw Error(ErrorKind::Usage, fmt::format("--start-batch must be in [1, --max-batch {}], got {}", max_b, start_b));
  if (P < 1 || P >= S)
    throw Error(ErrorKind::Usage,
                fmt::format("--max-predictions must be in [1, seq - 1 = {}] (position 0 is [CLS]), got {}", S - 1, P));
  OptimizerSettings optimizer;
  if (optimizer_s == "adam")
    optimizer.type = OptimizerType::Adam;
  else if (optimizer_s == "lamb")
    optimizer.type = OptimizerType::Lamb;
  else
    throw Error(ErrorKind::Usage, fmt::format("--optimizer '{}' is not known: use adam or lamb", optimizer_s));
  optimizer.lr = 1e-4;
  optimizer.weight_decay = 0.01;
  optimizer.max_grad_norm = 1.0;
  if (local_rank && *local_rank < -1)
    throw Error(ErrorKind::Usage, fmt::format("--local_rank must be >= -1, got {}", *local_rank));

  const BertModelConfig mc = load_bert_model_config(model_config);  // Error(Io / Config) naming the file
  if (S > mc.shape.max_position_embeddings)
    throw Error(ErrorKind::Usage, fmt::format("--seq {} exceeds max_position_embeddings {} of {}", S,
                                              mc.shape.max_position_embeddings, model_config));

  DeviceHold device(local_rank.value_or(-1));  // "no CUDA device: ..." (exit 6) without a GPU
  const auto t_start = Clock::now();
  const ParamMap params = init_model_params(mc.shape, 42);
  const auto [free0, total] = device.mem_info();
  RunSetup rs;
  rs.base.shape = mc.shape;
  rs.base.max_seq_length = S;
  rs.base.dtype = dtype;
  rs.base.transformer_kernel = !plain;
  rs.base.local_rank = local_rank.value_or(-1);
  rs.seq = S;
  rs.max_pred = P;
  rs.optimizer = optimizer;
  rs.loss_scale = dtype == DType::F16 ? 65536.0 : 1.0;
  rs.params = &params;
  rs.device = &device;
  rs.free_at_start = free0;
  const int64_t n_params = count_parameters(mc.shape);
  std::printf(
      "dskc bench-memory on %s (%.1f GiB, %.1f GiB free): BERT %d layers, hidden %d, %.0fM parameters, "
      "seq %d, %s, %d predictions/seq, %s, %s layer; initial weights in %.1f s\n",
      device.name().c_str(), total / kGiB, free0 / kGiB, mc.shape.num_hidden_layers, mc.shape.hidden_size,
      n_params / 1e6, S, dtype_name(dtype), P, optimizer_name(optimizer.type), plain ? "plain" : "kernel",
      std::chrono::duration<double>(Clock::now() - t_start).count());
  std::fflush(stdout);

  nlohmann::ordered_json out;
  out["tool"] = "dskc";
  out["version"] = kDskcVersion;
  out["device"] = device.name();
  out["device_total_bytes"] = total;
  out["device_free_bytes_at_start"] = free0;
  out["model_config"] = model_config;
  out["parameters"] = n_params;
  out["seq"] = S;
  out["dtype"] = dtype_name(dtype);
  out["max_predictions_per_seq"] = P;
  out["optimizer"] = optimizer_name(optimizer.type);
  out["layer"] = plain ? "plain" : "kernel";
  out["max_batch"] = max_b;
  out["counted"] =
      "every dskc device allocation (Context::allocate); not the CUDA context, module code, cuBLAS "
      "handle state or driver-reserved local memory";
  out["results"] = nlohmann::ordered_json::array();

  struct Row {
    std::string config;
    size_t cap;
    SearchResult r;
  };
  std::vector<Row> rows;
  int total_probes = 0;
  double prior_fixed = -1.0;  // the first flag set's fixed bytes: one model probe for the others
  for (const FlagSet& f : flag_sets) {
    std::vector<ProbeOutcome> history;
    for (const size_t cap : caps) {
      std::printf("== %s, cap %s\n", f.name.c_str(), cap_label(cap).c_str());
      std::fflush(stdout);
      SearchLimits lim;
      lim.start_batch = start_b;
      lim.max_batch = max_b;
      lim.cap_bytes = cap;
      lim.predict_bytes = cap ? cap : free0;
      lim.prior_fixed_bytes = prior_fixed;
      const size_t first = history.size();
      auto probe = [&](int b, size_t c) {
        ProbeOutcome o = run_probe(rs, f, b, c);
        const auto [free_now, t] = device.mem_info();
        (void)t;
        std::string leak;
        if (free_now + (size_t{256} << 20) < free0) {
          leak = fmt::format("; warning: {:.0f} MiB less free memory than at the start", (free0 - free_now) / kMiB);
          o.note += leak;
        }
        std::printf("  probe %d: batch %d: %s, %.1f s%s\n", total_probes + 1, b, describe(o).c_str(), o.seconds,
                    leak.c_str());
        std::fflush(stdout);
        ++total_probes;
        return o;
      };
      const SearchResult r = find_largest_batch(probe, lim, history);
      std::printf(
          "  => %s, cap %s: largest micro-batch %d%s, peak %.2f GiB (%.1f MiB/seq; marginal %.1f MiB/seq, "
          "fixed %.2f GiB), %d probes\n",
          f.name.c_str(), cap_label(cap).c_str(), r.largest_batch, r.at_max_batch ? " (the --max-batch bound)" : "",
          r.peak_bytes / kGiB, r.largest_batch ? r.peak_bytes / kMiB / r.largest_batch : 0.0,
          r.marginal_bytes_per_seq / kMiB, r.fixed_bytes / kGiB, r.probes);
      std::fflush(stdout);
      rows.push_back({f.name, cap, r});
      if (prior_fixed < 0 && r.fixed_bytes > 0) prior_fixed = r.fixed_bytes;
      nlohmann::ordered_json j;
      j["config"] = f.name;
      j["flags"] = nlohmann::json::array();
      if (f.attn) j["flags"].push_back(kFlagNames[0]);
      if (f.invertible) j["flags"].push_back(kFlagNames[1]);
      if (f.gelu) j["flags"].push_back(kFlagNames[2]);
      j["memory_cap_gib"] = cap ? nlohmann::json(cap / kGiB) : nlohmann::json(nullptr);
      j["memory_cap_bytes"] = cap;
      j["largest_batch"] = r.largest_batch;
      j["at_max_batch"] = r.at_max_batch;
      j["peak_bytes"] = r.peak_bytes;
      j["peak_bytes_per_seq"] = r.largest_batch ? static_cast<double>(r.peak_bytes) / r.largest_batch : 0.0;
      j["marginal_bytes_per_seq"] = r.marginal_bytes_per_seq;
      j["fixed_bytes"] = r.fixed_bytes;
      j["probe_count"] = r.probes;
      j["probes"] = nlohmann::ordered_json::array();
      for (size_t i = first; i < history.size(); ++i) j["probes"].push_back(probe_json(history[i]));
      out["results"].push_back(j);
      // Rewritten after every result, so a run stopped by a time limit keeps what it measured.
      out["total_probes"] = total_probes;
      out["seconds"] = std::chrono::duration<double>(Clock::now() - t_start).count();
      if (!json_path.empty()) write_file_atomic(json_path, out.dump(2) + "\n");
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t_start).count();
  out["total_probes"] = total_probes;
  out["seconds"] = secs;

  std::printf("\nlargest micro-batch, seq %d, %s (%d probes, %.0f s):\n", S, dtype_name(dtype), total_probes, secs);
  std::printf("| flags | memory cap | largest micro-batch | peak GiB | MiB/seq | probes |\n");
  std::printf("|---|---|---:|---:|---:|---:|\n");
  for (const Row& row : rows)
    std::printf("| %s | %s | %d%s | %.2f | %.1f | %d |\n", row.config.c_str(), cap_label(row.cap).c_str(),
                row.r.largest_batch, row.r.at_max_batch ? "+" : "", row.r.peak_bytes / kGiB,
                row.r.largest_batch ? row.r.peak_bytes / kMiB / row.r.largest_batch : 0.0, row.r.probes);
  if (!json_path.empty()) {
    write_file_atomic(json_path, out.dump(2) + "\n");
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}

}  // namespace dskc::cli
