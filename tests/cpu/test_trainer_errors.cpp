// Bad input to `dskc train` (each gives its message and leaves the existing checkpoints in
// output_dir untouched), `dskc convert` round trips and name mapping, and the guide's command
// line run through the built binary on the CPU backend.
#include <doctest/doctest.h>

#include "runtime/driver.h"
#include "runtime/safetensors.h"
#include "tests/cpu/test_trainer_util.h"
#include "trainer/checkpoint.h"
#include "trainer/hf_convert.h"

using namespace trainer_test;
using dskc::ErrorKind;

namespace {

// A directory with a finished 2-step run (checkpoint global_step2) to protect.
struct Fixture {
  TempDir dir;
  std::string cf, ds;
  std::map<std::string, std::string> before;
  Fixture() {
    cf = write_model_config(dir / "model.json", TinyModel{});
    ds = write_ds_config(dir / "ds.json", 4, 4);
    dskc::train(base_options(ds, cf, corpus_shards(), dir / "out", 2));
    before = snapshot(dir / "out");
    REQUIRE(before.count("global_step2/model.safetensors"));
  }
  dskc::TrainOptions options() { return base_options(ds, cf, corpus_shards(), dir / "out", 4); }
  // Runs `o`, expects an error of `kind` containing `text`, and the checkpoints unchanged.
  void expect_error(const dskc::TrainOptions& o, ErrorKind kind, const std::string& text) {
    dskc::Error e = error_of([&] { dskc::train(o); });
    MESSAGE(std::string(e.what()));
    CHECK(e.kind() == kind);
    CHECK(contains(e.what(), text));
    CHECK(snapshot(dir / "out") == before);
  }
};

}  // namespace

