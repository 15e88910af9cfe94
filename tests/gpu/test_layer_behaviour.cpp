// GPU layer behaviour: memory flags give the same results as no flag (bitwise for the
// recompute flags, within rounding for normalize_invertible); runs are bitwise reproducible
// with the same seed; the batch / sequence limits give the SPEC's error; inference keeps no
// activations; the activation bytes the runtime allocates match the plan and fall per flag.
#include <doctest/doctest.h>

#include "gpu_util.h"
#include "runtime/context.h"
#include "runtime/host_tensor.h"
#include "runtime/layer_params.h"
#include "runtime/transformer_layer.h"
#include "compiler/errors.h"

using namespace dskc;

namespace {

LayerConfig base_cfg(DType t, bool pre) {
  LayerConfig c;
  c.batch_size = 4;
  c.max_seq_length = 96;
  c.hidden_size = 256;
  c.heads = 4;
  c.intermediate_size = 1024;
  c.attn_dropout_ratio = 0.1;
  c.hidden_dropout_ratio = 0.1;
  c.num_hidden_layers = 2;
  c.seed = 99;
  c.fp16 = t == DType::F16;
  c.bf16 = t == DType::BF16;
  c.pre_layer_norm = pre;
  return c;
}

struct Run {
  std::vector<float> out, dx;
  std::map<std::string, std::vector<float>> grads;
};

Run run(Context& ctx, const LayerConfig& c, int B, int S, uint32_t step = 5) {
  TransformerLayer layer(ctx, c);
  auto params = init_layer_params(c, 3);
  params["attn_nw"] = dskc_test::randn(params["attn_nw"].size(), 8, 0.2f, 1.f);
  params["norm_b"] = dskc_test::randn(params["norm_b"].size(), 9, 0.1f);
  layer.set_params(params);
  const size_t n = static_cast<size_t>(B) * S * c.hidden_size, eb = dtype_bytes(c.dtype());
  DeviceBuffer x(ctx, n * eb), y(ctx, n * eb), dy(ctx, n * eb), dx(ctx, n * eb);
  upload(ctx, x.ptr(), dskc_test::randn(n, 1), c.dtype());
  upload(ctx, dy.ptr(), dskc_test::randn(n, 2), c.dtype());
  layer.forward(x.ptr(), 0, y.ptr(), B, S, step);
  Run r;
  r.out = download(ctx, y.ptr(), n, c.dtype());
  if (c.training) {
    layer.backward(dy.ptr(), dx.ptr());
    r.dx = download(ctx, dx.ptr(), n, c.dtype());
    r.grads = layer.get_grads();
  }
  return r;
}

}  // namespace

TEST_CASE("memory flags give the same outputs and gradients as no flag") {
  dskc_test::require_gpu();
  Context ctx;
  for (bool pre : {true, false}) {
    for (DType t : {DType::F32, DType::F16}) {
      LayerConfig c = base_cfg(t, pre);
      Run ref = run(ctx, c, 3, 77);
      struct Flag {
        const char* name;
        bool a, n, g;
      } flags[] = {{"attn_dropout_checkpoint", true, false, false},
                   {"gelu_checkpoint", false, false, true},
                   {"normalize_invertible", false, true, false},
                   {"all", true, true, true}};
      for (const auto& f : flags) {
        INFO(f.name << (pre ? " Pre-LN " : " Post-LN ") << dtype_name(t));
        LayerConfig cf = c;
        cf.attn_dropout_checkpoint = f.a;
        cf.normalize_invertible = f.n;
        cf.gelu_checkpoint = f.g;
        Run r = run(ctx, cf, 3, 77);
        CHECK(r.out == ref.out);  // forward math does not depend on the flags
        if (!f.n) {
          CHECK(r.dx == ref.dx);
          for (auto& [k, v] : ref.grads) CHECK_MESSAGE(r.grads[k] == v, k);
        } else {
          const double tol = t == DType::F32 ? 1e-4 : 2e-2;
          auto e = dskc_test::compare(r.dx, ref.dx);
          CHECK_MESSAGE(e.rel < tol, "grad_input rel " << e.rel);
          for (auto& [k, v] : ref.grads) {
            auto eg = dskc_test::compare(r.grads[k], v);
            CHECK_MESSAGE(eg.rel < tol, k << " rel " << eg.rel);
          }
        }
      }
    }
  }
}

TEST_CASE("same seed and step: bitwise identical runs; another step: another mask") {
  dskc_test::require_gpu();
  Context ctx;
  LayerConfig c = base_cfg(DType::F16, true);
  Run a = run(ctx, c, 4, 96, 5), b = run(ctx, c, 4, 96, 5), other = run(ctx, c, 4, 96, 6);
  CHECK(a.out == b.out);
  CHECK(a.dx == b.dx);
  for (auto& [k, v] : a.grads) CHECK_MESSAGE(b.grads[k] == v, k);
  CHECK(a.out != other.out);
}

