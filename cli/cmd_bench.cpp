// `dskc bench`: times a layer's forward and backward on the GPU with CUDA events (warm-up first,
// median of many iterations) and prints ms, TFLOP/s and activation MiB per layer, with the SM clock
// and board power NVML saw during the timed iterations (runtime/gpu_monitor.h).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/layer_args.h"
#include "compiler/errors.h"
#include "compiler/fileio.h"
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
}  // namespace

int cmd_bench(const Args& args) {
  ArgParser p("bench", "Time one layer's forward and backward on the GPU (CUDA events, median of --iters after "
                       "--warmup) and print ms, TFLOP/s (2 FLOPs per multiply-add; backward = 2x forward), "
                       "activation MiB per layer, and the SM clock and board power NVML saw during the timed "
                       "iterations (a power-limited GPU such as the H200 holds its boost clock for the first ~50 ms "
                       "of load only: --warmup 300 measures the sustained state).");
  LayerArgs la;
  la.add_to(p);
  std::optional<int> batch, seq, iters, warmup;
  bool csv = false, profile = false, timeline = false, graph = false;
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
  if (!p.parse(args)) return 0;
  LayerConfig cfg = la.load();
  const int B = batch.value_or(cfg.batch_size), S = seq.value_or(cfg.max_seq_length);
  const int n_it = iters.value_or(50), n_wu = warmup.value_or(10);
  if (n_it < 1 || n_wu < 0) throw Error(ErrorKind::Usage, "--iters must be >= 1 and --warmup >= 0");
  if (graph && n_wu < 1)
    throw Error(ErrorKind::Usage, "--graph needs --warmup >= 1: the first call allocates and loads what the layer "
                                  "launches, which a CUDA graph capture cannot do");
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
