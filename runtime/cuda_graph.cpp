// CUDA graph capture, update and replay (see cuda_graph.h).
#include "runtime/cuda_graph.h"

#include <fmt/format.h>

#include "compiler/errors.h"
#include "runtime/driver.h"

namespace dskc {

CUgraph capture_graph(CUstream stream, const std::string& what, const std::function<void()>& issue) {
  const DriverApi& d = driver();
  DSKC_CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  std::string failure;
  try {
    issue();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  // End the capture whatever happened, so the stream is usable again; an invalidated capture (a call
  // that cannot be captured) reports itself here if `issue` did not throw.
  CUgraph g = nullptr;
  const CUresult end = d.cuStreamEndCapture(stream, &g);
  if (failure.empty() && end != CUDA_SUCCESS)
    failure = fmt::format("cuStreamEndCapture failed ({})", cuda_error_name(end));
  if (!failure.empty()) {
    if (g) d.cuGraphDestroy(g);
    throw Error(ErrorKind::Device, fmt::format("cannot capture {} into a CUDA graph: {}", what, failure));
  }
  return g;
}

GraphExec::~GraphExec() {
  if (exec_) driver().cuGraphExecDestroy(exec_);
}

bool GraphExec::set(CUgraph graph, const std::string& what) {
  const DriverApi& d = driver();
  size_t nodes = 0;
  CUresult r = d.cuGraphGetNodes(graph, nullptr, &nodes);
  bool updated = false;
  if (r == CUDA_SUCCESS && exec_) {
    CUgraphExecUpdateResultInfo info{};
    updated = d.cuGraphExecUpdate(exec_, graph, &info) == CUDA_SUCCESS;
    if (!updated) {  // another topology (or a change an update cannot make): instantiate anew
      d.cuGraphExecDestroy(exec_);
      exec_ = nullptr;
    }
  }
  if (r == CUDA_SUCCESS && !updated) r = d.cuGraphInstantiateWithFlags(&exec_, graph, 0);
  d.cuGraphDestroy(graph);
  if (r != CUDA_SUCCESS) {
    exec_ = nullptr;
    throw Error(ErrorKind::Device, fmt::format("cannot instantiate the CUDA graph of {} ({})", what, cuda_error_name(r)));
  }
  nodes_ = nodes;
  return updated;
}

void GraphExec::launch(CUstream stream) const {
  DSKC_ASSERT(exec_ != nullptr, "GraphExec::launch before set()");
  DSKC_CU(cuGraphLaunch(exec_, stream));
}

CapturedGraph::CapturedGraph(CUstream stream, const std::string& what, const std::function<void()>& issue) {
  exec_.set(capture_graph(stream, what, issue), what);
}

}  // namespace dskc
