// The plain (unfused) layer's kernel module (compiler/plain_codegen.h, templates/plain/*.cuh)
// compiles through NVRTC for sm_80 and sm_90 in fp32, fp16 and bf16 (dropout on and off, both
// GELU forms), every kernel appears in the ptxas log without spills, generation is byte-stable,
// and the host params structs (runtime/plain_kernel_params.h) have the pinned sizes. No GPU needed.
#include <doctest/doctest.h>

#include "nvrtc_check.h"

#include <algorithm>
#include <map>

#include "compiler/errors.h"
#include "compiler/nvrtc_compile.h"
#include "compiler/plain_codegen.h"
#include "runtime/plain_kernel_params.h"

using namespace dskc;

TEST_CASE("the plain layer module compiles for sm_80 and sm_90 in fp32, fp16 and bf16") {
  struct Variant {
    double attn, hidden;
    GeluForm gelu;
  };
  const Variant variants[] = {{0.0, 0.0, GeluForm::Erf}, {0.1, 0.1, GeluForm::Tanh}, {0.2, 0.0, GeluForm::Erf}};
  for (const Variant& v : variants) {
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
      PlainModuleConfig c;
      c.dtype = t;
      c.attn_dropout = v.attn;
      c.hidden_dropout = v.hidden;
      c.gelu = v.gelu;
      for (const char* arch : {"sm_80", "sm_90"}) {
        CAPTURE(v.attn);
        CAPTURE(dtype_name(t));
        CAPTURE(arch);
        const GeneratedPlainModule g = emit_plain_module(c, arch);
        dskc_test::check_module_compiles(g.source, "dskc_plain_layer.cu", arch, g.kernel_names);
      }
    }
  }
}

TEST_CASE("plain module generation is byte-stable and specializes by constants") {
  LayerConfig lc;
  lc.fp16 = true;
  lc.attn_dropout_ratio = 0.1;
  lc.hidden_dropout_ratio = 0.2;
  lc.gelu_approximation = GeluForm::Tanh;
  const PlainModuleConfig c = plain_module_config(lc);
  const auto a = emit_plain_module(c), b = emit_plain_module(c);
  CHECK(a.source == b.source);
  CHECK(a.source.find("using T = __half;") != std::string::npos);
  CHECK(a.source.find("constexpr bool kPlainGeluTanh = true;") != std::string::npos);
  CHECK(a.source.find("constexpr uint32_t kPlainAttnDropoutThreshold = 6553u;") != std::string::npos);
  CHECK(a.source.find("constexpr uint32_t kPlainHiddenDropoutThreshold = 13107u;") != std::string::npos);
  CHECK(a.kernel_names.size() == plain_kernels().size());
  lc.training = false;  // inference: no dropout
  const auto inf = emit_plain_module(plain_module_config(lc));
  CHECK(inf.source.find("constexpr uint32_t kPlainAttnDropoutThreshold = 0u;") != std::string::npos);
  CHECK(inf.source.find("constexpr float kPlainHiddenDropoutScale = 1.0f;") != std::string::npos);
}

TEST_CASE("the host params structs (runtime/plain_kernel_params.h) have the sizes the generated source pins") {
  const std::map<std::string, size_t> host = {
      {"PlainBiasAddParams", sizeof(pkp::BiasAdd)},     {"PlainAddParams", sizeof(pkp::Add)},
      {"PlainDropoutParams", sizeof(pkp::Dropout)},     {"PlainGeluFwdParams", sizeof(pkp::GeluFwd)},
      {"PlainGeluBwdParams", sizeof(pkp::GeluBwd)},     {"PlainMaskAddParams", sizeof(pkp::MaskAdd)},
      {"PlainColSumParams", sizeof(pkp::ColSum)},       {"PlainLnFwdParams", sizeof(pkp::LnFwd)},
      {"PlainLnBwdParams", sizeof(pkp::LnBwd)},         {"PlainLnParamGradParams", sizeof(pkp::LnParamGrad)},
      {"PlainSoftmaxFwdParams", sizeof(pkp::SoftmaxFwd)}, {"PlainSoftmaxBwdParams", sizeof(pkp::SoftmaxBwd)},
      {"PlainHeadsParams", sizeof(pkp::Heads)}};
  for (const PlainKernel& k : plain_kernels()) {
    CAPTURE(k.name);
    REQUIRE(host.count(k.params_type));
    CHECK(static_cast<size_t>(k.params_bytes) == host.at(k.params_type));
  }
}
