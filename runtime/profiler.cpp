// Profiler implementation (see profiler.h).
#include "runtime/profiler.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "compiler/errors.h"
#include "runtime/driver.h"

namespace dskc {

Profiler::~Profiler() {
  for (auto& s : spans_) {
    free_.push_back(s.a);
    free_.push_back(s.b);
  }
  if (origin_) free_.push_back(origin_);
  for (CUevent e : free_) driver().cuEventDestroy(e);
}

CUevent Profiler::take() {
  if (!free_.empty()) {
    CUevent e = free_.back();
    free_.pop_back();
    return e;
  }
  CUevent e;
  DSKC_CU(cuEventCreate(&e, CU_EVENT_DEFAULT));
  return e;
}

void Profiler::mark_origin(CUstream s) {
  if (!origin_) origin_ = take();
  origin_stream_ = s;
  DSKC_CU(cuEventRecord(origin_, s));
}

void Profiler::begin(const std::string& name, CUstream s) {
  spans_.push_back({name, s, take(), take()});
  DSKC_CU(cuEventRecord(spans_.back().a, s));
}

void Profiler::end(CUstream s) { DSKC_CU(cuEventRecord(spans_.back().b, s)); }

void Profiler::collect() {
  const bool timed = timeline_mode_ && origin_;
  if (timed && collects_ > 0 && sums_.size() != spans_.size())
    throw Error(ErrorKind::Internal, "profiler timeline: the step sequence changed between iterations");
  if (timed && collects_ == 0) sums_.assign(spans_.size(), Step{});
  for (size_t i = 0; i < spans_.size(); ++i) {
    Span& s = spans_[i];
    DSKC_CU(cuEventSynchronize(s.b));
    float ms = 0;
    DSKC_CU(cuEventElapsedTime(&ms, s.a, s.b));
    bool found = false;
    for (auto& [n, t] : totals_)
      if (n == s.name) {
        t += ms;
        found = true;
      }
    if (!found) totals_.push_back({s.name, ms});
    if (timed) {
      float t0 = 0, t1 = 0;
      DSKC_CU(cuEventElapsedTime(&t0, origin_, s.a));
      DSKC_CU(cuEventElapsedTime(&t1, origin_, s.b));
      Step& st = sums_[i];
      if (collects_ > 0 && st.name != s.name)
        throw Error(ErrorKind::Internal, "profiler timeline: step " + std::to_string(i) + " was " + st.name +
                                            ", now " + s.name);
      st.name = s.name;
      st.side = s.stream != origin_stream_;
      st.start += t0;
      st.end += t1;
    }
    free_.push_back(s.a);
    free_.push_back(s.b);
  }
  if (timed) ++collects_;
  spans_.clear();
}

std::vector<Profiler::Step> Profiler::timeline() const {
  std::vector<Step> v = sums_;
  for (Step& s : v) {
    s.start /= std::max(collects_, 1);
    s.end /= std::max(collects_, 1);
  }
  return v;
}

double busy_time(std::vector<std::pair<double, double>> iv) {
  std::sort(iv.begin(), iv.end());
  double busy = 0, a = 0, b = 0;
  bool open = false;
  for (const auto& [s, e] : iv) {
    if (!open || s > b) {
      if (open) busy += b - a;
      a = s;
      b = e;
      open = true;
    } else {
      b = std::max(b, e);
    }
  }
  if (open) busy += b - a;
  return busy;
}

StreamBusy stream_busy(const std::vector<Profiler::Step>& steps) {
  std::vector<std::pair<double, double>> on_main, on_side;
  StreamBusy r;
  for (const Profiler::Step& s : steps) {
    (s.side ? on_side : on_main).push_back({s.start, s.end});
    r.wall = std::max(r.wall, s.end);
  }
  r.main = busy_time(on_main);
  r.side = busy_time(on_side);
  on_main.insert(on_main.end(), on_side.begin(), on_side.end());
  r.both = r.main + r.side - busy_time(on_main);
  return r;
}

std::string chrome_trace_json(const std::vector<Profiler::Step>& steps, const std::string& title) {
  using nlohmann::json;
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", title}}}});
  for (int tid : {0, 1})
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", tid},
                      {"args", {{"name", tid == 0 ? "main stream" : "side stream"}}}});
  for (const Profiler::Step& s : steps)
    events.push_back({{"name", s.name}, {"ph", "X"}, {"pid", 0}, {"tid", s.side ? 1 : 0}, {"ts", s.start * 1e3},
                      {"dur", (s.end - s.start) * 1e3}});
  return json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump(1) + "\n";
}

}  // namespace dskc