TEST_CASE("bad input: clear messages, existing checkpoints untouched") {
  Fixture f;
  SUBCASE("missing data directory") {
    auto o = f.options();
    o.data_dir = f.dir / "nope";
    f.expect_error(o, ErrorKind::Input, "nope: no such data directory");
  }
  SUBCASE("corrupt shard") {
    fs::create_directories(f.dir / "bad");
    dskc_test::write_file(f.dir / "bad/shard_00000.hdf5", "this is not HDF5");
    auto o = f.options();
    o.data_dir = f.dir / "bad";
    f.expect_error(o, ErrorKind::Input, "bad/shard_00000.hdf5");
  }
  SUBCASE("sequence length of the shards differs from --max_seq_length") {
    auto o = f.options();
    o.max_seq_length = 48;
    f.expect_error(o, ErrorKind::Input, "shard has sequence length 32, but the requested max_seq_length is 48");
  }
  SUBCASE("checkpoint in the Hugging Face layout") {
    dskc::SafeTensorsFile k = dskc::read_safetensors(f.dir / "out/global_step2/model.safetensors");
    fs::create_directories(f.dir / "hf/step");
    dskc::write_safetensors(f.dir / "hf/step/model.safetensors", dskc::convert_kernel_to_hf(k, "k", {}).file);
    auto o = f.options();
    o.load_training_checkpoint = f.dir / "hf";
    o.load_checkpoint_id = "step";
    f.expect_error(o, ErrorKind::Input, "dskc convert --from hf --to kernel");
  }
  SUBCASE("checkpoint missing a tensor") {
    fs::create_directories(f.dir / "cut");
    fs::copy(f.dir / "out/global_step2", f.dir / "cut/global_step2", fs::copy_options::recursive);
    dskc::SafeTensorsFile k = dskc::read_safetensors(f.dir / "cut/global_step2/model.safetensors");
    k.tensors.erase("bert.encoder.layer.1.inter_w");
    dskc::write_safetensors(f.dir / "cut/global_step2/model.safetensors", k);
    dskc_test::write_file(f.dir / "cut/latest", "global_step2\n");
    auto o = f.options();
    o.load_training_checkpoint = f.dir / "cut";
    f.expect_error(o, ErrorKind::Input, "tensor 'bert.encoder.layer.1.inter_w' is missing");
  }
  SUBCASE("checkpoint of another model shape") {
    TinyModel wide;
    wide.hidden = 48;
    wide.heads = 4;
    auto o = f.options();
    o.model_config = write_model_config(f.dir / "wide.json", wide);
    o.load_training_checkpoint = f.dir / "out";
    f.expect_error(o, ErrorKind::Input, "hidden_size 32 vs 48");
  }
  SUBCASE("inconsistent batch sizes") {
    auto o = f.options();
    o.deepspeed_config = write_ds_config(f.dir / "bad_ds.json", 10, 4, "", 1e-3, "\"gradient_accumulation_steps\": 2");
    f.expect_error(o, ErrorKind::Config, "train_batch_size 10 (from train_batch_size in");
    o = f.options();
    o.train_batch_size = 12;
    o.gradient_accumulation_steps = 2;
    f.expect_error(o, ErrorKind::Config, "12 (from --train_batch_size) != micro batch 4");
  }
  SUBCASE("sparse_attention with the transformer kernel") {
    auto o = f.options();
    o.deepspeed_config =
        write_ds_config(f.dir / "sparse.json", 4, 4, "", 1e-3, R"("sparse_attention": {"mode": "fixed"})");
    f.expect_error(o, ErrorKind::Config, "the DeepSpeed transformer kernel does not support");
  }
  SUBCASE("data parallel with the CPU backend") {
    auto o = f.options();
    o.train_batch_size = 8;
    o.dist.world_size = 2;
    o.dist.local_world_size = 2;
    o.dist.rank = 1;
    o.dist.local_rank = 1;
    f.expect_error(o, ErrorKind::Usage, "WORLD_SIZE=2: data-parallel training runs one process per GPU");
  }
  SUBCASE("a global batch that the world size does not divide") {
    auto o = f.options();
    o.train_batch_size = 12;
    o.gradient_accumulation_steps = 2;
    o.dist.world_size = 2;
    o.dist.local_world_size = 2;
    f.expect_error(o, ErrorKind::Config, "world size 2");
  }
  SUBCASE("--backend cuda on a machine without a GPU") {
    if (dskc::gpu_available()) return;  // the CUDA backend would train
    auto o = f.options();
    o.backend = "cuda";
    f.expect_error(o, ErrorKind::Device, "CUDA");  // "no CUDA device: ..." without a GPU
  }
  SUBCASE("--profile_steps below 1") {
    auto o = f.options();
    o.profile_steps = 0;
    f.expect_error(o, ErrorKind::Usage, "--profile_steps must be >= 1 (the last N steps are profiled), got 0");
  }
  SUBCASE("token ids beyond the model's vocab") {
    TinyModel small;
    small.vocab = 500;
    auto o = f.options();
    o.model_config = write_model_config(f.dir / "small.json", small);
    f.expect_error(o, ErrorKind::Input, "vocab has 1000 tokens but the model's vocab_size is 500");
  }
}

