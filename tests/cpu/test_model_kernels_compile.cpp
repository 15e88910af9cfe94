// The CUDA backend's model module (compiler/model_codegen.h, templates/model/*.cuh) compiles
// through NVRTC for sm_80 and sm_90 in fp32, fp16 and bf16 for a few shapes (hidden sizes
// that are not multiples of the block or of 8, dropout on and off, both GELU forms), every
// kernel appears in the ptxas log, and generation is byte-stable. No GPU needed.
#include <doctest/doctest.h>

#include "nvrtc_check.h"

#include <algorithm>
#include <map>

#include "compiler/errors.h"
#include "compiler/model_codegen.h"
#include "compiler/nvrtc_compile.h"
#include "trainer/bert_cuda_params.h"

using namespace dskc;

TEST_CASE("the model module compiles for sm_80 and sm_90 in fp32, fp16 and bf16") {
  struct Shape {
    int hidden;
    double dropout;
    GeluForm gelu;
  };
  const Shape shapes[] = {{64, 0.0, GeluForm::Erf}, {1024, 0.1, GeluForm::Tanh}, {200, 0.1, GeluForm::Erf}};
  for (const Shape& s : shapes) {
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
      ModelModuleConfig c;
      c.dtype = t;
      c.hidden_size = s.hidden;
      c.hidden_dropout = s.dropout;
      c.gelu = s.gelu;
      for (const char* arch : {"sm_80", "sm_90"}) {
        CAPTURE(s.hidden);
        CAPTURE(dtype_name(t));
        CAPTURE(arch);
        const GeneratedModelModule g = emit_model_module(c, arch);
        dskc_test::check_module_compiles(g.source, "dskc_model.cu", arch, g.kernel_names);
      }
    }
  }
}

TEST_CASE("model module generation is byte-stable and specializes by constants") {
  ModelModuleConfig c;
  c.dtype = DType::F16;
  c.hidden_size = 128;
  c.hidden_dropout = 0.1;
  const auto a = emit_model_module(c), b = emit_model_module(c);
  CHECK(a.source == b.source);
  CHECK(a.source.find("constexpr int kModelHidden = 128;") != std::string::npos);
  CHECK(a.source.find("using T = __half;") != std::string::npos);
  CHECK(a.source.find("constexpr bool kModelDropoutOn = true;") != std::string::npos);
  c.hidden_dropout = 0.0;
  CHECK(emit_model_module(c).source.find("constexpr bool kModelDropoutOn = false;") != std::string::npos);
  CHECK(a.kernel_names.size() == model_kernels().size());
  c.hidden_size = 0;
  CHECK_THROWS_AS(emit_model_module(c), Error);
}

TEST_CASE("the host params structs (trainer/bert_cuda_params.h) have the sizes the generated source pins") {
  const std::map<std::string, size_t> host = {
      {"EmbeddingFwdParams", sizeof(mkp::EmbeddingFwd)}, {"ModelLnFwdParams", sizeof(mkp::LnFwd)},
      {"ModelLnBwdParams", sizeof(mkp::LnBwd)},          {"ModelLnParamGradParams", sizeof(mkp::LnParamGrad)},
      {"GatherRowsParams", sizeof(mkp::GatherRows)},     {"ActivationParams", sizeof(mkp::Activation)},
      {"XentParams", sizeof(mkp::Xent)},                 {"NspParams", sizeof(mkp::Nsp)},
      {"NspParamGradParams", sizeof(mkp::NspParamGrad)}, {"HeadScatterParams", sizeof(mkp::HeadScatter)},
      {"CastParams", sizeof(mkp::Cast)},                 {"AccumulateParams", sizeof(mkp::Accumulate)},
      {"ColSumParams", sizeof(mkp::ColSum)},             {"GroupedRowsPartParams", sizeof(mkp::GroupedRowsPart)},
      {"GroupedRowsFinishParams", sizeof(mkp::GroupedRowsFinish)},
      {"SumSqParams", sizeof(mkp::SumSq)},               {"ReducePartialsParams", sizeof(mkp::ReducePartials)},
      {"AdamParams", sizeof(mkp::Adam)},                 {"LambParams", sizeof(mkp::Lamb)},
      {"AdamMultiParams", sizeof(mkp::AdamMulti)},       {"LambMultiParams", sizeof(mkp::LambMulti)},
      {"AddPairParams", sizeof(mkp::AddPair)},           {"GroupedRowsCompactParams", sizeof(mkp::GroupedRowsCompact)},
      {"ScatterRowsParams", sizeof(mkp::ScatterRows)}};
  for (const ModelKernel& k : model_kernels()) {
    CAPTURE(k.name);
    REQUIRE(host.count(k.params_type));
    CHECK(static_cast<size_t>(k.params_bytes) == host.at(k.params_type));
  }
}
