// Writes the model module (fp16, hidden 1024, sm_90) as PTX, for exp/model_ptx_ops.sh:
//   model_ptx_ops OUT.ptx
#include <fstream>

#include "compiler/model_codegen.h"
#include "compiler/nvrtc_compile.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  dskc::ModelModuleConfig c;
  c.dtype = dskc::DType::F16;
  c.hidden_size = 1024;
  c.hidden_dropout = 0.1;
  const dskc::GeneratedModelModule g = dskc::emit_model_module(c, "sm_90");
  const dskc::CompiledModule m = dskc::nvrtc_compile(g.source, "dskc_model.cu", {"sm_90", dskc::EmitKind::Ptx, {}});
  std::ofstream(argv[1], std::ios::binary) << m.image;
}