TEST_CASE("convert: kernel -> hf -> kernel is bit-identical; names follow Hugging Face BERT") {
  for (bool pre_ln : {true, false}) {
    CAPTURE(pre_ln);
    TempDir dir;
    TinyModel m;
    m.pre_ln = pre_ln;
    const std::string cf = write_model_config(dir / "model.json", m);
    const std::string ds = write_ds_config(dir / "ds.json", 4, 4, R"({"enabled": true})");
    dskc::train(base_options(ds, cf, corpus_shards(), dir / "out", 1));
    const std::string kernel = dir / "out/global_step1/model.safetensors";
    auto r1 = dskc_test::run_dskc("convert --from kernel --to hf " + kernel + " " + (dir / "hf.safetensors"));
    REQUIRE(r1.exit_code == 0);
    auto r2 = dskc_test::run_dskc("convert --from hf --to kernel --cf " + cf + " " + (dir / "hf.safetensors") + " " +
                                  (dir / "back.safetensors"));
    REQUIRE(r2.exit_code == 0);
    CHECK(dskc_test::read_file(dir / "back.safetensors") == dskc_test::read_file(kernel));

    dskc::SafeTensorsFile hf = dskc::read_safetensors(dir / "hf.safetensors");
    dskc::SafeTensorsFile k = dskc::read_safetensors(kernel);
    CHECK(hf.metadata.at("layout") == "hf");
    CHECK(hf.tensors.at("bert.encoder.layer.0.attention.self.query.weight").dtype == "F16");
    CHECK(hf.tensors.at("bert.encoder.layer.1.attention.self.value.weight").shape == std::vector<int64_t>{32, 32});
    const std::string& qkv = k.tensors.at("bert.encoder.layer.1.attn_qkvw").bytes;
    CHECK(hf.tensors.at("bert.encoder.layer.1.attention.self.key.weight").bytes == qkv.substr(qkv.size() / 3, qkv.size() / 3));
    CHECK(hf.tensors.count("bert.embeddings.word_embeddings.weight"));
    CHECK(hf.tensors.count("cls.predictions.transform.LayerNorm.bias"));
    if (pre_ln) {
      CHECK(hf.tensors.at("bert.encoder.layer.0.PreAttentionLayerNorm.weight").bytes ==
            k.tensors.at("bert.encoder.layer.0.norm_w").bytes);
      CHECK(hf.tensors.count("bert.encoder.FinalLayerNorm.weight"));
    } else {
      CHECK(hf.tensors.at("bert.encoder.layer.0.attention.output.LayerNorm.weight").bytes ==
            k.tensors.at("bert.encoder.layer.0.attn_nw").bytes);
      CHECK(hf.tensors.at("bert.encoder.layer.0.output.LayerNorm.bias").bytes ==
            k.tensors.at("bert.encoder.layer.0.norm_b").bytes);
    }
    // HF extras are handled: tied decoder weight and position_ids dropped, gamma/beta renamed.
    dskc::SafeTensorsFile extra = hf;
    extra.metadata.clear();
    extra.tensors["cls.predictions.decoder.weight"] = hf.tensors.at("bert.embeddings.word_embeddings.weight");
    extra.tensors["bert.embeddings.position_ids"] = dskc::tensor_from_doubles({0, 1}, {1, 2}, "I64");
    auto ln = extra.tensors.extract("bert.embeddings.LayerNorm.weight");
    ln.key() = "bert.embeddings.LayerNorm.gamma";
    extra.tensors.insert(std::move(ln));
    dskc::ConvertResult back = dskc::convert_hf_to_kernel(extra, "extra", {});
    CHECK(back.notes.size() == 3);
    CHECK(back.file.tensors.size() == k.tensors.size());
    CHECK(back.file.tensors.at("bert.embeddings.LayerNorm.weight").bytes ==
          k.tensors.at("bert.embeddings.LayerNorm.weight").bytes);
  }
  // Errors: wrong direction, missing tensor, no such file.
  TempDir dir;
  dskc::SafeTensorsFile f;
  f.tensors["bert.encoder.layer.0.attention.self.query.weight"] = dskc::tensor_from_doubles({0, 0, 0, 0}, {2, 2}, "F32");
  CHECK(contains(error_of([&] { dskc::convert_kernel_to_hf(f, "in.st", {}); }).what(), "already in the Hugging Face"));
  CHECK(contains(error_of([&] { dskc::convert_hf_to_kernel(f, "in.st", {}); }).what(),
                 "'bert.encoder.layer.0.attention.self.key.weight' is missing"));
  auto r = dskc_test::run_dskc("convert --from hf --to kernel " + (dir / "none.safetensors") + " " + (dir / "o.st"));
  CHECK(r.exit_code != 0);
  CHECK(!fs::exists(dir / "o.st"));
  CHECK(dskc_test::run_dskc("convert --from hf --to hf a b").exit_code == 2);
}

