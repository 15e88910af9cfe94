// The dskc binary end to end, no GPU (SPEC §1, §3, §7): a table of bad inputs, each of which
// must exit with its documented code (2 usage, 3 config, 7 I/O; cli/main.cpp), name the file or
// key, and leave no output file behind; `compile` to cubin / PTX / CUDA with its manifest, the
// guide's --deepspeed_config/--cf derivation, help and command suggestions; eight concurrent
// compiles sharing one fresh cache (one valid entry, identical outputs), a truncated entry being
// rebuilt, and the cache key changing with every input that can change the compiled bytes.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "compiler/cache.h"
#include "compiler/codegen.h"
#include "compiler/config.h"
#include "compiler/nvrtc_compile.h"
#include "compiler/plan.h"
#include "compiler/version.h"
#include "test_util.h"

namespace fs = std::filesystem;
using dskc_test::read_file;
using dskc_test::run_dskc;
using dskc_test::source_dir;
using dskc_test::TempDir;
using dskc_test::write_file;

namespace {

std::string example(const std::string& name) { return source_dir() + "/examples/" + name; }

// A small valid layer (compiles in well under a second).
const std::string kTinyBody =
    R"("batch_size": 4, "max_seq_length": 32, "hidden_size": 64, "heads": 4, "intermediate_size": 256,
       "attn_dropout_ratio": 0.1, "hidden_dropout_ratio": 0.1, "num_hidden_layers": 2,
       "initializer_range": 0.02, "seed": 42)";
std::string tiny(const std::string& extra = "") { return "{" + kTinyBody + extra + "}"; }

// kTinyBody with `key` set to the raw JSON `value`.
std::string tiny_with(const std::string& key, const std::string& value) {
  std::string s = kTinyBody;
  const auto p = s.find("\"" + key + "\"");
  REQUIRE(p != std::string::npos);
  const auto colon = s.find(':', p);
  auto end = s.find(',', colon);
  if (end == std::string::npos) end = s.size();
  return "{" + s.substr(0, colon + 1) + " " + value + s.substr(end) + "}";
}

// Every file under `dir` (recursively), relative names, sorted.
std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (!e.is_directory()) v.push_back(fs::relative(e.path(), dir).string());
  std::sort(v.begin(), v.end());
  return v;
}

size_t count_entries(const fs::path& cache, const std::string& suffix) {
  size_t n = 0;
  if (!fs::exists(cache)) return 0;
  for (const auto& e : fs::recursive_directory_iterator(cache)) {
    const std::string name = e.path().filename().string();
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) ++n;
  }
  return n;
}

size_t count_containing(const fs::path& dir, const std::string& part) {
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(part) != std::string::npos) ++n;
  return n;
}

