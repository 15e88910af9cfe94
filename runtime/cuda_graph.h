// A CUDA graph captured from the work one call issues on a stream (and on the streams it forks from
// that stream and joins back), instantiated once and replayed with one launch: `dskc bench --graph`
// times a layer's forward and backward without the host's launch gaps, the form in which
// bench/compare_torch.py times PyTorch's CUDA-graph columns. A replay repeats the captured work
// exactly: the same buffers, the same kernel arguments (so the same dropout seed and step).
#pragma once
#include <cuda.h>

#include <functional>
#include <string>

namespace dskc {

class CapturedGraph {
 public:
  // Runs `issue` with `stream` capturing (thread-local mode: a call that would synchronize or allocate
  // fails instead of running) and instantiates the graph. `issue` must not be the first use of what it
  // launches (allocations, module loads, autotuning): run it once before. Throws Error(Device) naming
  // `what` and the cause when the work cannot be captured; the stream is out of capture mode then.
  CapturedGraph(CUstream stream, const std::string& what, const std::function<void()>& issue);
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // Enqueues one replay on `stream`.
  void launch(CUstream stream) const;
  // Kernel, memset and other nodes in the graph (events and waits between streams become edges).
  size_t nodes() const { return nodes_; }

 private:
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
  size_t nodes_ = 0;
};

}  // namespace dskc
