// Step profile (see step_profile.h).
#include "trainer/step_profile.h"

#include <fmt/format.h>

#include <algorithm>

#include "compiler/errors.h"

namespace dskc {

void HostPhaseTimer::mark(const char* phase) { marks_.emplace_back(phase, Clock::now()); }

std::vector<PhaseMark> HostPhaseTimer::take() {
  std::vector<PhaseMark> out;
  out.reserve(marks_.size());
  for (const auto& [phase, t] : marks_) {
    const double ms = std::chrono::duration<double, std::milli>(t - marks_.front().second).count();
    out.push_back({phase, ms, ms});
  }
  marks_.clear();
  return out;
}

void StepProfile::add_step(const std::vector<PhaseMark>& marks) {
  if (marks.size() < 2) return;
  for (size_t i = 1; i < marks.size(); ++i) {
    const double d = marks[i].device_ms - marks[i - 1].device_ms, h = marks[i].host_ms - marks[i - 1].host_ms;
    DSKC_ASSERT(d >= 0.0 && h >= 0.0, fmt::format("step profile: mark \"{}\" is earlier than the one before it",
                                                  marks[i].phase));
    auto row = std::find_if(rows_.begin(), rows_.end(), [&](const Row& r) { return r.phase == marks[i].phase; });
    if (row == rows_.end()) row = rows_.insert(rows_.end(), Row{marks[i].phase});
    row->device_ms += d;
    row->host_ms += h;
    row->marks += 1;
  }
  step_device_ms_ += marks.back().device_ms - marks.front().device_ms;
  step_host_ms_ += marks.back().host_ms - marks.front().host_ms;
  steps_ += 1;
}

std::string StepProfile::table() const {
  if (steps_ == 0) return "";
  const double n = steps_, step = mean_step_device_ms();
  std::string out = "| phase | marks per step | device ms | % of step | host ms |\n|---|---:|---:|---:|---:|\n";
  for (const Row& r : rows_)
    out += fmt::format("| {} | {:g} | {:.3f} | {:.1f} | {:.3f} |\n", r.phase, r.marks / n, r.device_ms / n,
                       step > 0 ? 100.0 * r.device_ms / n / step : 0.0, r.host_ms / n);
  out += fmt::format("| whole step | | {:.3f} | 100.0 | {:.3f} |\n", step, mean_step_host_ms());
  return out;
}

}  // namespace dskc