// Runs a shell command line, returns its exit code.
int sh(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

std::vector<std::string> plan_kernels(const dskc::LayerPlan& p) {
  std::vector<std::string> v;
  for (const auto& k : p.kernels) v.push_back(k.name);
  return v;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Bad input: exit code, a message naming the problem, and no output file (SPEC §7)

TEST_CASE("bad inputs exit with the documented code, name the file or key, and write nothing") {
  struct Case {
    const char* what;
    const char* layer_json;  // written to {cfg} when not null
    const char* args;        // {cfg}, {out}, {dir} and {ex} (examples/) are substituted
    int code;
    std::vector<std::string> needles;  // substituted the same way
  };
  const std::string ok = tiny();
  const std::string both_dtypes = tiny(R"(, "fp16": true, "bf16": true)");
  const std::string indivisible = tiny_with("heads", "5");
  const std::string bad_type = tiny_with("heads", R"("4")");
  const std::string bad_bool = tiny(R"(, "fp16": "yes")");
  const std::string attn_drop_1 = tiny_with("attn_dropout_ratio", "1.0");
  const std::string hidden_drop_neg = tiny_with("hidden_dropout_ratio", "-0.1");
  const std::string zero_batch = tiny_with("batch_size", "0");
  const std::string zero_seq = tiny_with("max_seq_length", "0");
  const std::string zero_hidden = tiny_with("hidden_size", "0");
  const std::string zero_heads = tiny_with("heads", "0");
  const std::string unknown_key = tiny(R"(, "hiden_size": 64)");
  const std::string alias_key = tiny(R"(, "num_attention_heads": 4)");
  std::string no_seq = kTinyBody;
  no_seq = "{" + replace_all(no_seq, R"("max_seq_length": 32, )", "") + "}";
  const std::string huge_head_dim = "{" + replace_all(replace_all(kTinyBody, R"("hidden_size": 64)",
                                                                  R"("hidden_size": 1024)"),
                                                      R"("heads": 4)", R"("heads": 2)") + "}";
  const std::vector<Case> cases = {
      {"malformed JSON", R"({"batch_size": 4,, "heads": 4})", "compile {cfg} --arch sm_80 -o {out}", 3,
       {"{cfg}:1:", "malformed JSON"}},
      {"truncated JSON", R"({"batch_size": 4, "heads")", "compile {cfg} --arch sm_80 -o {out}", 3,
       {"{cfg}:", "malformed JSON"}},
      {"not an object", "[1, 2]", "compile {cfg} --arch sm_80 -o {out}", 3, {"{cfg}", "JSON object"}},
      {"unknown key", unknown_key.c_str(), "compile {cfg} --arch sm_80 -o {out}", 3,
       {"{cfg}", "unknown key 'hiden_size'", "did you mean 'hidden_size'"}},
      {"model-config key in a layer config", alias_key.c_str(), "compile {cfg} --arch sm_80 -o {out}", 3,
       {"{cfg}", "'num_attention_heads'", "did you mean 'heads'"}},
      {"wrong type (string for int)", bad_type.c_str(), "compile {cfg} --arch sm_80 -o {out}", 3,
       {"{cfg}", "heads must be an integer", "\"4\""}},
      {"wrong type (string for bool)", bad_bool.c_str(), "compile {cfg} --arch sm_80 -o {out}", 3,
       {"{cfg}", "fp16 must be true or false"}},
      {"hidden not divisible by heads", indivisible.c_str(), "compile {cfg} --arch sm_80 -o {out}", 3,
       {"{cfg}", "hidden_size (64) must be divisible by heads (5)"}},
      {"head dim too large", huge_head_dim.c_str(), "compile {cfg} --arch sm_80 -o {out}", 3,
       {"{cfg}", "head dimension", "512"}},
      {"attention dropout 1.0", attn_drop_1.c_str(), "compile {cfg} --arch sm_80 -o {out}", 3,
       {"{cfg}", "attn_dropout_ratio must be in [0, 1)"}},
      {"negative hidden dropout", hidden_drop_neg.c_str(), "compile {cfg} --arch sm_80 -o {out}", 3,
       {"{cfg}", "hidden_dropout_ratio must be in [0, 1)"}},
      {"fp16 with bf16", both_dtypes.c_str(), "compile {cfg} --arch sm_80 -o {out}", 3, {"{cfg}", "fp16", "bf16"}},
      {"zero batch_size", zero_batch.c_str(), "compile {cfg} --arch sm_80 -o {out}", 3,
       {"{cfg}", "batch_size must be greater than 0"}},
      {"zero max_seq_length", zero_seq.c_str(), "compile {cfg} --arch sm_80 -o {out}", 3,
       {"{cfg}", "max_seq_length must be greater than 0"}},
      {"zero hidden_size", zero_hidden.c_str(), "compile {cfg} --arch sm_80 -o {out}", 3,
       {"{cfg}", "hidden_size must be greater than 0"}},
      {"zero heads", zero_heads.c_str(), "compile {cfg} --arch sm_80 -o {out}", 3,
       {"{cfg}", "heads must be greater than 0"}},
      {"no max_seq_length anywhere", no_seq.c_str(), "compile {cfg} --arch sm_80 -o {out}", 3,
       {"{cfg}", "max_seq_length", "--max_seq_length"}},
      {"max_seq_length disagrees with the command line", ok.c_str(),
       "compile {cfg} --max_seq_length 64 --arch sm_80 -o {out}", 3, {"{cfg}", "max_seq_length is 32", "64"}},
      {"sparse attention with the transformer kernel", nullptr,
       "compile --deepspeed_config {ex}deepspeed_sparse_attention_config.json --cf {ex}bert_large_adam_seq128.json "
       "--max_seq_length 128 --arch sm_80 -o {out}",
       3, {"deepspeed_sparse_attention_config.json", "sparse_attention"}},
      {"derive: --max_seq_length above max_position_embeddings", nullptr,
       "compile --deepspeed_config {ex}deepspeed_bsz4096_adam_config.json --cf {ex}bert_large_adam_seq128.json "
       "--max_seq_length 1024 --arch sm_80 -o {out}",
       3, {"bert_large_adam_seq128.json", "max_position_embeddings 512"}},
      {"derive: no --max_seq_length", nullptr,
       "compile --deepspeed_config {ex}deepspeed_bsz4096_adam_config.json --cf {ex}bert_large_adam_seq128.json "
       "--arch sm_80 -o {out}",
       3, {"bert_large_adam_seq128.json", "--max_seq_length"}},
      {"derive: model config is not JSON", R"(hidden_size = 1024)",
       "compile --deepspeed_config {ex}deepspeed_bsz4096_adam_config.json --cf {cfg} --max_seq_length 128 "
       "--arch sm_80 -o {out}",
       3, {"{cfg}:1:", "malformed JSON"}},
      {"derive: --cf without --deepspeed_config", nullptr,
       "compile --cf {ex}bert_large_adam_seq128.json --max_seq_length 128 --arch sm_80 -o {out}", 2,
       {"--cf needs --deepspeed_config"}},
      {"layer config and --deepspeed_config both given", ok.c_str(),
       "compile {cfg} --deepspeed_config {ex}deepspeed_bsz4096_adam_config.json --cf "
       "{ex}bert_large_adam_seq128.json --arch sm_80 -o {out}",
       2, {"not both"}},
      {"unknown --arch", ok.c_str(), "compile {cfg} --arch sm_75 -o {out}", 2, {"sm_75", "sm_80", "sm_90"}},
      {"unknown --emit", ok.c_str(), "compile {cfg} --arch sm_80 --emit sass -o {out}", 2, {"--emit", "'sass'"}},
      {"unknown option", ok.c_str(), "compile {cfg} --archh sm_80 -o {out}", 2, {"--archh", "did you mean --arch"}},
      {"option without its value", ok.c_str(), "compile {cfg} -o {out} --arch", 2, {"--arch needs a value"}},
      {"non-integer --max_seq_length", ok.c_str(), "compile {cfg} --max_seq_length 12x -o {out}", 2,
       {"--max_seq_length", "'12x'"}},
      {"missing config file", nullptr, "compile {dir}/no-such-layer.json --arch sm_80 -o {out}", 7,
       {"{dir}/no-such-layer.json", "cannot open"}},
      {"config path is a directory", nullptr, "compile {dir} --arch sm_80 -o {out}", 7, {"{dir}"}},
      {"no layer given", nullptr, "compile --arch sm_80 -o {out}", 2, {"no layer given"}},
      {"output directory does not exist", ok.c_str(), "compile {cfg} --arch sm_80 -o {dir}/no/such/dir/out.cubin", 7,
       {"{dir}/no/such/dir/out.cubin", "cannot write"}},
      {"output directory read-only (sysfs: read-only even for root)", ok.c_str(),
       "compile {cfg} --arch sm_80 -o /sys/dskc-test-out.cubin", 7, {"/sys/dskc-test-out.cubin", "cannot write"}},
      {"bench --trace into a directory that does not exist (checked before the GPU is touched)", ok.c_str(),
       "bench {cfg} --trace {dir}/no/such/dir/trace.json", 7, {"--trace", "{dir}/no/such/dir", "does not exist"}},
      {"bench --graph without a warm-up (checked before the GPU is touched)", ok.c_str(),
       "bench {cfg} --graph --warmup 0", 2, {"--graph needs --warmup >= 1"}},
      {"bench --versus with an unknown item (checked before the GPU is touched)", ok.c_str(),
       "bench {cfg} --versus stochastic_mode,gelu_chekpoint", 2, {"--versus", "unknown item 'gelu_chekpoint'"}},
      {"bench --versus setting a variable that is not DSKC_*", ok.c_str(), "bench {cfg} --versus LD_PRELOAD=x", 2,
       {"'LD_PRELOAD=x'", "only DSKC_*"}},
      {"bench --versus setting a DSKC_* variable no layer build reads", ok.c_str(),
       "bench {cfg} --versus DSKC_TRAIN_PREFETCH=0", 2, {"DSKC_TRAIN_PREFETCH is not read when a layer is built"}},
      {"bench --versus with a switch the layer has already", ok.c_str(),
       "bench {cfg} --stochastic_mode --versus stochastic_mode", 2, {"the layer has stochastic_mode already"}},
      {"bench --versus with --iters", ok.c_str(), "bench {cfg} --versus bf16 --iters 5", 2,
       {"--versus", "does not take --iters"}},
      {"bench --pairs without --versus", ok.c_str(), "bench {cfg} --pairs 5", 2, {"--pairs and --block need --versus"}},
      {"output directory does not exist (emit cuda)", ok.c_str(),
       "compile {cfg} --emit cuda -o {dir}/no/such/dir/out.cu", 7, {"{dir}/no/such/dir/out.cu", "cannot write"}},
      {"inspect: bad config", bad_type.c_str(), "inspect {cfg} --memory", 3, {"{cfg}", "heads must be an integer"}},
      {"inspect: unknown kernel", ok.c_str(), "inspect {cfg} --source --kernel layernorm_fwd_nrm", 2,
       {"layernorm_fwd_nrm", "did you mean 'layernorm_fwd_norm'"}},
      {"inspect: --seq above max_seq_length", ok.c_str(), "inspect {cfg} --memory --seq 33", 2,
       {"max_seq_length 32"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    TempDir dir;
    const std::string cfg = dir / "layer.json";
    const std::string out = dir / "out.cubin";
    auto subst = [&](std::string s) {
      s = replace_all(s, "{cfg}", cfg);
      s = replace_all(s, "{out}", out);
      s = replace_all(s, "{ex}", source_dir() + "/examples/");
      return replace_all(s, "{dir}", dir.path.string());
    };
    if (c.layer_json) write_file(cfg, c.layer_json);
    const std::vector<std::string> before = files_in(dir.path);
    TempDir cache;
    const auto r = run_dskc(subst(c.args), "DSKC_CACHE_DIR=" + cache.path.string());
    INFO("dskc " << subst(c.args) << "\n" << r.output);
    CHECK(r.exit_code == c.code);
    CHECK(r.output.find("error") != std::string::npos);
    for (const auto& n : c.needles) CHECK_MESSAGE(r.output.find(subst(n)) != std::string::npos, "missing: " << subst(n));
    // No output, no manifest, no temp file: the directory holds what it held before.
    CHECK(files_in(dir.path) == before);
    CHECK_FALSE(fs::exists("/sys/dskc-test-out.cubin"));
  }
}

// SPEC §7: never a partial output: module and manifest appear together or not at all.
TEST_CASE("a manifest that cannot be written leaves no module file") {
  TempDir dir;
  write_file(dir / "layer.json", tiny());
  const auto r = run_dskc("compile " + (dir / "layer.json") + " --arch sm_80 -o " + (dir / "out.cubin") +
                          " --manifest " + (dir / "no/such/dir/m.json"));
  INFO(r.output);
  CHECK(r.exit_code == 7);
  CHECK(r.output.find(dir / "no/such/dir/m.json") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "out.cubin"));
}

// The flag switches apply over a layer config file too (never silently ignored).
TEST_CASE("flag switches given with a layer config are applied") {
  TempDir dir;
  write_file(dir / "layer.json", tiny());
  const auto r = run_dskc("inspect " + (dir / "layer.json") + " --gelu_checkpoint --kernels");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("GELU(h) recomputed") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Success paths

TEST_CASE("compile writes a cubin and a manifest listing every kernel with its registers") {
  TempDir dir, cache;
  const std::string env = "DSKC_CACHE_DIR=" + cache.path.string();
  write_file(dir / "layer.json", tiny(R"(, "fp16": true, "gelu_checkpoint": true)"));
  const dskc::LayerPlan plan = dskc::make_plan(dskc::load_layer_config(dir / "layer.json"));
  const auto r = run_dskc("compile " + (dir / "layer.json") + " --arch sm_80 -o " + (dir / "m.cubin"), env);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("wrote " + (dir / "m.cubin") + " (cubin for sm_80") != std::string::npos);
  CHECK(r.output.find("compiled") != std::string::npos);
  CHECK(files_in(dir.path) == std::vector<std::string>{"layer.json", "m.cubin", "m.cubin.json"});
  const std::string cubin = read_file(dir / "m.cubin");
  CHECK(cubin.rfind("\x7f" "ELF", 0) == 0);
  const auto m = nlohmann::json::parse(read_file(dir / "m.cubin.json"));
  CHECK(m["dskc_version"] == dskc::kDskcVersion);
  CHECK(m["arch"] == "sm_80");
  CHECK(m["emit"] == "cubin");
  CHECK(m["config_hash"] == plan.config_hash);
  CHECK(m["cache_key"].get<std::string>().size() == 64);
  CHECK(m["activation_bytes"] == plan.activation_bytes());
  CHECK(dskc::parse_layer_config(m["config"].dump(), "manifest") == plan.cfg);
  std::vector<std::string> names;
  for (const auto& k : m["kernels"]) {
    CAPTURE(k.dump());
    names.push_back(k["name"]);
    REQUIRE(k.contains("registers"));
    CHECK(k["registers"].get<int>() > 0);
    CHECK(k["spill_bytes"] == 0);
    CHECK(k["block"] == plan.find_kernel(k["name"])->block);
    // The launch shape a caller of the cubin needs: rows per block of the row kernels (a warp per
    // LayerNorm row at this width: 4) and of the attention tiles.
    CHECK(k["rows_per_block"] == plan.find_kernel(k["name"])->rows_per_block);
    if (k["name"] == "bias_dropout_residual_layernorm_fwd_attn") CHECK(k["rows_per_block"] == 4);
  }
  CHECK(names == plan_kernels(plan));
  // The same compile again is a cache hit with the same bytes; --no-cache compiles again.
  const auto again = run_dskc("compile " + (dir / "layer.json") + " --arch sm_80 -o " + (dir / "m2.cubin"), env);
  CHECK(again.exit_code == 0);
  CHECK(again.output.find("cache hit") != std::string::npos);
  CHECK(read_file(dir / "m2.cubin") == cubin);
  CHECK(read_file(dir / "m2.cubin.json") == read_file(dir / "m.cubin.json"));
  const auto fresh =
      run_dskc("compile " + (dir / "layer.json") + " --arch sm_80 --no-cache --quiet -o " + (dir / "m3.cubin"), env);
  CHECK(fresh.exit_code == 0);
  CHECK(fresh.output.empty());  // --quiet
  CHECK(read_file(dir / "m3.cubin") == cubin);
  CHECK(count_entries(cache.path, ".dskcmod") == 1);
}

TEST_CASE("compile to PTX and to CUDA source; default output names; --manifest none") {
  TempDir dir, cache;
  const std::string env = "DSKC_CACHE_DIR=" + cache.path.string();
  write_file(dir / "layer.json", tiny(R"(, "bf16": true, "pre_layer_norm": false)"));
  dskc::PlanOptions po;
  po.arch = "sm_90";  // the kernel list of an sm_90 target (gemm_sm90 where the layer allows)
  const dskc::LayerPlan plan = dskc::make_plan(dskc::load_layer_config(dir / "layer.json"), po);

  auto r = run_dskc("compile " + (dir / "layer.json") + " --arch sm_90 --emit ptx -o " + (dir / "m.ptx"), env);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string ptx = read_file(dir / "m.ptx");
  CHECK(ptx.find(".target sm_90a") != std::string::npos);  // sm_90 builds for sm_90a (wgmma, TMA)
  for (const auto& k : plan.kernels) CHECK_MESSAGE(ptx.find(".entry " + k.name + "(") != std::string::npos, k.name);
  const auto m = nlohmann::json::parse(read_file(dir / "m.ptx.json"));
  CHECK(m["emit"] == "ptx");
  CHECK(m["arch"] == "sm_90");
  std::vector<std::string> names;
  for (const auto& k : m["kernels"]) names.push_back(k["name"]);
  CHECK(names == plan_kernels(plan));

  // CUDA source: exactly what emit() generates for that arch and its NVRTC options.
  r = run_dskc("compile " + (dir / "layer.json") + " --arch sm_80 --emit cuda -o " + (dir / "m.cu"), env);
  REQUIRE(r.exit_code == 0);
  dskc::EmitOptions eo;
  eo.arch = "sm_80";
  eo.nvrtc_options = dskc::nvrtc_options({"sm_80", dskc::EmitKind::Cubin, {}});
  eo.nvrtc_version = dskc::nvrtc_version_string();
  dskc::PlanOptions po80;
  po80.arch = "sm_80";
  CHECK(read_file(dir / "m.cu") == dskc::emit(dskc::make_plan(dskc::load_layer_config(dir / "layer.json"), po80), eo).source);

  // Default names: dskc_layer_<config hash>.<ext> (+ .json) in the working directory.
  TempDir cwd;
  CHECK(sh("cd " + cwd.path.string() + " && " + env + " " + dskc_test::dskc_binary() + " compile " +
           (dir / "layer.json") + " --arch sm_80 --quiet") == 0);
  CHECK(files_in(cwd.path) == std::vector<std::string>{"dskc_layer_" + plan.config_hash + ".cubin",
                                                       "dskc_layer_" + plan.config_hash + ".cubin.json"});
  // --manifest none writes the module only; --manifest PATH puts it elsewhere.
  TempDir only;
  r = run_dskc("compile " + (dir / "layer.json") + " --arch sm_80 --manifest none -o " + (only / "m.cubin"), env);
  CHECK(r.exit_code == 0);
  CHECK(files_in(only.path) == std::vector<std::string>{"m.cubin"});
  r = run_dskc("compile " + (dir / "layer.json") + " --arch sm_80 --manifest " + (only / "info.json") + " -o " +
                   (only / "n.cubin"),
               env);
  CHECK(r.exit_code == 0);
  CHECK(files_in(only.path) == std::vector<std::string>{"info.json", "m.cubin", "n.cubin"});
}

TEST_CASE("the guide's command line: --deepspeed_config + --cf + --max_seq_length") {
  TempDir dir, cache;
  const auto r = run_dskc("compile --deepspeed_config " + example("deepspeed_bsz4096_adam_config.json") + " --cf " +
                              example("bert_large_adam_seq128.json") +
                              " --max_seq_length 128 --gelu_checkpoint --arch sm_80 -o " + (dir / "bert.cubin"),
                          "DSKC_CACHE_DIR=" + cache.path.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto m = nlohmann::json::parse(read_file(dir / "bert.cubin.json"));
  const auto& c = m["config"];
  CHECK(c["batch_size"] == 64);  // train_micro_batch_size_per_gpu
  CHECK(c["max_seq_length"] == 128);
  CHECK(c["hidden_size"] == 1024);
  CHECK(c["heads"] == 16);
  CHECK(c["intermediate_size"] == 4096);
  CHECK(c["num_hidden_layers"] == 24);
  CHECK(c["fp16"] == true);
  CHECK(c["gelu_checkpoint"] == true);
  CHECK(c["attn_dropout_checkpoint"] == false);
  for (const auto& k : m["kernels"]) CHECK(k.value("registers", 0) > 0);
  CHECK(read_file(dir / "bert.cubin").rfind("\x7f" "ELF", 0) == 0);
}

TEST_CASE("help, version and command suggestions") {
  auto r = run_dskc("--help");
  CHECK(r.exit_code == 0);
  for (const char* cmd : {"compile", "inspect", "cache"}) CHECK(r.output.find(cmd) != std::string::npos);
  r = run_dskc("");
  CHECK(r.exit_code == 2);  // no command: the help, as a usage error
  CHECK(r.output.find("usage: dskc <command>") != std::string::npos);
  r = run_dskc("--version");
  CHECK(r.exit_code == 0);
  CHECK(r.output.find(std::string("dskc ") + dskc::kDskcVersion) != std::string::npos);
  for (const char* cmd : {"compile", "inspect", "cache"}) {
    CAPTURE(cmd);
    r = run_dskc(std::string(cmd) + " --help");
    CHECK(r.exit_code == 0);
    CHECK(r.output.find(std::string("usage: dskc ") + cmd) != std::string::npos);
  }
  r = run_dskc("compile --help");
  for (const char* opt : {"--arch", "--emit", "--output", "--manifest", "--deepspeed_config", "--cf",
                          "--max_seq_length", "--gelu_checkpoint", "--normalize_invertible",
                          "--attention_dropout_checkpoint", "--no-cache"})
    CHECK_MESSAGE(r.output.find(opt) != std::string::npos, opt);
  r = run_dskc("compil layer.json");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("unknown command 'compil'") != std::string::npos);
  CHECK(r.output.find("did you mean 'compile'") != std::string::npos);
  r = run_dskc("inpsect");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("did you mean 'inspect'") != std::string::npos);
  r = run_dskc("frobnicate");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("did you mean") == std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The cache through the CLI (SPEC §3)

TEST_CASE("eight concurrent compiles of one config leave one valid cache entry and identical outputs") {
  TempDir dir;
  const fs::path cache = dir.path / "cache";
  write_file(dir / "layer.json", tiny(R"(, "fp16": true)"));
  const std::string env = "DSKC_CACHE_DIR=" + cache.string();
  constexpr int kProcs = 8;
  std::string script;
  for (int i = 0; i < kProcs; ++i) {
    const std::string n = std::to_string(i);
    script += "(" + env + " " + dskc_test::dskc_binary() + " compile " + (dir / "layer.json") + " --arch sm_80 -o " +
              (dir / ("out" + n + ".cubin")) + " >" + (dir / ("log" + n)) + " 2>&1; echo $? >" + (dir / ("rc" + n)) +
              ") & ";
  }
  script += "wait";
  REQUIRE(sh(script) == 0);
  const std::string first = read_file(dir / "out0.cubin");
  CHECK(first.rfind("\x7f" "ELF", 0) == 0);
  int compiled = 0;
  for (int i = 0; i < kProcs; ++i) {
    const std::string n = std::to_string(i);
    const std::string log = read_file(dir / ("log" + n));
    CAPTURE(i);
    INFO(log);
    CHECK(read_file(dir / ("rc" + n)) == "0\n");
    CHECK(read_file(dir / ("out" + n + ".cubin")) == first);
    CHECK(read_file(dir / ("out" + n + ".cubin.json")) == read_file(dir / "out0.cubin.json"));
    compiled += log.find("compiled in") != std::string::npos;
  }
  CHECK(compiled >= 1);
  CHECK(count_entries(cache, ".dskcmod") == 1);
  CHECK(count_containing(cache, ".tmp-") == 0);
  auto ls = run_dskc("cache ls", env);
  INFO(ls.output);
  CHECK(ls.exit_code == 0);
  CHECK(ls.output.find("1 entry in " + cache.string()) != std::string::npos);
  CHECK(ls.output.find("CORRUPT") == std::string::npos);
  CHECK(ls.output.find("sm_80") != std::string::npos);
  // --dir names the same cache without the environment.
  CHECK(run_dskc("cache ls --dir " + cache.string()).output.find("1 entry in") != std::string::npos);

  SUBCASE("a truncated entry is detected, rebuilt by the next compile, then hit again") {
    fs::path entry;
    for (const auto& e : fs::recursive_directory_iterator(cache))
      if (e.path().extension() == ".dskcmod") entry = e.path();
    REQUIRE(!entry.empty());
    const auto full = fs::file_size(entry);
    fs::resize_file(entry, full / 2);
    ls = run_dskc("cache ls", env);
    CHECK(ls.output.find("CORRUPT") != std::string::npos);  // listing does not repair

    auto r = run_dskc("compile " + (dir / "layer.json") + " --arch sm_80 -o " + (dir / "re.cubin"), env);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("compiled in") != std::string::npos);
    CHECK(r.output.find("cache hit") == std::string::npos);
    CHECK(read_file(dir / "re.cubin") == first);
    CHECK(fs::file_size(entry) == full);
    CHECK(count_entries(cache, ".dskcmod") == 1);
    CHECK(run_dskc("cache stats", env).output.find("corrupt removed: 1") != std::string::npos);

    r = run_dskc("compile " + (dir / "layer.json") + " --arch sm_80 -o " + (dir / "hit.cubin"), env);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("cache hit") != std::string::npos);
    CHECK(read_file(dir / "hit.cubin") == first);

    // An entry cut to nothing is a miss as well.
    fs::resize_file(entry, 0);
    r = run_dskc("compile " + (dir / "layer.json") + " --arch sm_80 -o " + (dir / "zero.cubin"), env);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("compiled in") != std::string::npos);
    CHECK(read_file(dir / "zero.cubin") == first);

    CHECK(run_dskc("cache clear", env).output.find("removed 1 entry") != std::string::npos);
    CHECK(count_entries(cache, ".dskcmod") == 0);
  }
}

