// What the GPU's clock and power did while a benchmark ran: NVML (libnvidia-ml.so.1, loaded with
// dlopen like the driver) sampled on a background thread. On the H200 the SM clock of a layer step
// falls from 1.98 GHz to ~1.5 GHz under sustained tensor-core load, so a timing means little without
// the clock it ran at (bench/NOTES.md v31). Without NVML (no driver, a container without the
// library, a device NVML cannot find) the monitor reports `available == false` and times nothing:
// benchmarks go on without the columns.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace dskc {

struct GpuSample {
  double t_ms = 0;           // since start()
  unsigned sm_mhz = 0;       // current SM clock
  double power_w = 0;        // board power draw
  uint64_t reasons = 0;      // NVML clocks event (throttle) reasons, a bit set
};

struct GpuMonitorSummary {
  bool available = false;    // NVML answered for this device
  std::string why;           // when not: what was missing
  size_t samples = 0;
  double sm_mhz_mean = 0, power_w_mean = 0;
  unsigned sm_mhz_min = 0, sm_mhz_max = 0;
  double power_limit_w = 0;  // the enforced power limit (0: unknown)
  uint64_t reasons = 0;      // OR of every sample's reasons
};

// Summary of samples (pure; the monitor's and the tests'): means, extremes, OR of the reasons.
GpuMonitorSummary summarize_samples(const std::vector<GpuSample>& s, double power_limit_w);
// "sw power cap, hw slowdown" for NVML's clocks event reason bits (empty: none but idle / app clocks).
std::string clock_reason_names(uint64_t reasons);

// One line for a benchmark's output: "GPU during the timed iterations: SM clock 1523 MHz mean
// (1410-1980), power 455 W mean (limit 700 W), clock lowered by: sw power cap", or why it was not read.
std::string describe_gpu_state(const GpuMonitorSummary& s);

class GpuMonitor {
 public:
  // pci_bus_id: cuDeviceGetPCIBusId of the benchmarked device (NVML's indices need not be CUDA's).
  explicit GpuMonitor(const std::string& pci_bus_id, int period_ms = 5);
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;
  bool available() const { return dev_ != nullptr; }
  void start();  // clears the samples, starts sampling
  GpuMonitorSummary stop();
  const std::vector<GpuSample>& samples() const { return samples_; }

 private:
  void* dev_ = nullptr;
  std::string why_;
  int period_ms_;
  double power_limit_w_ = 0;
  std::vector<GpuSample> samples_;
  std::atomic<bool> run_{false};
  std::thread thread_;
};

}  // namespace dskc
