// Per-step timing of a layer's schedule with CUDA events (dskc bench --profile, --timeline): each
// kernel and GEMM is bracketed by two events recorded on the stream it runs on; totals per step
// name (and, for a timeline, each step's start and end on its stream) are read back after
// synchronizing. Adds launch overhead, so profile totals exceed plain timings slightly.
#pragma once
#include <cuda.h>

#include <map>
#include <string>
#include <vector>

namespace dskc {

class Profiler {
 public:
  // One step of a timeline: where it ran and when (ms after the origin event), mean over collects.
  struct Step {
    std::string name;
    bool side = false;  // on the layer's side stream (else the stream the origin was marked on)
    double start = 0, end = 0;
  };

  // timeline = false: the layer runs everything on one stream while attached, so the per-step
  // times add up (totals()). timeline = true: the layer keeps its side stream and each collect()
  // also adds every step's start and end relative to the last mark_origin() into timeline().
  explicit Profiler(bool timeline = false) : timeline_mode_(timeline) {}
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  bool keeps_streams() const { return timeline_mode_; }
  // Records the origin of the next collect()'s timeline on stream s (the main stream).
  void mark_origin(CUstream s);
  void begin(const std::string& name, CUstream s);
  void end(CUstream s);
  // Synchronizes, folds recorded events into totals (ms) and the timeline, and recycles the events.
  void collect();
  const std::vector<std::pair<std::string, double>>& totals() const { return totals_; }
  // Timeline steps in recording order, start and end averaged over the collects so far.
  std::vector<Step> timeline() const;

 private:
  struct Span {
    std::string name;
    CUstream stream;
    CUevent a, b;
  };
  CUevent take();
  bool timeline_mode_;
  CUevent origin_ = nullptr;
  CUstream origin_stream_ = nullptr;
  std::vector<Span> spans_;
  std::vector<CUevent> free_;
  std::vector<std::pair<std::string, double>> totals_;  // insertion order
  std::vector<Step> sums_;                              // timeline sums over collects
  int collects_ = 0;
};

// Busy time of a set of [start, end) intervals (their union), in the intervals' unit.
double busy_time(std::vector<std::pair<double, double>> intervals);

// A timeline's streams: the wall (the last step's end), each stream's busy time and both at once.
struct StreamBusy {
  double wall = 0, main = 0, side = 0, both = 0;
};
StreamBusy stream_busy(const std::vector<Profiler::Step>& steps);

// A timeline as a Chrome trace (the JSON object format of chrome://tracing and Perfetto): one
// complete event ("ph": "X", microseconds) per step on thread 0 ("main stream") or 1 ("side
// stream") of process 0, named by `title`.
std::string chrome_trace_json(const std::vector<Profiler::Step>& steps, const std::string& title);

}  // namespace dskc
