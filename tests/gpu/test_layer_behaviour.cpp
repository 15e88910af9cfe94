// GPU layer behaviour: memory flags give the same results as no flag (bitwise for the
// recompute flags, within rounding for normalize_invertible); runs are bitwise reproducible
// with the same seed; the batch / sequence limits give the SPEC's error; inference keeps no
// activations; the activation bytes the runtime allocates match the plan and fall per flag
// (attn_dropout_checkpoint on the fused attention path drops the saved keep bits, and its
// regenerated mask gives bitwise the same gradients as the saved bits); the fused attention's
// dropout keeps exactly the Philox-selected probabilities (read from the outputs), and the keep
// bits the fused forward saves are exactly the Philox mask (zero past S); a forward and backward
// captured into CUDA graphs (dskc bench --graph) replay bitwise what the plain calls compute.
#include <cmath>
#include <cstring>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "gpu_util.h"
#include "test_util.h"
#include "runtime/context.h"
#include "runtime/cuda_graph.h"
#include "runtime/driver.h"
#include "runtime/host_tensor.h"
#include "runtime/layer_params.h"
#include "runtime/profiler.h"
#include "runtime/transformer_layer.h"
#include "compiler/errors.h"
#include "templates/common/philox.cuh"

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

// base_cfg at BERT-Large widths (hidden 1024, 16 heads, intermediate 4096), batch and seq as given.
LayerConfig large_cfg(DType t, bool pre, int batch, int seq) {
  LayerConfig c = base_cfg(t, pre);
  c.batch_size = batch;
  c.max_seq_length = seq;
  c.hidden_size = 1024;
  c.heads = 16;
  c.intermediate_size = 4096;
  return c;
}

struct Run {
  std::vector<float> out, dx;
  std::map<std::string, std::vector<float>> grads;
};

Run run(Context& ctx, const LayerConfig& c, int B, int S, uint32_t step = 5,
        AttentionPath path = AttentionPath::FusedWhereSupported) {
  LayerOptions opt;
  opt.attention = path;
  TransformerLayer layer(ctx, c, opt);
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

// The CUDA-graph cases' layer: BERT-Large widths at 8 x 128, fp16 Pre-LN, all three memory flags or none.
LayerConfig graph_case_cfg(bool all_flags) {
  LayerConfig c = large_cfg(DType::F16, true, 8, 128);
  c.attn_dropout_checkpoint = c.normalize_invertible = c.gelu_checkpoint = all_flags;
  return c;
}

// The CUDA-graph cases' loop: body(config) with no flag, then with all three memory flags.
template <class F>
void for_each_graph_case(F&& body) {
  for (bool flags : {false, true}) {
    INFO((flags ? "all three memory flags" : "no flag"));
    body(graph_case_cfg(flags));
  }
}

// A layer of config c for batch x seq, its parameters from init_layer_params(c, 3), the input x and the
// output gradient dy drawn (seeds 1, 2), y and dx to write: the setup of the timeline and CUDA-graph
// cases (`auto& [layer, n, eb, x, y, dy, dx] = io;`); `opt` the layer's options.
struct LayerIo {
  LayerIo(Context& ctx, const LayerConfig& c, int batch, int seq, const LayerOptions& opt = {})
      : layer(ctx, c, opt), n(static_cast<size_t>(batch) * seq * c.hidden_size), eb(dtype_bytes(c.dtype())),
        x(ctx, n * eb), y(ctx, n * eb), dy(ctx, n * eb), dx(ctx, n * eb) {
    layer.set_params(init_layer_params(c, 3));
    upload(ctx, x.ptr(), dskc_test::randn(n, 1), c.dtype());
    upload(ctx, dy.ptr(), dskc_test::randn(n, 2), c.dtype());
  }
  TransformerLayer layer;
  size_t n, eb;
  DeviceBuffer x, y, dy, dx;
};

}  // namespace

