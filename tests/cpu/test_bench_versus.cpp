// `dskc bench --versus` (cli/versus.h): the spec's parsing and errors, layer B's config, and the
// paired statistics (median ratio, its order-statistics interval, the count of pairs B won).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "cli/versus.h"
#include "test_util.h"

using namespace dskc;
using namespace dskc::cli;
using dskc_test::error_of;

namespace {
// The bundled BERT-Large layer (fp16, Pre-LN, no memory flag, not stochastic_mode).
LayerConfig base_cfg() { return load_layer_config(dskc_test::source_dir() + "/examples/bert_large_layer.json"); }
}  // namespace

TEST_CASE("--versus SPEC: switches and DSKC_* variables in order; every malformed item named") {
  const VersusSpec v = parse_versus("all_memory_flags,DSKC_SM90_WEIGHT=transpose,stochastic_mode,DSKC_ATTN_DQ=");
  CHECK(v.switches == std::vector<std::string>{"all_memory_flags", "stochastic_mode"});
  REQUIRE(v.env.size() == 2);
  CHECK(v.env[0] == std::pair<std::string, std::string>{"DSKC_SM90_WEIGHT", "transpose"});
  CHECK(v.env[1] == std::pair<std::string, std::string>{"DSKC_ATTN_DQ", ""});  // "" is the variable's default
  CHECK(v.text == "all_memory_flags,DSKC_SM90_WEIGHT=transpose,stochastic_mode,DSKC_ATTN_DQ=");
  CHECK(parse_versus("DSKC_OVERRIDE_SOURCE=a=b").env[0].second == "a=b");

  struct Bad {
    const char* spec;
    const char* needle;
  };
  for (const Bad& b : std::vector<Bad>{{"", "nothing to compare against"},
                                       {"bf16,", "an empty item"},
                                       {",bf16", "an empty item"},
                                       {"bf16,,tanh_gelu", "an empty item"},
                                       {"gelu_chekpoint", "unknown item 'gelu_chekpoint'"},
                                       {"PATH=/tmp", "'PATH=/tmp': only DSKC_*"},
                                       {"DSKC_=1", "'DSKC_=1': only DSKC_*"},
                                       {"=1", "'=1': only DSKC_*"},
                                       {"DSKC_GELU=1,bf16,DSKC_GELU=2", "DSKC_GELU given twice"},
                                       {"DSKC_NO_SUCH_SWITCH=1", "DSKC_NO_SUCH_SWITCH is not read when a layer is built"},
                                       {"DSKC_TRAIN_PREFETCH=0", "so B would run as A"},
                                       {"DSKC_CACHE_DIR=/tmp/x", "(the variables that are: DSKC_ATTENTION, "}}) {
    CAPTURE(b.spec);
    const std::string msg = error_of([&] { parse_versus(b.spec); }, ErrorKind::Usage);
    CHECK(msg.find(b.needle) != std::string::npos);
    CHECK(msg.find(std::string("--versus ") + b.spec) != std::string::npos);
    CHECK(msg.find("DSKC_NAME=VALUE") != std::string::npos);  // says what is accepted
  }
}