TEST_CASE("the cache key changes with every config field, the arch, the emit kind, options and the source") {
  dskc::LayerConfig base = dskc::parse_layer_config(tiny(), "tiny");
  // The fast path: PTX (no ptxas); the key derivation is the same for cubins.
  const dskc::CompileOptions ptx{"sm_80", dskc::EmitKind::Ptx, {}};
  auto key_of = [](const dskc::LayerConfig& c, const dskc::CompileOptions& o) {
    return dskc::build_module(dskc::make_plan(c), o, /*use_cache=*/false).module.cache_key;
  };
  const dskc::BuildResult b = dskc::build_module(dskc::make_plan(base), ptx, false);
  const std::string base_key = b.module.cache_key;
  REQUIRE(base_key.size() == 64);
  // The key is cache_key() of exactly what build_module compiled.
  CHECK(base_key == dskc::cache_key({b.generated.source, dskc::nvrtc_options(ptx), "sm_80", "ptx",
                                     dskc::nvrtc_version_string(), dskc::kDskcVersion}));
  CHECK(key_of(base, ptx) == base_key);  // deterministic

  // One variant per field of LayerConfig. Fields that shape the kernels change the source body;
  // the others (seed, local_rank, num_hidden_layers, initializer_range, adjust_init_range) reach
  // the source, and so the key, only through the config hash in the provenance header.
  std::vector<std::pair<std::string, dskc::LayerConfig>> variants;
  auto add = [&](const char* field, auto&& change) {
    dskc::LayerConfig c = base;
    change(c);
    variants.emplace_back(field, c);
  };
  add("batch_size", [](auto& c) { c.batch_size = 8; });
  add("max_seq_length", [](auto& c) { c.max_seq_length = 64; });
  add("hidden_size", [](auto& c) { c.hidden_size = 128; });
  add("heads", [](auto& c) { c.heads = 2; });
  add("intermediate_size", [](auto& c) { c.intermediate_size = 128; });
  add("attn_dropout_ratio", [](auto& c) { c.attn_dropout_ratio = 0.2; });
  add("hidden_dropout_ratio", [](auto& c) { c.hidden_dropout_ratio = 0.2; });
  add("num_hidden_layers", [](auto& c) { c.num_hidden_layers = 3; });
  add("initializer_range", [](auto& c) { c.initializer_range = 0.01; });
  add("layer_norm_eps", [](auto& c) { c.layer_norm_eps = 1e-5; });
  add("local_rank", [](auto& c) { c.local_rank = 1; });
  add("seed", [](auto& c) { c.seed = 43; });
  add("fp16", [](auto& c) { c.fp16 = true; });
  add("bf16", [](auto& c) { c.bf16 = true; });
  add("pre_layer_norm", [](auto& c) { c.pre_layer_norm = false; });
  add("attn_dropout_checkpoint", [](auto& c) { c.attn_dropout_checkpoint = true; });
  add("normalize_invertible", [](auto& c) { c.normalize_invertible = true; });
  add("gelu_checkpoint", [](auto& c) { c.gelu_checkpoint = true; });
  add("stochastic_mode", [](auto& c) { c.stochastic_mode = true; });
  add("adjust_init_range", [](auto& c) { c.adjust_init_range = false; });
  add("training", [](auto& c) { c.training = false; });
  add("gelu_approximation", [](auto& c) { c.gelu_approximation = dskc::GeluForm::Tanh; });

  // The table covers every serialized field, each variant changing exactly its own.
  const auto base_json = nlohmann::json::parse(dskc::to_json_text(base));
  std::set<std::string> covered;
  for (const auto& [field, c] : variants) {
    CAPTURE(field);
    const auto j = nlohmann::json::parse(dskc::to_json_text(c));
    std::vector<std::string> changed;
    for (const auto& [k, v] : base_json.items())
      if (j[k] != v) changed.push_back(k);
    CHECK(changed == std::vector<std::string>{field});
    covered.insert(field);
  }
  CHECK(covered.size() == base_json.size());

  std::set<std::string> keys{base_key};
  for (const auto& [field, c] : variants) {
    CAPTURE(field);
    const std::string k = key_of(c, ptx);
    CHECK(k.size() == 64);
    CHECK_MESSAGE(keys.insert(k).second, "changing " << field << " leaves the cache key unchanged");
  }
  // Target, output kind and NVRTC options.
  CHECK(keys.insert(key_of(base, {"sm_90", dskc::EmitKind::Ptx, {}})).second);
  CHECK(keys.insert(key_of(base, {"sm_80", dskc::EmitKind::Cubin, {}})).second);
  CHECK(keys.insert(key_of(base, {"sm_80", dskc::EmitKind::Ptx, {"-lineinfo"}})).second);

  // A template change is a source change: the key hashes the whole generated source (and the
  // NVRTC and dskc versions).
  dskc::CacheKeyInputs in{b.generated.source, dskc::nvrtc_options(ptx), "sm_80", "ptx", dskc::nvrtc_version_string(),
                          dskc::kDskcVersion};
  REQUIRE(dskc::cache_key(in) == base_key);
  const auto at = in.source.find("// ---------------- common/reduce.cuh");
  REQUIRE(at != std::string::npos);
  dskc::CacheKeyInputs edited = in;
  edited.source.insert(at, " ");
  CHECK(dskc::cache_key(edited) != base_key);
  edited = in;
  edited.source = replace_all(edited.source, "v += __shfl_xor_sync", "v = v + __shfl_xor_sync");
  REQUIRE(edited.source != in.source);
  CHECK(dskc::cache_key(edited) != base_key);
  edited = in;
  edited.nvrtc_version = "0.0";
  CHECK(dskc::cache_key(edited) != base_key);
  edited = in;
  edited.dskc_version = "0.0.0-test";
  CHECK(dskc::cache_key(edited) != base_key);
}

