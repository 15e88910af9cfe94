// NVML sampling of the SM clock and board power (see gpu_monitor.h).
#include "runtime/gpu_monitor.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <mutex>

namespace dskc {

namespace {
// The few NVML entry points used, declared here (nvml.h is not needed to build dskc).
using nvmlDevice = void*;
struct Nvml {
  int (*init)() = nullptr;
  int (*by_bus_id)(const char*, nvmlDevice*) = nullptr;
  int (*clock)(nvmlDevice, int, unsigned*) = nullptr;
  int (*power)(nvmlDevice, unsigned*) = nullptr;
  int (*power_limit)(nvmlDevice, unsigned*) = nullptr;
  int (*reasons)(nvmlDevice, unsigned long long*) = nullptr;
  std::string error;  // why NVML is not usable (empty: it is)
};
constexpr int kNvmlClockSm = 1;

template <typename F>
bool sym(void* lib, F& fn, const char* name, const char* alt = nullptr) {
  void* s = dlsym(lib, name);
  if (!s && alt) s = dlsym(lib, alt);
  fn = reinterpret_cast<F>(s);
  return s != nullptr;
}

const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libnvidia-ml.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      n.error = "libnvidia-ml.so.1 not found";
      return;
    }
    if (!sym(lib, n.init, "nvmlInit_v2", "nvmlInit") ||
        !sym(lib, n.by_bus_id, "nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId") ||
        !sym(lib, n.clock, "nvmlDeviceGetClockInfo")) {
      n.error = "libnvidia-ml lacks nvmlInit / nvmlDeviceGetHandleByPciBusId / nvmlDeviceGetClockInfo";
      return;
    }
    // optional: a device may not report power or reasons
    sym(lib, n.power, "nvmlDeviceGetPowerUsage");
    sym(lib, n.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    sym(lib, n.reasons, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons");
    if (const int rc = n.init(); rc != 0) n.error = fmt::format("nvmlInit failed ({})", rc);
  });
  return n;
}
}  // namespace

GpuMonitorSummary summarize_samples(const std::vector<GpuSample>& s, double power_limit_w) {
  GpuMonitorSummary r;
  r.available = true;
  r.power_limit_w = power_limit_w;
  r.samples = s.size();
  if (s.empty()) return r;
  r.sm_mhz_min = r.sm_mhz_max = s.front().sm_mhz;
  for (const GpuSample& x : s) {
    r.sm_mhz_mean += x.sm_mhz;
    r.power_w_mean += x.power_w;
    r.sm_mhz_min = std::min(r.sm_mhz_min, x.sm_mhz);
    r.sm_mhz_max = std::max(r.sm_mhz_max, x.sm_mhz);
    r.reasons |= x.reasons;
  }
  r.sm_mhz_mean /= static_cast<double>(s.size());
  r.power_w_mean /= static_cast<double>(s.size());
  return r;
}

std::string clock_reason_names(uint64_t reasons) {
  // NVML's nvmlClocksEventReason* bits (GPU idle and the application clock setting left out: they
  // say nothing about a slowdown)
  static const std::pair<uint64_t, const char*> kNames[] = {
      {0x4, "sw power cap"},          {0x8, "hw slowdown"},           {0x10, "sync boost"},
      {0x20, "sw thermal slowdown"},  {0x40, "hw thermal slowdown"},  {0x80, "hw power brake"},
      {0x100, "display clock"},
  };
  std::string out;
  for (const auto& [bit, name] : kNames)
    if (reasons & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

std::string describe_gpu_state(const GpuMonitorSummary& s) {
  if (!s.available)
    return "GPU clock and power: not read (" + (s.why.empty() ? std::string("NVML unavailable") : s.why) + ")";
  if (s.samples == 0) return "GPU clock and power: no sample (the timed iterations took less than one sampling period)";
  std::string out = fmt::format("GPU during the timed iterations ({} samples): SM clock {:.0f} MHz mean ({}-{})",
                                s.samples, s.sm_mhz_mean, s.sm_mhz_min, s.sm_mhz_max);
  if (s.power_w_mean > 0) out += fmt::format(", power {:.0f} W mean", s.power_w_mean);
  if (s.power_limit_w > 0) out += fmt::format(" (limit {:.0f} W)", s.power_limit_w);
  const std::string why = clock_reason_names(s.reasons);
  out += why.empty() ? ", no clock slowdown reported" : ", clock lowered by: " + why;
  return out;
}

GpuMonitor::GpuMonitor(const std::string& pci_bus_id, int period_ms) : period_ms_(std::max(1, period_ms)) {
  const Nvml& n = nvml();
  if (!n.error.empty()) {
    why_ = n.error;
    return;
  }
  nvmlDevice d = nullptr;
  if (const int rc = n.by_bus_id(pci_bus_id.c_str(), &d); rc != 0 || !d) {
    why_ = fmt::format("NVML does not know the device at {} ({})", pci_bus_id, rc);
    return;
  }
  unsigned mhz = 0;
  if (n.clock(d, kNvmlClockSm, &mhz) != 0) {
    why_ = "NVML reports no SM clock for this device";
    return;
  }
  unsigned mw = 0;
  if (n.power_limit && n.power_limit(d, &mw) == 0) power_limit_w_ = mw / 1000.0;
  dev_ = d;
}

GpuMonitor::~GpuMonitor() {
  if (thread_.joinable()) {
    run_ = false;
    thread_.join();
  }
}

void GpuMonitor::start() {
  samples_.clear();
  if (!dev_ || thread_.joinable()) return;
  run_ = true;
  thread_ = std::thread([this] {
    const Nvml& n = nvml();
    const auto t0 = std::chrono::steady_clock::now();
    while (run_) {
      GpuSample s;
      s.t_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      n.clock(dev_, kNvmlClockSm, &s.sm_mhz);
      unsigned mw = 0;
      if (n.power && n.power(dev_, &mw) == 0) s.power_w = mw / 1000.0;
      unsigned long long r = 0;
      if (n.reasons && n.reasons(dev_, &r) == 0) s.reasons = r;
      samples_.push_back(s);
      std::this_thread::sleep_for(std::chrono::milliseconds(period_ms_));
    }
  });
}

GpuMonitorSummary GpuMonitor::stop() {
  if (thread_.joinable()) {
    run_ = false;
    thread_.join();
  }
  if (!dev_) {
    GpuMonitorSummary r;
    r.why = why_;
    return r;
  }
  return summarize_samples(samples_, power_limit_w_);
}

}  // namespace dskc
