// `dskc run-layer` on the CPU backend: tensor names, shapes and dtypes in and out, results equal
// to calling the CPU reference directly, and every malformed input file rejected with its
// message, exit code 4 and no output file.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>

#include "run_layer_util.h"
#include "runtime/cpu_reference.h"
#include "runtime/gemm.h"
#include "runtime/transformer_layer.h"
#include "compiler/errors.h"
#include "test_util.h"

using namespace dskc;
using dskc_test::run_dskc;

namespace {

LayerConfig tiny(bool fp16) {
  LayerConfig c;
  c.batch_size = 3;
  c.max_seq_length = 12;
  c.hidden_size = 24;
  c.heads = 3;
  c.intermediate_size = 40;
  c.attn_dropout_ratio = 0.1;
  c.hidden_dropout_ratio = 0.2;
  c.num_hidden_layers = 2;
  c.seed = 5;
  c.fp16 = fp16;
  return c;
}

}  // namespace

TEST_CASE("run-layer --backend cpu matches the CPU reference, forward and backward") {
  for (bool fp16 : {false, true}) {
    dskc_test::TempDir dir;
    LayerConfig c = tiny(fp16);
    dskc_test::write_file(dir / "layer.json", to_json_text(c));
    SafeTensorsFile in = dskc_test::make_run_layer_inputs(c, 2, 9, 17);
    write_safetensors(dir / "in.safetensors", in);
    auto r = run_dskc("run-layer --layer " + dir / "layer.json" + " --inputs " + dir / "in.safetensors" + " --out " +
                      dir / "out.safetensors" + " --backward --backend cpu --step 4 --layer_id 2");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    SafeTensorsFile out = read_safetensors(dir / "out.safetensors");
    CHECK(out.tensors.size() == 2 + 12);
    CpuReferenceLayer ref(c, 2);
    CpuReferenceLayer::Tensors params;
    for (const auto& p : layer_param_specs(c)) params[p.name] = tensor_to_doubles(in.tensors.at(p.name));
    auto mask = tensor_to_doubles(in.tensors.at("input_mask"));
    auto y = ref.forward(tensor_to_doubles(in.tensors.at("input")), &mask, 2, 9, 4, params);
    auto g = ref.backward(tensor_to_doubles(in.tensors.at("grad_output")));
    auto same = [&](const std::string& name, const std::vector<double>& want) {
      const StTensor& t = out.tensors.at(name);
      CHECK(t.dtype == (fp16 ? "F16" : "F32"));
      auto got = tensor_to_doubles(t);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i)
        REQUIRE_MESSAGE(got[i] == round_to_dtype(want[i], c.dtype()), name << "[" << i << "]");
    };
    same("output", y);
    same("grad_input", g.at("grad_input"));
    for (const auto& p : layer_param_specs(c)) {
      same("grad_" + p.name, g.at("grad_" + p.name));
      CHECK(out.tensors.at("grad_" + p.name).shape == p.shape);
    }
    CHECK(out.tensors.at("output").shape == std::vector<int64_t>{2, 9, 24});
  }
}

TEST_CASE("run-layer rejects malformed inputs with a clear message and writes nothing") {
  LayerConfig c = tiny(false);
  struct Case {
    const char* what;
    std::function<void(SafeTensorsFile&)> edit;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"missing tensor", [](SafeTensorsFile& f) { f.tensors.erase("attn_ow"); }, "'attn_ow' is missing"},
      {"wrong shape", [](SafeTensorsFile& f) { f.tensors["inter_b"] = tensor_from_doubles(std::vector<double>(7), {7}, "F32"); },
       "'inter_b' has shape [7], expected [40]"},
      {"wrong dtype", [](SafeTensorsFile& f) { f.tensors["norm_b"] = tensor_from_doubles(std::vector<double>(24), {24}, "F16"); },
       "'norm_b' is F16"},
      {"missing grad_output", [](SafeTensorsFile& f) { f.tensors.erase("grad_output"); }, "'grad_output' is missing"},
      {"batch above maximum",
       [&](SafeTensorsFile& f) {
         SafeTensorsFile big = dskc_test::make_run_layer_inputs(c, 3, 9, 1);
         big.tensors["input"] = tensor_from_doubles(std::vector<double>(4 * 9 * 24), {4, 9, 24}, "F32");
         f = big;
       },
       "batch 4 exceeds the layer's batch_size 3"},
      {"input of wrong width",
       [](SafeTensorsFile& f) { f.tensors["input"] = tensor_from_doubles(std::vector<double>(2 * 9 * 8), {2, 9, 8}, "F32"); },
       "expected [B, S, 24]"},
  };
  for (const auto& k : cases) {
    INFO(k.what);
    dskc_test::TempDir dir;
    dskc_test::write_file(dir / "layer.json", to_json_text(c));
    SafeTensorsFile in = dskc_test::make_run_layer_inputs(c, 2, 9, 3);
    k.edit(in);
    write_safetensors(dir / "in.safetensors", in);
    auto r = run_dskc("run-layer " + dir / "layer.json" + " --inputs " + dir / "in.safetensors" + " --out " +
                      dir / "out.safetensors" + " --backward --backend cpu");
    CHECK(r.exit_code == 4);
    CHECK_MESSAGE(r.output.find(k.expect) != std::string::npos, r.output);
    CHECK_MESSAGE(r.output.find("in.safetensors") != std::string::npos, r.output);
    CHECK_FALSE(std::filesystem::exists(dir / "out.safetensors"));
  }
  // A truncated file.
  dskc_test::TempDir dir;
  dskc_test::write_file(dir / "layer.json", to_json_text(c));
  write_safetensors(dir / "in.safetensors", dskc_test::make_run_layer_inputs(c, 2, 9, 3));
  std::filesystem::resize_file(dir / "in.safetensors", std::filesystem::file_size(dir / "in.safetensors") - 100);
  auto r = run_dskc("run-layer " + dir / "layer.json" + " --inputs " + dir / "in.safetensors" + " --out " +
                    dir / "out.safetensors" + " --backend cpu");
  CHECK(r.exit_code == 4);
  CHECK_FALSE(std::filesystem::exists(dir / "out.safetensors"));
  // Usage errors.
  CHECK(run_dskc("run-layer " + dir / "layer.json" + " --out x.safetensors").exit_code == 2);
  CHECK(run_dskc("run-layer " + dir / "layer.json" + " --inputs a --out b --backend tpu").exit_code == 2);
}