TEST_CASE("memory flags give the same outputs and gradients as no flag") {
  dskc_test::require_gpu();
  Context ctx;
  for (bool pre : {true, false}) {
    for (DType t : {DType::F32, DType::F16}) {
      LayerConfig c = base_cfg(t, pre);
      // fp16 runs the fused attention: without the flag its backward reads the keep bits the
      // forward saved, with attn_dropout_checkpoint it regenerates the mask with Philox; the
      // gradients must agree bitwise.
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
  // fp16, head dim 64: the fused attention (no atomics) and the forced-unfused path; seq 93 leaves
  // partial tiles.
  for (AttentionPath path : {AttentionPath::FusedWhereSupported, AttentionPath::Unfused})
    for (int S : {96, 93}) {
      INFO((path == AttentionPath::Unfused ? "unfused" : "fused") << " seq " << S);
      LayerConfig c = base_cfg(DType::F16, true);
      Run a = run(ctx, c, 4, S, 5, path), b = run(ctx, c, 4, S, 5, path), other = run(ctx, c, 4, S, 6, path);
      CHECK(a.out == b.out);
      CHECK(a.dx == b.dx);
      for (auto& [k, v] : a.grads) CHECK_MESSAGE(b.grads[k] == v, k);
      CHECK(a.out != other.out);
    }
}

TEST_CASE("attention dropout keeps exactly the Philox-selected probabilities (fused and unfused)") {
  dskc_test::require_gpu();
  // Pre-LN with x = 0: LN(x) = norm_b = 0, so Q = K = 0 (uniform P = 1/S) and V = attn_qkvb's V part
  // = 1; attn_ow = I, everything else 0 and no hidden dropout: out[b, i, h·d + c] = context =
  // Σ_j dropout(P)_ij = kept(b, h, i) / (S·(1 − p)), where kept counts the keys the shared Philox
  // rule keeps for element ((b·heads + h)·S + i)·S + j of stream kStreamAttnProbs. Any error in the
  // fused kernels' dropout indexing changes some row's count.
  Context ctx;
  for (AttentionPath path : {AttentionPath::FusedWhereSupported, AttentionPath::Unfused})
    for (int S : {96, 37}) {
      LayerConfig c = base_cfg(DType::F16, true);
      c.attn_dropout_ratio = 0.3;
      c.hidden_dropout_ratio = 0.0;
      LayerOptions opt;
      opt.attention = path;
      TransformerLayer layer(ctx, c, opt);
      INFO((layer.plan().fused_attention ? "fused" : "unfused") << " seq " << S);
      CHECK(layer.plan().fused_attention == (path != AttentionPath::Unfused));
      auto p = init_layer_params(c, 1);
      for (auto& [k, v] : p) std::fill(v.begin(), v.end(), 0.f);
      const int H = c.hidden_size, d = c.head_dim();
      for (int i = 0; i < H; ++i) p["attn_qkvb"][2 * H + i] = 1.f;
      for (int i = 0; i < H; ++i) p["attn_ow"][static_cast<size_t>(i) * H + i] = 1.f;
      std::fill(p["attn_nw"].begin(), p["attn_nw"].end(), 1.f);
      std::fill(p["norm_w"].begin(), p["norm_w"].end(), 1.f);
      layer.set_params(p);
      const int B = 3;
      const uint32_t step = 7;
      const size_t n = static_cast<size_t>(B) * S * H;
      DeviceBuffer x(ctx, n * 2), y(ctx, n * 2);
      upload(ctx, x.ptr(), std::vector<float>(n, 0.f), DType::F16);
      layer.forward(x.ptr(), 0, y.ptr(), B, S, step);
      const auto out = download(ctx, y.ptr(), n, DType::F16);
      const dskc_rng::DropoutKey key{c.seed, 0, step};
      const uint32_t thr = dskc_rng::dropout_threshold(c.attn_dropout_ratio);
      size_t bad = 0, kept_total = 0;
      for (int b = 0; b < B; ++b)
        for (int h = 0; h < c.heads; ++h)
          for (int i = 0; i < S; ++i) {
            int kept = 0;
            for (int j = 0; j < S; ++j)
              kept += dskc_rng::dropout_keep(key, dskc_rng::kStreamAttnProbs,
                                             ((static_cast<uint64_t>(b) * c.heads + h) * S + i) * S + j, thr);
            kept_total += kept;
            const double want = kept / (S * (1.0 - c.attn_dropout_ratio));
            for (int col = h * d; col < (h + 1) * d; ++col) {
              const double got = out[(static_cast<size_t>(b) * S + i) * H + col];
              if (std::fabs(got - want) > 2e-3 * want + 1e-3 && bad++ < 5)
                std::printf("mismatch at (b %d, head %d, row %d, col %d): %.6f, expected %d kept of %d -> %.6f\n", b,
                            h, i, col, got, kept, S, want);
            }
          }
      CHECK_MESSAGE(bad == 0, bad << " output elements disagree with the Philox keep counts");
      const double frac = static_cast<double>(kept_total) / (static_cast<double>(B) * c.heads * S * S);
      CHECK(frac == doctest::Approx(0.7).epsilon(0.03));
    }
}

// The keep bits as the backward reads them: saved by the forward (attn_flash_fwd, or with
// DSKC_ATTN_MASK=kernel attn_dropout_bits_fwd), or under attn_dropout_checkpoint in the workspace,
// written by attn_dropout_bits_bwd during backward (saved there too with DSKC_ATTN_BITS_BWD=saved).
TEST_CASE("fused attention keep bits are exactly the Philox keep mask; attn_dropout_checkpoint saves none unless DSKC_ATTN_BITS_BWD=saved") {
  dskc_test::require_gpu();
  Context ctx;
  for (int S : {96, 93, 64, 37, 33, 32, 1})
    for (int flags : {0, 1, 2})  // none; attn_dropout_checkpoint; + normalize_invertible (ln: bits from the LN re-run)
      for (const char* mask_src : {"inline", "kernel", "ln"})
        for (const char* bits_bwd : {"auto", "dot", "kernel", "saved"}) {
        const bool adc = flags >= 1, inv = flags == 2;
        const std::string m = mask_src, bb = bits_bwd;
        const bool rewritten = adc && bb != "saved";  // the backward rewrites the bits into the workspace
        if (inv && m == "inline") continue;
        if (!adc && bb != "auto") continue;  // nothing rewritten in backward
        if (adc && !inv && bb == "kernel") continue;  // = auto there
        INFO("seq " << S << (adc ? " attn_dropout_checkpoint" : " no flag") << (inv ? " + normalize_invertible" : "")
                    << " DSKC_ATTN_MASK=" << mask_src << " DSKC_ATTN_BITS_BWD=" << bits_bwd);
        LayerConfig c = base_cfg(DType::F16, true);
        c.attn_dropout_ratio = 0.3;
        c.attn_dropout_checkpoint = adc;
        c.normalize_invertible = inv;
        const dskc_test::ScopedEnv env("DSKC_ATTN_MASK", mask_src), env_bwd("DSKC_ATTN_BITS_BWD", bits_bwd);
        TransformerLayer layer(ctx, c);
        REQUIRE(layer.plan().fused_attention);
        const TensorInfo* bits = layer.plan().find_saved("attn_dropout_bits");
        CHECK(layer.plan().attn_keep_bits);
        CHECK(layer.plan().attn_keep_bits_saved == !rewritten);
        CHECK(layer.plan().attn_mask_kernel == (m == "kernel" || m == "ln"));
        CHECK(layer.plan().attn_bits_in_ln == (m == "ln" && c.pre_layer_norm));
        const bool bwd_ln = m == "ln" && c.pre_layer_norm && inv && bb == "auto";  // (auto: adc, never saved)
        CHECK(layer.plan().attn_bits_bwd_in_ln == bwd_ln);
        CHECK(layer.plan().attn_bits_bwd_in_dot == (adc && bb == "dot"));
        CHECK((bits != nullptr) == !rewritten);
        layer.set_params(init_layer_params(c, 2));
        const int B = 3, W = (S + 31) / 32;
        const uint32_t step = 9;
        const size_t n = static_cast<size_t>(B) * S * c.hidden_size;
        DeviceBuffer x(ctx, n * 2), y(ctx, n * 2), dy(ctx, n * 2), dx(ctx, n * 2);
        upload(ctx, x.ptr(), dskc_test::randn(n, 3), DType::F16);
        upload(ctx, dy.ptr(), dskc_test::randn(n, 4), DType::F16);
        layer.forward(x.ptr(), 0, y.ptr(), B, S, step);
        const size_t words = static_cast<size_t>(B) * c.heads * S * W;
        if (rewritten) {
          // The forward may have written the workspace bits too (kernel / ln): cleared, so what is read
          // below is what the backward rewrote (all-zero words keep nothing: every check would fail).
          upload(ctx, layer.tensor("attn_dropout_bits"), std::vector<float>(words, 0.f), DType::F32);
          layer.backward(dy.ptr(), dx.ptr());
        }
        if (bits) CHECK(bits->bytes(B, S) == static_cast<int64_t>(words * 4));
        const std::vector<float> raw = download(ctx, layer.tensor("attn_dropout_bits"), words, DType::F32);  // 4-byte copies
        std::vector<uint32_t> got(words);
        std::memcpy(got.data(), raw.data(), words * 4);
        const dskc_rng::DropoutKey key{c.seed, 0, step};
        const uint32_t thr = dskc_rng::dropout_threshold(c.attn_dropout_ratio);
        size_t bad = 0;
        for (int b = 0; b < B; ++b)
          for (int h = 0; h < c.heads; ++h)
            for (int i = 0; i < S; ++i)
              for (int j = 0; j < 32 * W; ++j) {
                const uint64_t row = (static_cast<uint64_t>(b) * c.heads + h) * S + i;
                const bool want = j < S && dskc_rng::dropout_keep(key, dskc_rng::kStreamAttnProbs, row * S + j, thr);
                const bool bit = (got[row * W + j / 32] >> (j % 32)) & 1u;
                if (bit != want && bad++ < 5)
                  std::printf("keep bit mismatch at (b %d, head %d, row %d, key %d): %d, Philox says %d\n", b, h, i, j,
                              int(bit), int(want));
              }
        CHECK_MESSAGE(bad == 0, bad << " keep bits disagree with the Philox mask");
      }
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
  LayerConfig c = large_cfg(DType::F16, true, 64, 128);
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
    std::printf("flags %d: activation %.2f MiB (%s attention)\n", f, plan_bytes / 1048576.0,
                layer.plan().fused_attention ? "fused" : "unfused");
    CHECK(layer.plan().fused_attention);  // fp16, head dim 64
    // Fused attention keeps the dropout keep bits unless attn_dropout_checkpoint (attn_dropout_bits_bwd
    // rewrites them into the workspace in backward instead): B·heads·S·ceil(S/32) words.
    CHECK((layer.plan().find_saved("attn_dropout_bits") != nullptr) == !cf.attn_dropout_checkpoint);
    if (f == 0) none = plan_bytes;
    else CHECK(plan_bytes < none);
    if (f == 1) CHECK(none - plan_bytes == size_t{64} * 16 * 128 * 4 * 4);
    // The unfused path allocates what its plan says too, keeps more, and its flag does lower it.
    LayerOptions unf;
    unf.attention = AttentionPath::Unfused;
    TransformerLayer u(ctx, cf, unf);
    const size_t u_bytes = static_cast<size_t>(u.plan().activation_bytes());
    CHECK_FALSE(u.plan().fused_attention);
    CHECK(u.saved_bytes_allocated() >= u_bytes);
    CHECK(u.saved_bytes_allocated() <= u_bytes + 256 * u.plan().saved.size());
    CHECK(u_bytes > plan_bytes);
    if (f == 1) {
      LayerConfig c0 = c;
      TransformerLayer u0(ctx, c0, unf);
      CHECK(u_bytes < static_cast<size_t>(u0.plan().activation_bytes()));
    }
  }
  LayerConfig inf = c;
  inf.training = false;
  TransformerLayer layer(ctx, inf);
  CHECK(layer.saved_bytes_allocated() == 0);
}

namespace {

// A stack of `layers` layers sharing one Context (so they share the workspace, as in training):
// two steps of forward through the stack and backward in reverse; returns the last step's input
// gradient and every layer's parameter gradients.
// cuda_graphs: LayerOptions::cuda_graphs (1: the second step replays captured graphs; -1: from
// DSKC_LAYER_GRAPHS, off unless set).
std::vector<Run> run_stack(Context& ctx, const LayerConfig& c, int layers, int B, int S, int side_stream,
                           int cuda_graphs = -1) {
  std::vector<std::unique_ptr<TransformerLayer>> stack;
  for (int l = 0; l < layers; ++l) {
    LayerOptions opt;
    opt.layer_id = static_cast<uint32_t>(l);
    opt.side_stream = side_stream;
    opt.cuda_graphs = cuda_graphs;
    stack.push_back(std::make_unique<TransformerLayer>(ctx, c, opt));
    stack.back()->set_params(init_layer_params(c, 3 + static_cast<uint64_t>(l)));
  }
  const size_t n = static_cast<size_t>(B) * S * c.hidden_size, eb = dtype_bytes(c.dtype());
  std::vector<DeviceBuffer> act;
  for (int l = 0; l <= layers; ++l) act.emplace_back(ctx, n * eb);
  DeviceBuffer ga(ctx, n * eb), gb(ctx, n * eb);
  upload(ctx, act[0].ptr(), dskc_test::randn(n, 1), c.dtype());
  std::vector<Run> out(static_cast<size_t>(layers));
  for (uint32_t step = 1; step <= 2; ++step) {
    for (int l = 0; l < layers; ++l) stack[l]->forward(act[l].ptr(), 0, act[l + 1].ptr(), B, S, step);
    upload(ctx, ga.ptr(), dskc_test::randn(n, 2 + step), c.dtype());
    for (int l = layers - 1; l >= 0; --l) {
      stack[l]->backward(ga.ptr(), gb.ptr());
      std::swap(ga, gb);
    }
  }
  for (int l = 0; l < layers; ++l) out[l].grads = stack[l]->get_grads();
  out[0].dx = download(ctx, ga.ptr(), n, c.dtype());
  return out;
}

}  // namespace

TEST_CASE("backward on two streams gives bitwise the results of one stream") {
  dskc_test::require_gpu();
  Context ctx;
  // BERT-Large widths, so the overlapping GEMMs and kernels run long enough for a missing wait to
  // show; three layers share the workspace. Every combination that changes the side stream's work:
  // both LayerNorm placements, the memory flags (regenerated keep bits and LayerNorm output go to
  // the side stream first), fp32 (bias gradients from partial sums, no GEMM epilogue).
  struct Case {
    const char* name;
    DType t;
    bool pre, adc, inv, gelu;
  } cases[] = {{"fp16 Pre-LN", DType::F16, true, false, false, false},
               {"fp16 Pre-LN all flags", DType::F16, true, true, true, true},
               {"fp16 Post-LN all flags", DType::F16, false, true, true, true},
               {"bf16 Pre-LN attn_dropout_checkpoint", DType::BF16, true, true, false, false},
               {"fp32 Pre-LN gelu_checkpoint", DType::F32, true, false, false, true},
               {"fp16 Pre-LN gelu_checkpoint", DType::F16, true, false, false, true},
               {"fp32 Pre-LN all flags", DType::F32, true, true, true, true}};
  for (const auto& k : cases) {
    INFO(k.name);
    LayerConfig c = large_cfg(k.t, k.pre, 8, 128);
    c.attn_dropout_checkpoint = k.adc;
    c.normalize_invertible = k.inv;
    c.gelu_checkpoint = k.gelu;
    auto one = run_stack(ctx, c, 3, 8, 128, 0);
    auto two = run_stack(ctx, c, 3, 8, 128, 1);
    CHECK(two[0].dx == one[0].dx);
    for (size_t l = 0; l < one.size(); ++l)
      for (auto& [name, v] : one[l].grads) CHECK_MESSAGE(two[l].grads[name] == v, "layer " << l << " " << name);
  }
}

// DSKC_GEMM_TILES=dynamic: gemm_sm90's blocks take their tiles from a global counter instead of
// the static sequence. A tile's arithmetic does not depend on the block that computes it, so a stack
// of three layers (six gemm_sm90 launches a step at least, two steps: the counters must be back at
// zero after every launch, or a later launch computes too few tiles) gives bitwise the results of
// the static schedule, launched and replayed from CUDA graphs, on both streams: the FFN's GELU
// GEMMs with and without gelu_checkpoint, and every gemm_sm90 epilogue of DSKC_LINEAR_GEMM=sm90 +
// DSKC_DGRAD_GEMM=sm90 (bias, plain, the weights read N-major), Post-LN, bf16, a partial row tile.
TEST_CASE("gemm_sm90's dynamic tile schedule gives bitwise the results of the static one") {
  dskc_test::require_gpu();
  if (detect_gpu_arch(0).value_or("") != "sm_90") {
    std::printf("SKIPPED: gemm_sm90 runs on sm_90 GPUs only\n");
    return;
  }
  Context ctx;
  struct Case {
    const char* name;
    DType t;
    bool pre, flags, linear_dgrad;
    int B, S;
  } cases[] = {{"fp16 Pre-LN", DType::F16, true, false, false, 8, 128},
               {"fp16 Pre-LN all flags", DType::F16, true, true, false, 8, 128},
               {"bf16 Post-LN, 3 x 77 rows", DType::BF16, false, false, false, 3, 77},
               {"fp16 Pre-LN, linear + data-gradient GEMMs gemm_sm90", DType::F16, true, false, true, 8, 128},
               {"bf16 Post-LN all flags, linear + data-gradient GEMMs gemm_sm90", DType::BF16, false, true, true, 4, 128}};
  for (const auto& k : cases)
    for (int graphs : {0, 1}) {
      INFO(k.name << (graphs ? ", replayed" : ", launched"));
      LayerConfig c = large_cfg(k.t, k.pre, k.B, k.S);
      c.attn_dropout_checkpoint = c.normalize_invertible = c.gelu_checkpoint = k.flags;
      const dskc_test::ScopedEnv linear("DSKC_LINEAR_GEMM", k.linear_dgrad ? "sm90" : nullptr);
      const dskc_test::ScopedEnv dgrad("DSKC_DGRAD_GEMM", k.linear_dgrad ? "sm90" : nullptr);
      std::vector<Run> fixed, dynamic;
      {
        const dskc_test::ScopedEnv tiles("DSKC_GEMM_TILES", "static");
        fixed = run_stack(ctx, c, 3, k.B, k.S, 1, graphs);
      }
      {
        const dskc_test::ScopedEnv tiles("DSKC_GEMM_TILES", "dynamic");
        TransformerLayer probe(ctx, c);
        REQUIRE(probe.plan().gemm_dynamic_tiles);
        REQUIRE(probe.plan().ffn_gemm_sm90);
        REQUIRE(probe.plan().linear_gemm_sm90 == k.linear_dgrad);
        dynamic = run_stack(ctx, c, 3, k.B, k.S, 1, graphs);
      }
      CHECK(dynamic[0].dx == fixed[0].dx);
      for (size_t l = 0; l < fixed.size(); ++l)
        for (auto& [name, v] : fixed[l].grads) CHECK_MESSAGE(dynamic[l].grads[name] == v, "layer " << l << " " << name);
    }
}

// dskc bench --timeline's profiler: with a timeline it keeps the side stream (the weight gradients
// land there, after the data gradient that makes their operand), every step ends after it starts,
// the main stream's steps follow each other in launch order, and attaching it changes no result.
TEST_CASE("timeline profiler: both streams, main-stream steps in order, same results") {
  dskc_test::require_gpu();
  Context ctx;
  const int B = 8, S = 128;
  const LayerConfig c = large_cfg(DType::F16, true, B, S);
  LayerIo io(ctx, c, B, S);
  auto& [layer, n, eb, x, y, dy, dx] = io;
  layer.forward(x.ptr(), 0, y.ptr(), B, S, 5);
  layer.backward(dy.ptr(), dx.ptr());
  const std::vector<float> want_dx = download(ctx, dx.ptr(), n, c.dtype());
  const auto want_grads = layer.get_grads();

  Profiler prof(true);
  layer.set_profiler(&prof);
  for (int i = 0; i < 3; ++i) {
    prof.mark_origin(ctx.stream());
    layer.forward(x.ptr(), 0, y.ptr(), B, S, 5);
    layer.backward(dy.ptr(), dx.ptr());
    prof.collect();
  }
  layer.set_profiler(nullptr);
  CHECK(download(ctx, dx.ptr(), n, c.dtype()) == want_dx);
  for (const auto& [name, v] : layer.get_grads()) CHECK_MESSAGE(v == want_grads.at(name), name);

  const auto steps = prof.timeline();
  REQUIRE(steps.size() > 10);
  int side = 0;
  double last_main_end = 0;
  bool saw_inter_wgrad_on_side = false;
  for (const auto& s : steps) {
    INFO(s.name);
    CHECK(s.start >= 0);
    CHECK(s.end >= s.start);
    if (s.side) {
      ++side;
      if (s.name == "gemm_inter_wgrad") saw_inter_wgrad_on_side = true;
    } else {
      CHECK(s.start >= last_main_end - 1e-3);
      last_main_end = s.end;
    }
  }
  CHECK(side >= 4);
  CHECK(saw_inter_wgrad_on_side);
  CHECK(steps.front().name == "layernorm_fwd_norm");
  CHECK_FALSE(steps.front().side);
  // The side stream's weight gradients run next to the main stream's steps, not after them.
  CHECK(stream_busy(steps).both > 0.01);
  // dskc bench --trace: every step as a complete event on its stream's thread.
  const auto trace = nlohmann::json::parse(chrome_trace_json(steps, "test"));
  size_t events = 0, on_side_thread = 0;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X") {
      ++events;
      if (e.at("tid") == 1) ++on_side_thread;
    }
  CHECK(events == steps.size());
  CHECK(on_side_thread == static_cast<size_t>(side));
}