TEST_CASE("DSKC_DUMP writes the source, log and PTX; DSKC_OVERRIDE_SOURCE swaps in an edited source") {
  TempDir dir, cache;
  write_file(dir / "layer.json", tiny());
  const std::string env = "DSKC_CACHE_DIR=" + cache.path.string() + " DSKC_DUMP=source,log,ptx DSKC_DUMP_DIR=" +
                          dir.path.string();
  auto r = run_dskc("compile " + (dir / "layer.json") + " --arch sm_90 --no-cache -o " + (dir / "a.cubin"), env);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::string cu, log, ptx;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("dskc_layer_", 0) != 0) continue;
    if (e.path().extension() == ".cu") cu = read_file(e.path().string());
    if (e.path().extension() == ".log") log = read_file(e.path().string());
    if (e.path().extension() == ".ptx") ptx = read_file(e.path().string());
  }
  CHECK(cu.find("==== dskc generated module ====") != std::string::npos);
  CHECK(log.find("Compiling entry function") != std::string::npos);
  CHECK(ptx.find(".entry layernorm_fwd_norm") != std::string::npos);
  // Override: an edited source (an extra kernel) is what gets compiled.
  write_file(dir / "edited.cu", cu + "\nextern \"C\" __global__ void dskc_override_probe(int* p) { *p = 1; }\n");
  r = run_dskc("compile " + (dir / "layer.json") + " --arch sm_90 -o " + (dir / "b.cubin"),
               "DSKC_CACHE_DIR=" + cache.path.string() + " DSKC_OVERRIDE_SOURCE=" + (dir / "edited.cu"));
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("DSKC_OVERRIDE_SOURCE") != std::string::npos);
  CHECK(read_file(dir / "b.cubin").find("dskc_override_probe") != std::string::npos);
  CHECK(read_file(dir / "a.cubin").find("dskc_override_probe") == std::string::npos);
}