TEST_CASE("dropout keeps about 1 - ratio of the attention-output elements") {
  dskc_test::require_gpu();
  Context ctx;
  // With zero weights except biases, the attention branch output is exactly attn_ob; dropout of
  // it is visible as out - x = 0 or attn_ob / (1 - p) (Pre-LN, FFN output zeroed too).
  LayerConfig c = base_cfg(DType::F32, true);
  c.attn_dropout_ratio = 0.0;
  c.hidden_dropout_ratio = 0.3;
  TransformerLayer layer(ctx, c);
  auto p = init_layer_params(c, 1);
  for (auto& [k, v] : p) std::fill(v.begin(), v.end(), 0.f);
  std::fill(p["attn_ob"].begin(), p["attn_ob"].end(), 1.f);
  std::fill(p["attn_nw"].begin(), p["attn_nw"].end(), 1.f);
  std::fill(p["norm_w"].begin(), p["norm_w"].end(), 1.f);
  layer.set_params(p);
  const int B = 4, S = 96;
  const size_t n = static_cast<size_t>(B) * S * c.hidden_size;
  DeviceBuffer x(ctx, n * 4), y(ctx, n * 4);
  upload(ctx, x.ptr(), std::vector<float>(n, 0.f), DType::F32);
  layer.forward(x.ptr(), 0, y.ptr(), B, S, 1);
  auto out = download(ctx, y.ptr(), n, DType::F32);
  size_t kept = 0;
  for (float v : out) {
    CHECK((v == 0.f || std::fabs(v - 1.f / 0.7f) < 1e-5));
    kept += v != 0.f;
  }
  const double frac = static_cast<double>(kept) / n;
  CHECK(frac == doctest::Approx(0.7).epsilon(0.02));
}

TEST_CASE("batch or sequence above the maximum: error names both numbers and the fix") {
  dskc_test::require_gpu();
  Context ctx;
  LayerConfig c = base_cfg(DType::F16, true);
  TransformerLayer layer(ctx, c);
  DeviceBuffer buf(ctx, 8 * 128 * 256 * 2);
  try {
    layer.forward(buf.ptr(), 0, buf.ptr(), 5, 10, 0);
    FAIL("no error");
  } catch (const Error& e) {
    std::string m = e.what();
    CHECK(m.find("batch 5") != std::string::npos);
    CHECK(m.find("batch_size 4") != std::string::npos);
    CHECK(m.find("raise batch_size") != std::string::npos);
  }
  try {
    layer.forward(buf.ptr(), 0, buf.ptr(), 1, 97, 0);
    FAIL("no error");
  } catch (const Error& e) {
    std::string m = e.what();
    CHECK(m.find("97") != std::string::npos);
    CHECK(m.find("max_seq_length 96") != std::string::npos);
  }
}

TEST_CASE("activation memory: runtime allocation matches the plan, each flag lowers it") {
  dskc_test::require_gpu();
  Context ctx;
  LayerConfig c = base_cfg(DType::F16, true);
  c.batch_size = 64;
  c.max_seq_length = 128;
  c.hidden_size = 1024;
  c.heads = 16;
  c.intermediate_size = 4096;
  size_t none = 0;
  for (int f = 0; f < 5; ++f) {
    LayerConfig cf = c;
    cf.attn_dropout_checkpoint = f == 1 || f == 4;
    cf.normalize_invertible = f == 2 || f == 4;
    cf.gelu_checkpoint = f == 3 || f == 4;
    const size_t before = ctx.allocated_bytes();
    TransformerLayer layer(ctx, cf);
    const size_t plan_bytes = static_cast<size_t>(layer.plan().activation_bytes());
    // Saved tensors are 256-byte aligned in one arena: at most 256 bytes of padding each.
    CHECK(layer.saved_bytes_allocated() >= plan_bytes);
    CHECK(layer.saved_bytes_allocated() <= plan_bytes + 256 * layer.plan().saved.size());
    // Everything else the layer allocates is parameters, gradients and small tables.
    const size_t layer_total = ctx.allocated_bytes() - before;
    CHECK(layer_total - layer.saved_bytes_allocated() <= 2 * layer.params_bytes() + (1u << 20));
    std::printf("flags %d: activation %.2f MiB\n", f, plan_bytes / 1048576.0);
    if (f == 0) none = plan_bytes;
    else CHECK(plan_bytes < none);
  }
  LayerConfig inf = c;
  inf.training = false;
  TransformerLayer layer(ctx, inf);
  CHECK(layer.saved_bytes_allocated() == 0);
}