// dskc bench --graph: the forward and the backward of one step, captured into CUDA graphs after a
// plain call, replay bitwise what plain calls of that step compute: every kernel, GEMM and memset is
// on the captured streams (the side stream forked and joined inside the capture), nothing is left
// for the replay to allocate, and a capture runs nothing. A capture of work that cannot be captured
// fails with an error that names it, and leaves the stream usable.
TEST_CASE("forward and backward replayed from CUDA graphs: bitwise the plain calls' results") {
  dskc_test::require_gpu();
  Context ctx;
  const int B = 8, S = 128;
  for_each_graph_case([&](const LayerConfig& c) {
    LayerIo io(ctx, c, B, S);
    auto& [layer, n, eb, x, y, dy, dx] = io;
    auto step = [&](uint32_t k) {
      layer.forward(x.ptr(), 0, y.ptr(), B, S, k);
      layer.backward(dy.ptr(), dx.ptr());
    };
    step(5);
    const std::vector<float> want_y = download(ctx, y.ptr(), n, c.dtype());
    const std::vector<float> want_dx = download(ctx, dx.ptr(), n, c.dtype());
    const auto want_grads = layer.get_grads();

    DSKC_CU(cuMemsetD8Async(y.ptr(), 0xFF, n * eb, ctx.stream()));  // NaN in fp16
    DSKC_CU(cuMemsetD8Async(dx.ptr(), 0xFF, n * eb, ctx.stream()));
    CapturedGraph fwd(ctx.stream(), "forward", [&] { layer.forward(x.ptr(), 0, y.ptr(), B, S, 5); });
    CapturedGraph bwd(ctx.stream(), "backward", [&] { layer.backward(dy.ptr(), dx.ptr()); });
    CHECK(fwd.nodes() >= 5);
    CHECK(bwd.nodes() > fwd.nodes());
    // Capturing ran nothing: the outputs still hold the poison.
    for (float v : download(ctx, y.ptr(), n, c.dtype())) REQUIRE(std::isnan(v));
    for (float v : download(ctx, dx.ptr(), n, c.dtype())) REQUIRE(std::isnan(v));

    // Another step by plain calls changes every output (other dropout masks); the replays bring back
    // step 5's, twice.
    step(6);
    CHECK(download(ctx, y.ptr(), n, c.dtype()) != want_y);
    CHECK(download(ctx, dx.ptr(), n, c.dtype()) != want_dx);
    CHECK(layer.get_grads().at("inter_w") != want_grads.at("inter_w"));
    for (int rep = 0; rep < 2; ++rep) {
      INFO("replay " << rep);
      fwd.launch(ctx.stream());
      bwd.launch(ctx.stream());
      CHECK(download(ctx, y.ptr(), n, c.dtype()) == want_y);
      CHECK(download(ctx, dx.ptr(), n, c.dtype()) == want_dx);
      for (const auto& [name, v] : layer.get_grads()) CHECK_MESSAGE(v == want_grads.at(name), name);
    }
    // Plain calls still work after the replays (the layer's events were re-recorded outside capture).
    step(5);
    CHECK(download(ctx, dx.ptr(), n, c.dtype()) == want_dx);
  });

  // A synchronizing call cannot be captured: the error names what was captured and why, the stream
  // leaves capture mode, and the layer runs on it as before.
  LayerIo io(ctx, graph_case_cfg(false), B, S);
  auto& [layer, n, eb, x, y, dy, dx] = io;
  const LayerConfig& c = layer.config();
  layer.forward(x.ptr(), 0, y.ptr(), B, S, 5);
  const std::vector<float> want_y = download(ctx, y.ptr(), n, c.dtype());
  const std::string msg = dskc_test::error_of(
      [&] {
        CapturedGraph g(ctx.stream(), "a forward and a wait", [&] {
          layer.forward(x.ptr(), 0, y.ptr(), B, S, 5);
          ctx.synchronize();
        });
      },
      ErrorKind::Device);
  CHECK_MESSAGE(msg.find("cannot capture a forward and a wait into a CUDA graph") != std::string::npos, msg);
  CHECK_MESSAGE(msg.find("cuStreamSynchronize") != std::string::npos, msg);
  DSKC_CU(cuMemsetD8Async(y.ptr(), 0xFF, n * eb, ctx.stream()));
  layer.forward(x.ptr(), 0, y.ptr(), B, S, 5);
  CHECK(download(ctx, y.ptr(), n, c.dtype()) == want_y);
}

