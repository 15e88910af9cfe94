// CUDA graphs captured from the work one call issues on a stream (and on the streams it forks from
// that stream and joins back). Two uses:
//  - CapturedGraph: captured once, replayed unchanged (`dskc bench --graph` times a layer's forward and
//    backward without the host's launch gaps, the form in which bench/compare_torch.py times PyTorch's
//    CUDA-graph columns). A replay repeats the captured work exactly: the same buffers and kernel
//    arguments, so the same dropout seed and step.
//  - GraphExec: re-captured every call and updated in place (LayerOptions::cuda_graphs, `dskc train
//    --cuda-graphs`): each call's own arguments (step, buffers, shapes), launched as one graph.
#pragma once
#include <cuda.h>

#include <functional>
#include <string>

namespace dskc {

// Runs `issue` with `stream` capturing (thread-local mode: a call that would synchronize or allocate
// fails instead of running) and returns the captured graph (the caller destroys it). Nothing runs on
// the GPU. Throws Error(Device) naming `what` and the cause when the work cannot be captured; the
// stream is out of capture mode then.
CUgraph capture_graph(CUstream stream, const std::string& what, const std::function<void()>& issue);

// An executable graph that each new capture of the same work replaces: by an in-place update where
// the topology is the same (only kernel arguments, grid sizes or memset targets differ: cheap), else by
// a new instantiation.
class GraphExec {
 public:
  GraphExec() = default;
  ~GraphExec();
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;

  // Takes ownership of `graph` (destroyed here). Returns true where it updated the executable graph
  // in place, false where it instantiated a new one. Throws Error(Device) naming `what`.
  bool set(CUgraph graph, const std::string& what);
  // Enqueues one launch on `stream`; requires a set() before.
  void launch(CUstream stream) const;
  // Nodes of the latest graph (kernels, memsets, copies; waits between streams become edges).
  size_t nodes() const { return nodes_; }
  explicit operator bool() const { return exec_ != nullptr; }

 private:
  CUgraphExec exec_ = nullptr;
  size_t nodes_ = 0;
};

class CapturedGraph {
 public:
  // capture_graph + instantiate: `issue` must not be the first use of what it launches (allocations,
  // module loads, autotuning): run it once before.
  CapturedGraph(CUstream stream, const std::string& what, const std::function<void()>& issue);
  void launch(CUstream stream) const { exec_.launch(stream); }
  size_t nodes() const { return exec_.nodes(); }

 private:
  GraphExec exec_;
};

}  // namespace dskc
