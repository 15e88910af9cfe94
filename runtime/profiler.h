// Per-step timing of a layer's schedule with CUDA events (dskc bench --profile): each kernel and
// GEMM is bracketed by two events; totals per step name are read back after synchronizing.
// Adds launch overhead, so profile totals exceed plain timings slightly.
#pragma once
#include <cuda.h>

#include <map>
#include <string>
#include <vector>

namespace dskc {

class Profiler {
 public:
  ~Profiler();
  void begin(const std::string& name, CUstream s);
  void end(CUstream s);
  // Synchronizes, folds recorded events into totals (ms), and recycles the events.
  void collect();
  const std::vector<std::pair<std::string, double>>& totals() const { return totals_; }

 private:
  struct Span {
    std::string name;
    CUevent a, b;
  };
  CUevent take();
  std::vector<Span> spans_;
  std::vector<CUevent> free_;
  std::vector<std::pair<std::string, double>> totals_;  // insertion order
};

}  // namespace dskc