// LayerOptions::cuda_graphs (dskc train --cuda_graphs): every forward and backward after the first at
// its shape is captured into a CUDA graph with that call's arguments and launched as one (the
// executable graph updated in place while the shapes stay). Step by step, each step with its own
// dropout masks, across a smaller batch, a shorter sequence and back, with and without the memory
// flags: bitwise the results of a layer that launches its kernels one by one.
TEST_CASE("layer calls launched as CUDA graphs: bitwise the plain calls, every step") {
  dskc_test::require_gpu();
  Context ctx;
  const int B = 8, S = 128;
  for_each_graph_case([&](const LayerConfig& c) {
    LayerOptions plain_opt, graph_opt;
    plain_opt.cuda_graphs = 0;
    graph_opt.cuda_graphs = 1;
    LayerIo plain(ctx, c, B, S, plain_opt), graphed(ctx, c, B, S, graph_opt);
    struct Call {
      int b, s;
      uint32_t step;
    } calls[] = {{8, 128, 1}, {8, 128, 2}, {8, 128, 3}, {6, 128, 4}, {6, 128, 5},
                 {8, 128, 6}, {8, 100, 7}, {8, 100, 8}, {8, 128, 9}};
    std::vector<float> last_y;
    for (const Call& k : calls) {
      INFO("batch " << k.b << " seq " << k.s << " step " << k.step);
      const size_t m = static_cast<size_t>(k.b) * k.s * c.hidden_size;
      auto run = [&](LayerIo& io) {
        auto& [l, n, eb, x, y, dy, dx] = io;
        DSKC_CU(cuMemsetD8Async(y.ptr(), 0xFF, n * eb, ctx.stream()));
        DSKC_CU(cuMemsetD8Async(dx.ptr(), 0xFF, n * eb, ctx.stream()));
        l.forward(x.ptr(), 0, y.ptr(), k.b, k.s, k.step);
        l.backward(dy.ptr(), dx.ptr());
        Run r;
        r.out = download(ctx, y.ptr(), m, c.dtype());
        r.dx = download(ctx, dx.ptr(), m, c.dtype());
        r.grads = l.get_grads();
        return r;
      };
      const Run want = run(plain), got = run(graphed);
      CHECK(got.out == want.out);
      CHECK(got.dx == want.dx);
      for (const auto& [name, v] : want.grads) CHECK_MESSAGE(got.grads.at(name) == v, name);
      CHECK(want.out != last_y);  // every step its own masks
      last_y = want.out;
    }
    // The first call at each of the three shapes ran without a graph; the other six forward and
    // backward calls were graphs, and the repeated shapes updated the previous graph in place.
    CHECK(graphed.layer.graph_launches() == 12);
    CHECK(graphed.layer.graph_updates() >= 2);
    CHECK(plain.layer.graph_launches() == 0);
  });
}