namespace {
// A two-valued runtime switch read from `var`: unset and `on` give true, `off` false, `bad` an
// Error naming the variable.
void check_switch_env(const char* var, bool (*read)(), const char* on, const char* off, const char* bad) {
  CAPTURE(var);
  {
    dskc_test::ScopedEnv unset(var, nullptr);
    CHECK(read());
  }
  {
    dskc_test::ScopedEnv v(var, on);
    CHECK(read());
  }
  {
    dskc_test::ScopedEnv v(var, off);
    CHECK_FALSE(read());
  }
  dskc_test::ScopedEnv v(var, bad);
  CHECK_THROWS_WITH_AS(read(), doctest::Contains(var), Error);
}
}  // namespace

// The GPU side of the two-stream backward is in tests/gpu/test_layer_behaviour.cpp.
TEST_CASE("DSKC_LAYER_STREAMS: 1 or 2, anything else names the variable") {
  check_switch_env("DSKC_LAYER_STREAMS", layer_side_stream_from_env, "2", "1", "3");
}

TEST_CASE("DSKC_LN_BITS_BLOCKS: waves or all, anything else names the variable") {
  check_switch_env("DSKC_LN_BITS_BLOCKS", ln_bits_whole_waves_from_env, "waves", "all", "half");
}

TEST_CASE("DSKC_OUTPUT_BIAS_EARLY: 1 or 0, anything else names the variable") {
  check_switch_env("DSKC_OUTPUT_BIAS_EARLY", output_bias_early_from_env, "1", "0", "yes");
}

TEST_CASE("DSKC_LAYER_REGEN: early, dgrad or main, anything else names the variable") {
  {
    dskc_test::ScopedEnv unset("DSKC_LAYER_REGEN", nullptr);
    CHECK(layer_regen_from_env() == RegenPlacement::Early);
  }
  const std::pair<const char*, RegenPlacement> words[] = {
      {"", RegenPlacement::Early}, {"early", RegenPlacement::Early},
      {"dgrad", RegenPlacement::AfterOutputDgrad}, {"main", RegenPlacement::Main}};
  for (const auto& [word, want] : words) {
    CAPTURE(word);
    dskc_test::ScopedEnv v("DSKC_LAYER_REGEN", word);
    CHECK(layer_regen_from_env() == want);
  }
  dskc_test::ScopedEnv v("DSKC_LAYER_REGEN", "side");
  CHECK_THROWS_WITH_AS(layer_regen_from_env(), doctest::Contains("DSKC_LAYER_REGEN=side"), Error);
}

TEST_CASE("layernorm_fwd_bits: a last wave of less than half the GPU draws no keep words") {
  // BERT-Large at 8192 rows: 2048 blocks of four rows, 7 resident per SM on 132 SMs (924 a wave):
  // 2.2 waves, the last 200 blocks only normalize.
  CHECK(ln_bits_word_blocks(2048, 924) == 1848);
  CHECK(ln_bits_word_blocks(2048, 1056) == 2048);  // 8 per SM: 1.94 waves, the second nearly full
  CHECK(ln_bits_word_blocks(2000, 1000) == 2000);
  CHECK(ln_bits_word_blocks(2499, 1000) == 2000);  // a tail of 499 < 500
  CHECK(ln_bits_word_blocks(2500, 1000) == 2500);
  CHECK(ln_bits_word_blocks(1848, 924) == 1848);   // whole waves: every block
  CHECK(ln_bits_word_blocks(900, 924) == 900);     // less than one wave: every block
  CHECK(ln_bits_word_blocks(1, 924) == 1);
  CHECK(ln_bits_word_blocks(2048, 0) == 2048);     // DSKC_LN_BITS_BLOCKS=all
  CHECK_THROWS_AS(ln_bits_word_blocks(0, 924), Error);
}

TEST_CASE("GEMM autotuning tries split-K only where every part has an inner dimension of 256 or more") {
  // k = 3 (a weight gradient at batch 3, seq 1) with 4 splits hung on the H200 (cuBLASLt 13.0).
  CHECK(splitk_counts(3).empty());
  CHECK(splitk_counts(511).empty());
  CHECK(splitk_counts(512) == std::vector<int>{2});
  CHECK(splitk_counts(1023) == std::vector<int>{2, 3});
  CHECK(splitk_counts(1024) == std::vector<int>{2, 3, 4});
  CHECK(splitk_counts(8192) == std::vector<int>{2, 3, 4});
}
