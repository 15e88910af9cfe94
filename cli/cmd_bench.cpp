// `dskc bench`: times a layer's forward and backward on the GPU with CUDA events (warm-up first,
// median of many iterations) and prints ms, TFLOP/s and activation MiB per layer, with the SM clock
// and board power NVML saw during the timed iterations (runtime/gpu_monitor.h). With --versus, a
// paired A/B of two layers in one process (cli/versus.h).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/layer_args.h"
#include "cli/versus.h"
#include "compiler/codegen.h"
#include "compiler/errors.h"
#include "compiler/fileio.h"
#include "compiler/scoped_env.h"
#include "runtime/context.h"
#include "runtime/cuda_graph.h"
#include "runtime/driver.h"
#include "runtime/gpu_monitor.h"
#include "runtime/host_tensor.h"
#include "runtime/layer_flops.h"
#include "runtime/layer_params.h"
#include "runtime/profiler.h"
#include "runtime/transformer_layer.h"

namespace dskc::cli {

namespace {
struct Events {
  CUevent a = nullptr, b = nullptr;
  Events() {
    DSKC_CU(cuEventCreate(&a, CU_EVENT_DEFAULT));
    DSKC_CU(cuEventCreate(&b, CU_EVENT_DEFAULT));
  }
  ~Events() {
    driver().cuEventDestroy(a);
    driver().cuEventDestroy(b);
  }
  float ms() const {
    float t = 0;
    DSKC_CU(cuEventSynchronize(b));
    DSKC_CU(cuEventElapsedTime(&t, a, b));
    return t;
  }
};
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
// --timeline: the mean over n_it forward + backward calls of each step's start and end (ms after the
// forward's start) on its stream, then each stream's busy time against the wall.
std::vector<Profiler::Step> print_timeline(TransformerLayer& layer, const LayerConfig& cfg, CUdeviceptr x, CUdeviceptr y, CUdeviceptr dy,
                    CUdeviceptr dx, int B, int S, int n_it, CUstream main) {
  Profiler prof(true);
  layer.set_profiler(&prof);
  for (int i = 0; i < n_it; ++i) {
    prof.mark_origin(main);
    layer.forward(x, 0, y, B, S, static_cast<uint32_t>(i));
    if (cfg.training) layer.backward(dy, dx);
    prof.collect();
  }
  layer.set_profiler(nullptr);
  const std::vector<Profiler::Step> steps = prof.timeline();
  std::printf("timeline (mean of %d forward + backward calls, ms from the forward's start; events around every "
              "step add small gaps):\n", n_it);
  std::printf("  %-6s %8s %8s %8s  %s\n", "stream", "start", "end", "ms", "step");
  for (const Profiler::Step& s : steps)
    std::printf("  %-6s %8.4f %8.4f %8.4f  %s\n", s.side ? "side" : "main", s.start, s.end, s.end - s.start,
                s.name.c_str());
  const StreamBusy b = stream_busy(steps);
  std::printf("  wall %.4f ms: main stream busy %.4f (idle %.4f), side stream busy %.4f, both at once %.4f, "
              "neither %.4f\n", b.wall, b.main, b.wall - b.main, b.side, b.both, b.wall - (b.main + b.side - b.both));
  return steps;
}

// One layer under test, with its graphs when --graph captured them.
struct Timed {
  std::unique_ptr<TransformerLayer> layer;
  std::unique_ptr<CapturedGraph> fwd, bwd;
};

// The kernels of `x`'s plan that `y`'s does not have, space-separated ("none" for none).
std::string kernels_not_in(const LayerPlan& x, const LayerPlan& y) {
  std::string out;
  for (const auto& k : x.kernels)
    if (!y.find_kernel(k.name)) out += (out.empty() ? "" : " ") + k.name;
  return out.empty() ? "none" : out;
}

// --versus: layer A (cfg) against layer B (cfg with the spec's switches, built under its DSKC_*
// variables), both on the same stream and the same inputs. Each pair times a block of `block`
// forward + backward steps of each layer back to back (A first in even pairs, B first in odd ones;
// events around each block, one synchronization per pair), after `n_wu` warm-up steps of each.
int bench_versus(const LayerConfig& cfg, const VersusSpec& spec, int B, int S, int pairs, int block, int n_wu,
                 bool graph, bool csv) {
  const LayerConfig cfg_b = versus_config(cfg, spec);
  Context ctx(cfg.local_rank);
  Timed a, b;
  a.layer = std::make_unique<TransformerLayer>(ctx, cfg);
  {
    std::vector<std::unique_ptr<ScopedEnv>> env;
    for (const auto& [name, value] : spec.env) env.push_back(std::make_unique<ScopedEnv>(name.c_str(), value.c_str()));
    b.layer = std::make_unique<TransformerLayer>(ctx, cfg_b);
  }
  a.layer->set_params(init_layer_params(cfg, 1));
  b.layer->set_params(init_layer_params(cfg_b, 1));
  const DType ta = cfg.dtype(), tb = cfg_b.dtype();
  const size_t n = static_cast<size_t>(B) * S * cfg.hidden_size;
  const size_t eb = std::max(dtype_bytes(ta), dtype_bytes(tb));
  DeviceBuffer xa(ctx, n * eb), xb(ctx, n * eb), dya(ctx, n * eb), dyb(ctx, n * eb), y(ctx, n * eb), dx(ctx, n * eb);
  std::vector<float> hx(n);
  for (size_t i = 0; i < n; ++i) hx[i] = static_cast<float>((i * 2654435761u) % 2001) / 1000.f - 1.f;
  upload(ctx, xa.ptr(), hx, ta);
  upload(ctx, dya.ptr(), hx, ta);
  upload(ctx, xb.ptr(), hx, tb);
  upload(ctx, dyb.ptr(), hx, tb);
  auto step = [&](Timed& t, CUdeviceptr x, CUdeviceptr dy, bool training, uint32_t i) {
    if (t.fwd)
      t.fwd->launch(ctx.stream());
    else
      t.layer->forward(x, 0, y.ptr(), B, S, i);
    if (!training) return;
    if (t.bwd)
      t.bwd->launch(ctx.stream());
    else
      t.layer->backward(dy, dx.ptr());
  };
  auto run_a = [&](uint32_t i) { step(a, xa.ptr(), dya.ptr(), cfg.training, i); };
  auto run_b = [&](uint32_t i) { step(b, xb.ptr(), dyb.ptr(), cfg_b.training, i); };
  for (int i = 0; i < n_wu; ++i) {
    run_a(static_cast<uint32_t>(i));
    run_b(static_cast<uint32_t>(i));
  }
  if (graph) {
    ctx.synchronize();
    auto capture = [&](Timed& t, CUdeviceptr x, CUdeviceptr dy, bool training, const char* which) {
      t.fwd = std::make_unique<CapturedGraph>(ctx.stream(), fmt::format("layer {}'s forward", which),
                                              [&] { t.layer->forward(x, 0, y.ptr(), B, S, static_cast<uint32_t>(n_wu)); });
      if (training)
        t.bwd = std::make_unique<CapturedGraph>(ctx.stream(), fmt::format("layer {}'s backward", which),
                                                [&] { t.layer->backward(dy, dx.ptr()); });
    };
    capture(a, xa.ptr(), dya.ptr(), cfg.training, "A");
    capture(b, xb.ptr(), dyb.ptr(), cfg_b.training, "B");
  }
  Events e1, e2;  // e1.a .. e1.b: the pair's first block, e1.b .. e2.b: its second (e2.a unused)
  std::vector<double> a_ms, b_ms;
  GpuMonitor monitor(pci_bus_id(ctx.cu_device()));
  monitor.start();
  for (int p = 0; p < pairs; ++p) {
    const bool a_first = p % 2 == 0;
    const uint32_t base = static_cast<uint32_t>(n_wu + p * block);
    DSKC_CU(cuEventRecord(e1.a, ctx.stream()));
    for (int k = 0; k < block; ++k) a_first ? run_a(base + k) : run_b(base + k);
    DSKC_CU(cuEventRecord(e1.b, ctx.stream()));
    for (int k = 0; k < block; ++k) a_first ? run_b(base + k) : run_a(base + k);
    DSKC_CU(cuEventRecord(e2.b, ctx.stream()));
    DSKC_CU(cuEventSynchronize(e2.b));
    float first = 0, second = 0;
    DSKC_CU(cuEventElapsedTime(&first, e1.a, e1.b));
    DSKC_CU(cuEventElapsedTime(&second, e1.b, e2.b));
    (a_first ? a_ms : b_ms).push_back(first / block);
    (a_first ? b_ms : a_ms).push_back(second / block);
  }
  const GpuMonitorSummary gpu = monitor.stop();
  const PairedSummary r = summarize_pairs(a_ms, b_ms);
  const double mib_a = a.layer->plan().activation_bytes(B, S) / 1048576.0;
  const double mib_b = b.layer->plan().activation_bytes(B, S) / 1048576.0;
  if (csv) {
    // batch, seq, hidden, A's dtype, A's LayerNorm placement, A ms, B ms, B vs A % (median), its
    // interval's ends %, pairs, pairs with B faster, activation MiB A, B, mean SM MHz, mean W
    std::printf("%d,%d,%d,%s,%s,%.4f,%.4f,%.2f,%.2f,%.2f,%zu,%zu,%.2f,%.2f,%s,%s\n", B, S, cfg.hidden_size,
                dtype_name(ta), cfg.pre_layer_norm ? "pre" : "post", r.a_ms, r.b_ms, 100 * r.rel, 100 * r.lo,
                100 * r.hi, r.pairs, r.b_faster, mib_a, mib_b,
                gpu.available && gpu.samples ? fmt::format("{:.0f}", gpu.sm_mhz_mean).c_str() : "nan",
                gpu.available && gpu.samples && gpu.power_w_mean > 0 ? fmt::format("{:.0f}", gpu.power_w_mean).c_str()
                                                                     : "nan");
    return 0;
  }
  std::printf("dskc bench --versus on %s: hidden %d, heads %d, intermediate %d, batch %d, seq %d\n",
              ctx.device_name().c_str(), cfg.hidden_size, cfg.heads, cfg.intermediate_size, B, S);
  std::printf("A: %s, %s%s\nB: A with %s\n", dtype_name(ta), cfg.pre_layer_norm ? "Pre-LN" : "Post-LN",
              cfg.stochastic_mode ? ", stochastic_mode" : "", spec.text.c_str());
  std::printf("kernels only in A: %s\nkernels only in B: %s\n", kernels_not_in(a.layer->plan(), b.layer->plan()).c_str(),
              kernels_not_in(b.layer->plan(), a.layer->plan()).c_str());
  const bool b_override = std::any_of(spec.env.begin(), spec.env.end(), [](const auto& e) {
    return e.first == "DSKC_OVERRIDE_SOURCE" && !e.second.empty();
  });
  if (b_override)
    std::printf("generated source: B's replaced by DSKC_OVERRIDE_SOURCE's file\n");
  else if (emit(a.layer->plan()).source == emit(b.layer->plan()).source)
    std::printf("generated source: B's is A's (the changes act in the runtime only, or leave the defaults)\n");
  else
    std::printf("generated source: B's differs from A's\n");
  std::printf("timed: %d pairs of %d-step blocks (forward%s), %s, after %d warm-up steps of each\n", pairs, block,
              cfg.training ? " + backward" : "", graph ? "replayed from CUDA graphs" : "launched by the host", n_wu);
  std::printf("| layer | ms per step (median of %zu blocks) | activation MiB |\n", r.pairs);
  std::printf("|---|---:|---:|\n");
  std::printf("| A | %.4f | %.1f |\n| B | %.4f | %.1f |\n", r.a_ms, mib_a, r.b_ms, mib_b);
  std::printf("B vs A: %+.2f%% (median of the %zu pairs' ratios; ~95%% interval %+.2f%% .. %+.2f%%), B faster in %zu "
              "of %zu pairs\n", 100 * r.rel, r.pairs, 100 * r.lo, 100 * r.hi, r.b_faster, r.pairs);
  std::printf("%s\n", describe_gpu_state(gpu).c_str());
  return 0;
}
}  // namespace

int cmd_bench(const Args& args) {
  ArgParser p("bench", "Time one layer's forward and backward on the GPU (CUDA events, median of --iters after "
                       "--warmup) and print ms, TFLOP/s (2 FLOPs per multiply-add; backward = 2x forward), "
                       "activation MiB per layer, and the SM clock and board power NVML saw during the timed "
                       "iterations (a power-limited GPU such as the H200 holds its boost clock for the first ~50 ms "
                       "of load only: --warmup 300 measures the sustained state).");
  LayerArgs la;
  la.add_to(p);
  std::optional<int> batch, seq, iters, warmup, pairs, block;
  bool csv = false, profile = false, timeline = false, graph = false;
  std::string versus;
  p.add_int("batch", &batch, "micro-batch (default: the config's batch_size)");
  p.add_int("seq", &seq, "sequence length (default: max_seq_length)");
  p.add_int("iters", &iters, "timed iterations (default 50)");
  p.add_int("warmup", &warmup, "untimed iterations first (default 10)");
  p.add_switch("csv", &csv, "one CSV line instead of the table");
  p.add_switch("graph", &graph,
               "time the forward and the backward each replayed from a CUDA graph, captured after the warm-up: "
               "the GPU's work without the host's launch gaps (the form of bench/compare_torch.py's CUDA-graph "
               "columns); every replay repeats the captured dropout seed and step");
  p.add_switch("profile", &profile,
               "also time each kernel and GEMM (events around every step; runs the backward on one stream, so the "
               "per-step times add up while the plain timing overlaps the weight-gradient GEMMs)");
  std::string trace;
  p.add_option("trace", &trace, "FILE",
               "write the timeline (implies --timeline) as a Chrome trace JSON file, for chrome://tracing or "
               "ui.perfetto.dev");
  p.add_switch("timeline", &timeline,
               "also print when each kernel and GEMM starts and ends on its stream (events around every step, both "
               "streams kept), and how much of the step the main stream is busy");
  p.add_option("versus", &versus, "SPEC",
               "a paired A/B in one process: the layer against itself with SPEC's changes, comma-separated "
               "switches (attention_dropout_checkpoint, normalize_invertible, gelu_checkpoint, all_memory_flags, "
               "stochastic_mode, post_layer_norm, bf16, tanh_gelu) and DSKC_NAME=VALUE variables the second layer "
               "is built under (those a layer's build reads); blocks of steps of each alternate, and it prints the "
               "median of the pairs' ratios with a ~95% interval");
  p.add_int("pairs", &pairs, "with --versus: timed pairs of blocks (default 40)");
  p.add_int("block", &block, "with --versus: forward + backward steps per block (default 4)");
  if (!p.parse(args)) return 0;
  LayerConfig cfg = la.load();
  if (graph && warmup.value_or(10) < 1)
    throw Error(ErrorKind::Usage, "--graph needs --warmup >= 1: the first call allocates and loads what the layer "
                                  "launches, which a CUDA graph capture cannot do");
  const bool with_versus = p.given("versus");
  if (!with_versus && (pairs || block)) throw Error(ErrorKind::Usage, "--pairs and --block need --versus");
  if (with_versus) {
    if (iters || profile || timeline || !trace.empty())
      throw Error(ErrorKind::Usage, "--versus times pairs of blocks (--pairs, --block): it does not take --iters, "
                                    "--profile, --timeline or --trace");
    const VersusSpec spec = parse_versus(versus);
    const int n_pairs = pairs.value_or(40), n_block = block.value_or(4), n_wu = warmup.value_or(10);
    if (n_pairs < 1 || n_block < 1 || n_wu < 0)
      throw Error(ErrorKind::Usage, "--pairs and --block must be >= 1 and --warmup >= 0");
    versus_config(cfg, spec);  // a switch the layer has already fails before the GPU is touched
    return bench_versus(cfg, spec, batch.value_or(cfg.batch_size), seq.value_or(cfg.max_seq_length), n_pairs,
                        n_block, n_wu, graph, csv);
  }
  const int B = batch.value_or(cfg.batch_size), S = seq.value_or(cfg.max_seq_length);
  const int n_it = iters.value_or(50), n_wu = warmup.value_or(10);
  if (n_it < 1 || n_wu < 0) throw Error(ErrorKind::Usage, "--iters must be >= 1 and --warmup >= 0");
  if (!trace.empty()) {  // fail before the timing, not after it
    const std::filesystem::path dir = std::filesystem::path(trace).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir))
      throw Error(ErrorKind::Io, "--trace " + trace + ": directory " + dir.string() + " does not exist");
  }
  Context ctx(cfg.local_rank);
  TransformerLayer layer(ctx, cfg);
  layer.set_params(init_layer_params(cfg, 1));
  const DType t = cfg.dtype();
  const size_t n = static_cast<size_t>(B) * S * cfg.hidden_size, eb = dtype_bytes(t);
  DeviceBuffer x(ctx, n * eb), y(ctx, n * eb), dy(ctx, n * eb), dx(ctx, n * eb);
  std::vector<float> hx(n);
  for (size_t i = 0; i < n; ++i) hx[i] = static_cast<float>((i * 2654435761u) % 2001) / 1000.f - 1.f;
  upload(ctx, x.ptr(), hx, t);
  upload(ctx, dy.ptr(), hx, t);
  Events fe, be;
  std::vector<double> f_ms, b_ms, f_host_ms, b_host_ms;  // GPU time (events), host time to issue the work
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  GpuMonitor monitor(pci_bus_id(ctx.cu_device()));
  // With --graph, the forward and the backward of step n_wu are captured (not run) after the warm-up
  // and the timed iterations replay them.
  std::unique_ptr<CapturedGraph> fwd_graph, bwd_graph;
  size_t graph_nodes = 0;
  for (int i = 0; i < n_wu + n_it; ++i) {
    if (i == n_wu) {
      if (graph) {
        ctx.synchronize();
        fwd_graph = std::make_unique<CapturedGraph>(ctx.stream(), "the layer's forward", [&] {
          layer.forward(x.ptr(), 0, y.ptr(), B, S, static_cast<uint32_t>(i));
        });
        graph_nodes += fwd_graph->nodes();
        if (cfg.training) {
          bwd_graph = std::make_unique<CapturedGraph>(ctx.stream(), "the layer's backward",
                                                      [&] { layer.backward(dy.ptr(), dx.ptr()); });
          graph_nodes += bwd_graph->nodes();
        }
      }
      monitor.start();
    }
    DSKC_CU(cuEventRecord(fe.a, ctx.stream()));
    const Clock::time_point f_issue = Clock::now();
    if (fwd_graph)
      fwd_graph->launch(ctx.stream());
    else
      layer.forward(x.ptr(), 0, y.ptr(), B, S, static_cast<uint32_t>(i));
    const double f_host = ms_since(f_issue);
    DSKC_CU(cuEventRecord(fe.b, ctx.stream()));
    double b_host = 0;
    if (cfg.training) {
      DSKC_CU(cuEventRecord(be.a, ctx.stream()));
      const Clock::time_point b_issue = Clock::now();
      if (bwd_graph)
        bwd_graph->launch(ctx.stream());
      else
        layer.backward(dy.ptr(), dx.ptr());
      b_host = ms_since(b_issue);
      DSKC_CU(cuEventRecord(be.b, ctx.stream()));
    }
    if (i >= n_wu) {
      f_ms.push_back(fe.ms());
      f_host_ms.push_back(f_host);
      if (cfg.training) {
        b_ms.push_back(be.ms());
        b_host_ms.push_back(b_host);
      }
    }
  }
  ctx.synchronize();
  const GpuMonitorSummary gpu = monitor.stop();
  if (profile) {
    Profiler prof;
    layer.set_profiler(&prof);
    for (int i = 0; i < n_it; ++i) {
      layer.forward(x.ptr(), 0, y.ptr(), B, S, static_cast<uint32_t>(i));
      if (cfg.training) layer.backward(dy.ptr(), dx.ptr());
      prof.collect();
    }
    layer.set_profiler(nullptr);
    double total = 0;
    for (const auto& [name, ms] : prof.totals()) total += ms;
    std::printf("per-step profile (mean of %d iterations, ms):\n", n_it);
    for (const auto& [name, ms] : prof.totals())
      std::printf("  %-44s %8.4f  %5.1f%%\n", name.c_str(), ms / n_it, 100.0 * ms / total);
    std::printf("  %-44s %8.4f\n", "sum", total / n_it);
  }
  if (timeline || !trace.empty()) {
    const auto steps = print_timeline(layer, cfg, x.ptr(), y.ptr(), dy.ptr(), dx.ptr(), B, S, n_it, ctx.stream());
    if (!trace.empty()) {
      write_file_atomic(trace, chrome_trace_json(steps, fmt::format("dskc bench {} x {} ({}, {})", B, S,
                                                                     dtype_name(t), ctx.device_name())));
      std::printf("wrote the timeline as a Chrome trace to %s\n", trace.c_str());
    }
  }
  const double fm = median(f_ms), bm = cfg.training ? median(b_ms) : 0.0;
  const double fh = median(f_host_ms), bh = cfg.training ? median(b_host_ms) : 0.0;
  const double flops = layer_forward_flops(cfg, B, S) * (cfg.training ? 3.0 : 1.0);
  const double tflops = flops / ((fm + bm) * 1e-3) / 1e12;
  const double act_mib = layer.plan().activation_bytes(B, S) / 1048576.0;
  if (csv) {
    // ..., activation MiB, then the timed iterations' mean SM clock (MHz) and board power (W) (nan
    // where NVML is not available), then the host's median time to issue the forward and the backward
    std::printf("%d,%d,%d,%s,%s,%.4f,%.4f,%.4f,%.1f,%.2f,%s,%s,%.4f,%.4f\n", B, S, cfg.hidden_size, dtype_name(t),
                cfg.pre_layer_norm ? "pre" : "post", fm, bm, fm + bm, tflops, act_mib,
                gpu.available && gpu.samples ? fmt::format("{:.0f}", gpu.sm_mhz_mean).c_str() : "nan",
                gpu.available && gpu.samples && gpu.power_w_mean > 0 ? fmt::format("{:.0f}", gpu.power_w_mean).c_str()
                                                                     : "nan",
                fh, bh);
    return 0;
  }
  std::printf("dskc bench on %s: hidden %d, heads %d, intermediate %d, %s, %s%s\n", ctx.device_name().c_str(),
              cfg.hidden_size, cfg.heads, cfg.intermediate_size, dtype_name(t),
              cfg.pre_layer_norm ? "Pre-LN" : "Post-LN", cfg.stochastic_mode ? ", stochastic_mode" : "");
  std::printf("module: %s in %.0f ms\n", layer.module_from_cache() ? "cache hit" : "compiled", layer.module_build_ms());
  if (graph)
    std::printf("timed: the forward and the backward replayed from CUDA graphs (%zu nodes), captured after %d "
                "warm-up iterations\n", graph_nodes, n_wu);
  std::printf("| batch | seq | forward ms | backward ms | total ms | TFLOP/s | activation MiB |\n");
  std::printf("|------:|----:|-----------:|------------:|---------:|--------:|---------------:|\n");
  std::printf("| %5d | %3d | %10.3f | %11.3f | %8.3f | %7.1f | %14.1f |\n", B, S, fm, bm, fm + bm, tflops, act_mib);
  std::printf("%s\n", describe_gpu_state(gpu).c_str());
  std::printf("host time to issue (median): forward %.3f ms, backward %.3f ms%s\n", fh, bh,
              fh > 0.8 * fm || bh > 0.8 * bm ? ": close to the GPU's time, so the GPU waits for the host's "
                                               "launches (--graph leaves them out)"
                                             : "");
  return 0;
}

}  // namespace dskc::cli