TEST_CASE("the guide's command line runs through dskc train on the CPU backend") {
  TempDir dir;
  const std::string ex = dskc_test::source_dir() + "/examples/";
  const std::string cmd = "train --deepspeed --deepspeed_config " + ex + "deepspeed_tiny_config.json --cf " + ex +
                          "bert_tiny_model.json --train_batch_size 8 --max_seq_length 32 "
                          "--gradient_accumulation_steps 2 --max_grad_norm 1.0 --fp16 --loss_scale 0 "
                          "--delay_allreduce --max_steps 3 --print_steps 1 --deepspeed_transformer_kernel "
                          "--output_dir " +
                          (dir / "out") + " --backend cpu --local_rank 0";
  // The demo corpus is found next to the binary in an in-tree build; say where it is for any build.
  dskc_test::RunResult r = dskc_test::run_dskc(cmd, "DSKC_CORPUS=" + dskc_test::source_dir() + "/examples/corpus");
  MESSAGE(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "preparing shards from"));
  CHECK(contains(r.output, "step 3/3 | loss"));
  CHECK(contains(r.output, "seq/s"));
  CHECK(contains(r.output, "TFLOP/s"));
  const std::string csv = dskc_test::read_file(dir / "out/metrics.csv");
  CHECK(csv.rfind("step,loss,mlm_loss,nsp_loss,loss_scale,lr", 0) == 0);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 4);
  const std::string png = dskc_test::read_file(dir / "out/loss_curve.png");
  REQUIRE(png.size() > 33);
  CHECK(png.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  CHECK(png.substr(12, 4) == "IHDR");
  CHECK(png.substr(png.size() - 8, 4) == "IEND");
  CHECK(fs::exists(dir / "out/global_step3/model.safetensors"));
  CHECK(fs::exists(dir / "out/global_step3/optimizer.safetensors"));
  CHECK(fs::exists(dir / "out/global_step3/trainer_state.json"));
  CHECK(dskc_test::read_file(dir / "out/latest") == "global_step3\n");

  // A usage error names the problem and exits 2; an inconsistent batch exits 3.
  auto bad = dskc_test::run_dskc("train --deepspeed_config " + ex + "deepspeed_tiny_config.json --cf " + ex +
                                 "bert_tiny_model.json --max_seq_length 32 --max_steps 1 --output_dir " +
                                 (dir / "o2") + " --backend cpu --train_batch_size 4096 --gradient_accumulation_steps 4");
  CHECK(bad.exit_code == 3);
  CHECK(contains(bad.output, "inconsistent batch sizes"));
  CHECK(!fs::exists(dir / "o2"));
  CHECK(dskc_test::run_dskc("train --max_stepz 3").exit_code == 2);
  // Multi-GPU options: a bad --dist_timeout or test-fault spec is a usage error, nothing written.
  const std::string ok = "train --deepspeed_config " + ex + "deepspeed_tiny_config.json --cf " + ex +
                         "bert_tiny_model.json --max_seq_length 32 --max_steps 1 --backend cpu --output_dir " +
                         (dir / "o3");
  auto t = dskc_test::run_dskc(ok + " --dist_timeout 0");
  CHECK(t.exit_code == 2);
  CHECK(contains(t.output, "--dist_timeout must be in (0, 86400] seconds, got 0"));
  // --cuda_graphs: only with the transformer kernel, only on the CUDA backend.
  auto cg = dskc_test::run_dskc(ok + " --cuda_graphs");
  CHECK(cg.exit_code == 2);
  CHECK(contains(cg.output, "--cuda_graphs launches the DeepSpeed transformer layers as CUDA graphs; add "
                            "--deepspeed_transformer_kernel"));
  auto cgc = dskc_test::run_dskc(ok + " --cuda_graphs --deepspeed_transformer_kernel");
  CHECK(cgc.exit_code == 2);
  CHECK(contains(cgc.output, "--cuda_graphs needs the CUDA backend"));
  CHECK(!fs::exists(dir / "o3"));
  auto f = dskc_test::run_dskc(ok, "DSKC_TEST_FAULT=explode:3");
  CHECK(f.exit_code == 2);
  CHECK(contains(f.output, "DSKC_TEST_FAULT='explode:3': expected overflow|fail|hang:STEP[:RANK]"));
  auto g = dskc_test::run_dskc(ok, "DSKC_TEST_ALLREDUCE=inplace");
  CHECK(g.exit_code == 2);
  CHECK(contains(g.output, "DSKC_TEST_ALLREDUCE='inplace': expected a comma-separated list of \"staged\", \"nccl\", \"split_word\""));
  auto w = dskc_test::run_dskc(ok, "WORLD_SIZE=2 RANK=5");
  CHECK(w.exit_code == 3);  // the launcher environment is validated (rank outside the world)
  CHECK(contains(w.output, "RANK"));
  CHECK(!fs::exists(dir / "o3"));
}
