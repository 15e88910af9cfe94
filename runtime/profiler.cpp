// Profiler implementation (see profiler.h).
#include "runtime/profiler.h"

#include "runtime/driver.h"

namespace dskc {

Profiler::~Profiler() {
  for (auto& s : spans_) {
    free_.push_back(s.a);
    free_.push_back(s.b);
  }
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

void Profiler::begin(const std::string& name, CUstream s) {
  spans_.push_back({name, take(), take()});
  DSKC_CU(cuEventRecord(spans_.back().a, s));
}

void Profiler::end(CUstream s) { DSKC_CU(cuEventRecord(spans_.back().b, s)); }

void Profiler::collect() {
  for (auto& s : spans_) {
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
    free_.push_back(s.a);
    free_.push_back(s.b);
  }
  spans_.clear();
}

}  // namespace dskc