// dskc bench --versus: one process times layer A and layer B (A with the spec's changes) in
// alternating blocks. B is built under the spec's DSKC_* variables and A is not: with
// DSKC_SM90_WEIGHT=transpose on sm_90 only B has the output_wᵀ transpose; a variable the runtime
// alone reads leaves B's generated source A's; the switches change B's config (all three memory
// flags: less activation memory); a bad value fails when B is built, naming the variable.
TEST_CASE("dskc bench --versus: B built under the spec, A not; both timed in pairs") {
  dskc_test::require_gpu();
  const bool sm90 = detect_gpu_arch(0).value_or("") == "sm_90";
  const std::string bench = "bench " + dskc_test::source_dir() + "/examples/bert_large_layer.json --batch 4 "
                            "--warmup 2 --pairs 4 --block 2 ";
  auto has = [](const dskc_test::RunResult& r, const std::string& s) { return r.output.find(s) != std::string::npos; };
  {
    const auto r = dskc_test::run_dskc(bench + "--versus DSKC_SM90_WEIGHT=transpose");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(has(r, "kernels only in A: none"));
    if (sm90) {
      CHECK(has(r, "kernels only in B: transpose_output_w\n"));
      CHECK(has(r, "generated source: B's differs from A's"));
    }
    CHECK(has(r, "timed: 4 pairs of 2-step blocks (forward + backward), launched by the host"));
    CHECK(has(r, "| A | "));
    CHECK(has(r, "B vs A: "));
    CHECK(has(r, "of 4 pairs"));
  }
  {
    const auto r = dskc_test::run_dskc(bench + "--graph --versus DSKC_LAYER_STREAMS=1");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(has(r, "kernels only in B: none"));
    CHECK(has(r, "generated source: B's is A's"));
    CHECK(has(r, "replayed from CUDA graphs"));
  }
  {
    const auto r = dskc_test::run_dskc(bench + "--csv --versus all_memory_flags");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    // The CSV line (a cold module build may print progress to stderr first).
    const size_t at = r.output.find("4,128,1024,");
    REQUIRE(at != std::string::npos);
    std::vector<std::string> f;
    std::stringstream line(r.output.substr(at, r.output.find('\n', at) - at));
    for (std::string x; std::getline(line, x, ',');) f.push_back(x);
    REQUIRE(f.size() == 16);
    CHECK(f[0] == "4");
    CHECK(f[1] == "128");
    CHECK(std::stod(f[5]) > 0);                   // A ms per step
    CHECK(std::stod(f[6]) > 0);                   // B ms per step
    CHECK(f[10] == "4");                          // pairs
    CHECK(std::stoi(f[11]) <= 4);                 // pairs B won
    CHECK(std::stod(f[13]) < std::stod(f[12]));   // activation MiB: B keeps less
    CHECK(std::stod(f[8]) <= std::stod(f[7]));    // the interval holds the median
    CHECK(std::stod(f[7]) <= std::stod(f[9]));
  }
  {
    const auto r = dskc_test::run_dskc(bench + "--versus DSKC_SM90_WEIGHT=sideways");
    INFO(r.output);
    CHECK(r.exit_code == 3);
    CHECK(has(r, "DSKC_SM90_WEIGHT=sideways"));
  }
}
