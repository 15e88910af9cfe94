// CUDA graph capture and replay (see cuda_graph.h).
#include "runtime/cuda_graph.h"

#include <fmt/format.h>

#include "compiler/errors.h"
#include "runtime/driver.h"

namespace dskc {

CapturedGraph::CapturedGraph(CUstream stream, const std::string& what, const std::function<void()>& issue) {
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
  CUresult r = d.cuGraphGetNodes(g, nullptr, &nodes_);
  if (r == CUDA_SUCCESS) r = d.cuGraphInstantiateWithFlags(&exec_, g, 0);
  if (r != CUDA_SUCCESS) {
    d.cuGraphDestroy(g);
    throw Error(ErrorKind::Device, fmt::format("cannot instantiate the CUDA graph of {} ({})", what, cuda_error_name(r)));
  }
  graph_ = g;
}

CapturedGraph::~CapturedGraph() {
  if (exec_) driver().cuGraphExecDestroy(exec_);
  if (graph_) driver().cuGraphDestroy(graph_);
}

void CapturedGraph::launch(CUstream stream) const { DSKC_CU(cuGraphLaunch(exec_, stream)); }

}  // namespace dskc
