// make_backend: picks the TrainBackend implementation by name (see backend.h). "cuda" builds
// the CUDA backend, which throws Error(Device) "no CUDA device: ..." (from its Context) on a
// machine without a GPU.
#include <fmt/format.h>

#include "compiler/errors.h"
#include "trainer/backend.h"
#include "trainer/bert_cpu.h"
#include "trainer/bert_cuda.h"

namespace dskc {

std::unique_ptr<TrainBackend> make_backend(const std::string& kind, const BackendOptions& opt) {
  if (kind == "cpu") return std::make_unique<CpuBackend>(opt);
  if (kind == "cuda") return std::make_unique<CudaBackend>(opt);
  throw Error(ErrorKind::Usage, fmt::format("--backend '{}' is not known: use cpu or cuda", kind));
}

}  // namespace dskc