// The list of variables --versus accepts must be the ones the layer's build reads: every
// env_choice / getenv of a DSKC_* name in the plan and the runtime, plus the module source
// override. A variable added there without being listed (or listed and no longer read) fails here.
TEST_CASE("--versus accepts exactly the DSKC_* variables read when a layer is built") {
  auto read = [](const std::filesystem::path& f) {
    std::ifstream in(f);
    REQUIRE(in.good());
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::regex reads(R"re((?:env_choice|getenv)\("(DSKC_[A-Z0-9_]+)")re");
  std::set<std::string> found;
  auto scan = [&](const std::filesystem::path& f) {
    const std::string text = read(f);
    for (std::sregex_iterator it(text.begin(), text.end(), reads), end; it != end; ++it) found.insert((*it)[1]);
  };
  const std::filesystem::path root = dskc_test::source_dir();
  scan(root / "compiler/plan.cpp");
  for (const auto& e : std::filesystem::directory_iterator(root / "runtime"))
    if (e.path().extension() == ".cpp") scan(e.path());
  CHECK(found.count("DSKC_DGRAD_GEMM") == 1);   // the scan finds the plan's variables
  CHECK(found.count("DSKC_LAYER_STREAMS") == 1);  // and the layer constructor's
  CHECK(read(root / "compiler/nvrtc_compile.cpp").find(R"(getenv("DSKC_OVERRIDE_SOURCE"))") != std::string::npos);
  found.insert("DSKC_OVERRIDE_SOURCE");
  const auto& listed = versus_variable_names();
  CHECK(std::set<std::string>(listed.begin(), listed.end()) == found);
  CHECK(listed.size() == found.size());  // no name listed twice
}

TEST_CASE("--versus: layer B is layer A with exactly the spec's switches on") {
  const LayerConfig a = base_cfg();
  {
    const LayerConfig b = versus_config(a, parse_versus("all_memory_flags"));
    LayerConfig want = a;
    want.attn_dropout_checkpoint = want.normalize_invertible = want.gelu_checkpoint = true;
    CHECK(b == want);
  }
  {
    const LayerConfig b = versus_config(a, parse_versus("gelu_checkpoint,post_layer_norm,stochastic_mode"));
    LayerConfig want = a;
    want.gelu_checkpoint = want.stochastic_mode = true;
    want.pre_layer_norm = false;
    CHECK(b == want);
  }
  {
    const LayerConfig b = versus_config(a, parse_versus("bf16,tanh_gelu"));
    CHECK(b.dtype() == DType::BF16);
    CHECK(b.gelu_approximation == GeluForm::Tanh);
    CHECK(b.batch_size == a.batch_size);
  }
  // Only variables: the same config (the variables act when B is built).
  CHECK(versus_config(a, parse_versus("DSKC_SM90_WEIGHT=transpose")) == a);
  // A switch A has already would make B not what the spec says.
  LayerConfig post = a;
  post.pre_layer_norm = false;
  CHECK(error_of([&] { versus_config(post, parse_versus("post_layer_norm")); }, ErrorKind::Usage)
            .find("the layer has post_layer_norm already") != std::string::npos);
  CHECK(error_of([&] { versus_config(a, parse_versus("normalize_invertible,all_memory_flags,gelu_checkpoint")); },
                 ErrorKind::Usage)
            .find("the layer has gelu_checkpoint already") != std::string::npos);
}

TEST_CASE("paired summary: medians, the median ratio's order-statistics interval, pairs won") {
  // 50 pairs, B 2% slower with a spread: ratio i = 1.02 + (i - 25) * 0.001 in a shuffled order.
  std::vector<double> a, b;
  for (int i = 0; i < 50; ++i) {
    const int j = (i * 17) % 50;  // 17 is coprime with 50: a permutation
    a.push_back(1.0 + 0.01 * (i % 5));
    b.push_back(a.back() * (1.02 + (j - 25) * 0.001));
  }
  const PairedSummary s = summarize_pairs(a, b);
  CHECK(s.pairs == 50);
  // Ratios 0.995 .. 1.044 in steps of 0.001: the median is (1.019 + 1.020) / 2.
  CHECK(s.rel == doctest::Approx(0.0195).epsilon(1e-9));
  // n = 50: ranks 18 and 33 (floor(25 - 0.98·√50) = 18, ceil(26 + 0.98·√50) = 33): ratios 1.012 and 1.027.
  CHECK(s.lo == doctest::Approx(0.012).epsilon(1e-9));
  CHECK(s.hi == doctest::Approx(0.027).epsilon(1e-9));
  CHECK(s.b_faster == 5);  // ratios 0.995 .. 0.999
  CHECK(s.a_ms == doctest::Approx(1.02));
  CHECK(s.b_ms > s.a_ms);

  // Fewer than 6 pairs: the interval is the whole range of the ratios.
  const PairedSummary few = summarize_pairs({2.0, 2.0, 2.0}, {1.0, 2.2, 1.9});
  CHECK(few.rel == doctest::Approx(-0.05));
  CHECK(few.lo == doctest::Approx(-0.5));
  CHECK(few.hi == doctest::Approx(0.1));
  CHECK(few.b_faster == 2);
  CHECK(few.a_ms == 2.0);
  CHECK(few.b_ms == 1.9);

  error_of([] { summarize_pairs({}, {}); }, ErrorKind::Usage);
  error_of([] { summarize_pairs({1.0, 1.0}, {1.0}); }, ErrorKind::Usage);
}
