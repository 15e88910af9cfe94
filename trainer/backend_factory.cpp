// make_backend: picks the TrainBackend implementation by name (see backend.h). The CUDA
// backend slots in here: `if (kind == "cuda") return std::make_unique<CudaBackend>(opt);`.
#include <fmt/format.h>

#include "compiler/errors.h"
#include "trainer/backend.h"
#include "trainer/bert_cpu.h"

namespace dskc {

std::unique_ptr<TrainBackend> make_backend(const std::string& kind, const BackendOptions& opt) {
  if (kind == "cpu") return std::make_unique<CpuBackend>(opt);
  if (kind == "cuda") return nullptr;  // not implemented yet: the trainer says so
  throw Error(ErrorKind::Usage, fmt::format("--backend '{}' is not known: use cpu or cuda", kind));
}

}  // namespace dskc
