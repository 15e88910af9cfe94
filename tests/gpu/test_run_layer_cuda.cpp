// `dskc run-layer --backend cuda` against `--backend cpu` on the same file (fp32: close to the
// double reference), and the no-device message path is exercised by CPU CI.
#include <doctest/doctest.h>

#include "gpu_util.h"
#include "run_layer_util.h"
#include "test_util.h"

using namespace dskc;

TEST_CASE("run-layer cuda and cpu backends agree") {
  dskc_test::require_gpu();
  dskc_test::TempDir dir;
  LayerConfig c;
  c.batch_size = 4;
  c.max_seq_length = 40;
  c.hidden_size = 96;
  c.heads = 6;
  c.intermediate_size = 200;
  c.attn_dropout_ratio = 0.1;
  c.hidden_dropout_ratio = 0.1;
  c.num_hidden_layers = 2;
  c.seed = 8;
  dskc_test::write_file(dir / "layer.json", to_json_text(c));
  write_safetensors(dir / "in.safetensors", dskc_test::make_run_layer_inputs(c, 3, 37, 5));
  for (const char* be : {"cpu", "cuda"}) {
    auto r = dskc_test::run_dskc("run-layer " + dir / "layer.json" + " --inputs " + dir / "in.safetensors" +
                                 " --out " + dir / (std::string(be) + ".safetensors") + " --backward --backend " + be);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  }
  auto a = read_safetensors(dir / "cuda.safetensors"), b = read_safetensors(dir / "cpu.safetensors");
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (const auto& [name, t] : b.tensors) {
    auto e = dskc_test::compare(tensor_to_doubles(a.tensors.at(name)), tensor_to_doubles(t));
    CHECK_MESSAGE(e.rel < 1e-5, name << " rel " << e.rel);
  }
}
