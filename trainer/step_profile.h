// Step profile (`dskc train --profile_steps N`): where the time of a training step goes. The
// trainer and the backend set a mark at the end of each phase of a step (the trainer around its
// calls, the backend inside forward_backward); each mark has two times:
//  - device: when the backend's work queue reached the mark (the CUDA backend: an event on its main
//    stream; the CPU backend computes on the host, so its device time is the host clock). The time
//    between two marks is what the GPU spent on that phase, including any time it sat idle waiting
//    for the host to issue it (e.g. while the host reads the next batch).
//  - host: when the host set it. The time between two marks is what the host spent issuing (or, for
//    the CPU backend, computing) that phase.
// The interval before a mark is attributed to that mark's phase; a phase marked several times in a
// step (once per micro-batch) adds up. The table gives each phase's mean per step over the steps
// profiled, in the order the phases first appeared.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dskc {

// The phases the trainer and the backends mark, in step order (a backend marks those it has).
namespace phase {
inline constexpr const char* kStepStart = "step start";                           // trainer
inline constexpr const char* kZeroGrads = "zero gradients";                       // trainer
inline constexpr const char* kNextBatch = "host: take the next micro-batch";      // trainer (read ahead)
inline constexpr const char* kBatchUpload = "batch index tables and upload";      // backend
inline constexpr const char* kEmbeddingsFwd = "embeddings forward";               // backend
inline constexpr const char* kEncoderFwd = "encoder forward";                     // backend
inline constexpr const char* kHeads = "final LayerNorm, MLM and NSP heads, forward and backward";  // backend
inline constexpr const char* kEncoderBwd = "encoder backward";                    // backend
inline constexpr const char* kEmbeddingsBwd = "embeddings backward";              // backend
inline constexpr const char* kAllReduceWait = "wait for the gradient all-reduce";  // backend, data parallel
inline constexpr const char* kLossDownload = "loss download";                     // backend (CUDA)
inline constexpr const char* kOverflowCheck = "gradient overflow check";          // trainer
inline constexpr const char* kGradNorm = "gradient norm";                         // trainer
inline constexpr const char* kOptimizer = "optimizer step";                       // trainer
inline constexpr const char* kBookkeeping = "host: metrics and progress line";    // trainer
}  // namespace phase

struct PhaseMark {
  std::string phase;
  double device_ms = 0.0;  // after the sequence's first mark, on the device's timeline
  double host_ms = 0.0;    // after the sequence's first mark, on the host's clock
};

class PhaseTimer {
 public:
  virtual ~PhaseTimer() = default;
  // Marks the end of `phase` now.
  virtual void mark(const char* phase) = 0;
  // Waits until the device has passed every mark since the last take(), returns them (times after
  // the first of them) and starts a new sequence.
  virtual std::vector<PhaseMark> take() = 0;
};

// Both times from the host's clock: for a backend whose work is done when its call returns.
class HostPhaseTimer : public PhaseTimer {
 public:
  void mark(const char* phase) override;
  std::vector<PhaseMark> take() override;

 private:
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<std::string, Clock::time_point>> marks_;
};

class StepProfile {
 public:
  // One step's marks (PhaseTimer::take); the first is the step's start (its phase is not counted).
  // Error(Internal) when the marks go back in time.
  void add_step(const std::vector<PhaseMark>& marks);
  int steps() const { return steps_; }

  struct Row {
    std::string phase;
    double device_ms = 0.0, host_ms = 0.0;  // sums over the steps added
    int64_t marks = 0;                      // times marked over the steps added
  };
  const std::vector<Row>& rows() const { return rows_; }
  // Mean step length from the first mark to the last, device and host timelines.
  double mean_step_device_ms() const { return steps_ ? step_device_ms_ / steps_ : 0.0; }
  double mean_step_host_ms() const { return steps_ ? step_host_ms_ / steps_ : 0.0; }

  // A markdown table: phase, marks per step, device ms per step and its share of the step, host ms
  // per step; then the whole step.
  std::string table() const;

 private:
  std::vector<Row> rows_;
  int steps_ = 0;
  double step_device_ms_ = 0.0, step_host_ms_ = 0.0;
};

}  // namespace dskc
