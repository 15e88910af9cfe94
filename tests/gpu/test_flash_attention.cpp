// Fused attention (attn_flash_*) against the unfused path (batched GEMMs + softmax kernels) and the
// double-precision CPU reference, on the same layer, parameters and inputs: the attention context
// (O), the logsumexp, and the gradient of qkv split into dQ / dK / dV, then the layer's output and
// every gradient. Built for debugging on a GPU run: on any failure (and always for the first case)
// it prints per-tensor max abs / normwise relative errors and the first mismatching element as
// (b, head, row, col), so one run tells where the kernels go wrong. With attention dropout the
// backward reads the keep mask as bits (checked against the Philox rule): saved by the forward, or
// with attn_dropout_checkpoint (Case::adc) rewritten in backward by attn_dropout_bits_bwd; with
// DSKC_ATTN_MASK=kernel (Case::mask_kernel) attn_dropout_bits_fwd writes them before attn_flash_fwd,
// which reads them. All four variants must give bitwise identical results.
// stochastic_mode with DSKC_ATTN_DQ=atomic (Case::stochastic) runs the single-pass backward
// attn_flash_bwd_dkdvdq (dQ by fp32 atomics): the same checks against the unfused path and the
// reference, and against the default mode's backward on the same GEMM results (forward, dK, dV
// bitwise; dQ to rounding). stochastic_mode's own default (the dQ GEMM) with GEMM autotuning off is
// the default mode bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <string>

#include "gpu_util.h"
#include "test_util.h"
#include "runtime/context.h"
#include "runtime/cpu_reference.h"
#include "runtime/host_float.h"
#include "runtime/host_tensor.h"
#include "runtime/layer_params.h"
#include "runtime/transformer_layer.h"
#include "templates/common/philox.cuh"

using namespace dskc;

namespace {

struct Case {
  const char* name;
  int batch, max_seq, seq, hidden, heads;
  DType dtype;
  bool pre_ln;
  double attn_p;
  bool mask;
  bool adc = false;  // attn_dropout_checkpoint: attn_dropout_bits_bwd rewrites the keep bits in backward
  bool mask_kernel = false;  // DSKC_ATTN_MASK=kernel: attn_dropout_bits_fwd writes them, attn_flash_fwd reads them
  bool stochastic = false;   // stochastic_mode + DSKC_ATTN_DQ=atomic (or dq_src): attn_flash_bwd_dkdvdq, no dQ GEMM
  const char* dq_src = nullptr;  // DSKC_ATTN_DQ (with stochastic: "reduce" or nullptr = "atomic"); nullptr: unset, the default "fused"
                                 // (dQ inside the wgmma dK/dV kernel at max_seq <= 128 on Hopper, else the GEMM)
};

LayerConfig config_of(const Case& k) {
  LayerConfig c;
  c.batch_size = k.batch;
  c.max_seq_length = k.max_seq;
  c.hidden_size = k.hidden;
  c.heads = k.heads;
  c.intermediate_size = 2 * k.hidden;
  c.attn_dropout_ratio = k.attn_p;
  c.hidden_dropout_ratio = 0.1;
  c.num_hidden_layers = 2;
  c.initializer_range = 0.02;
  c.seed = 4321;
  c.fp16 = k.dtype == DType::F16;
  c.bf16 = k.dtype == DType::BF16;
  c.pre_layer_norm = k.pre_ln;
  c.attn_dropout_checkpoint = k.adc;
  c.stochastic_mode = k.stochastic;
  return c;
}

// DSKC_FLASH_CASE=NAME runs only the cases of that name (debugging one case on the GPU machine).
bool selected(const char* name) {
  const char* only = std::getenv("DSKC_FLASH_CASE");
  return !only || !*only || std::strcmp(only, name) == 0;
}

// One line per case as it starts and as it ends (flushed: a CTest timeout shows where the time went).
struct Progress {
  std::string what;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  explicit Progress(std::string w) : what(std::move(w)) {
    std::printf("-- %s ...\n", what.c_str());
    std::fflush(stdout);
  }
  ~Progress() {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("-- %s: %.1f s\n", what.c_str(), s);
    std::fflush(stdout);
  }
};

struct Result {
  std::vector<float> out, dx, ctx, dqkv, lse;
  std::vector<uint32_t> bits;  // attn_dropout_bits as the backward read them (saved or workspace)
  std::map<std::string, std::vector<float>> grads;
  bool fused = false, saves_bits = false, dq_atomic = false, dq_gemm = false, dq_fused = false;
  bool dq_reduce = false;  // stochastic_mode's TMA-reduced dQ shares (plan attn_dq_reduce)
  bool dq_ring = false;    // the fused dQ summed around a ring of cluster blocks (plan attn_dq_ring)
  bool dot_in_dkdv = false;  // D = rowsum(dO ⊙ O) inside the wgmma dK/dV kernel (no attn_flash_bwd_dot)
  int fwd_stages = 0;  // the plan's attn_fwd_stages
  bool fwd_wgmma = false;  // the plan's attn_fwd_wgmma (attn_flash_fwd on warpgroup MMA)
  int fwd_wg_stages = 0;   // its K/V stages
  bool bwd_wgmma = false;  // the plan's attn_bwd_wgmma (attn_flash_bwd_dkdv on warpgroup MMA)
  int bwd_wgs = 0;         // its math warpgroups per block
  int bwd_cluster = 0;     // its blocks per cluster
  bool tma_stores = false;  // the plan's attn_tma_stores (the wgmma kernels' outputs by TMA)
  bool bwd_persist = false;  // the plan's attn_bwd_persist (the persistent clustered dK/dV kernel)
  bool dq_wgmma = false;     // the plan's attn_dq_wgmma (the dQ GEMM by attn_dq_wgmma, not cuBLAS)
};

// mask_src: DSKC_ATTN_MASK for the layer's plan ("inline" or "kernel"); gemm_autotune: stochastic_mode's
// GEMM autotuning (off to compare the two modes' attention backward on identical GEMM results);
// dq_src: DSKC_ATTN_DQ (nullptr: unset, the default "fused"; "gemm": the dQ GEMM; "kernel": attn_flash_bwd_dq; "atomic":
// stochastic_mode's attn_flash_bwd_dkdvdq); poison: the context and grad_qkv are filled with 0xFF bytes (NaN)
// before the kernels that write them, so an element left unwritten shows.
Result run(Context& ctx, const LayerConfig& c, AttentionPath path, const std::map<std::string, std::vector<float>>& params,
           const std::vector<float>& x, const std::vector<float>& mask, const std::vector<float>& dy, int B, int S,
           const char* mask_src = "inline", bool gemm_autotune = true, const char* dq_src = nullptr,
           bool poison = false) {
  LayerOptions opt;
  opt.attention = path;
  opt.layer_id = 2;
  opt.gemm_autotune = gemm_autotune;
  const dskc_test::ScopedEnv env("DSKC_ATTN_MASK", mask_src), env_dq("DSKC_ATTN_DQ", dq_src);
  TransformerLayer layer(ctx, c, opt);
  layer.set_params(params);
  const DType t = c.dtype();
  const size_t n = x.size(), eb = dtype_bytes(t), H = c.hidden_size;
  const size_t rows = static_cast<size_t>(B) * S;
  DeviceBuffer xb(ctx, n * eb), yb(ctx, n * eb), mb(ctx, mask.size() * eb), dyb(ctx, n * eb), dxb(ctx, n * eb);
  upload(ctx, xb.ptr(), x, t);
  upload(ctx, mb.ptr(), mask, t);
  upload(ctx, dyb.ptr(), dy, t);
  if (poison) DSKC_CU(cuMemsetD8Async(layer.tensor("attn_context"), 0xFF, rows * H * eb, ctx.stream()));
  layer.forward(xb.ptr(), mb.ptr(), yb.ptr(), B, S, 11);
  Result r;
  r.fused = layer.plan().fused_attention;
  r.out = download(ctx, yb.ptr(), n, t);
  r.ctx = download(ctx, layer.tensor("attn_context"), rows * H, t);
  if (r.fused) r.lse = download(ctx, layer.tensor("attn_lse"), rows * c.heads, DType::F32);
  r.saves_bits = layer.plan().attn_keep_bits_saved;
  r.dq_atomic = layer.plan().attn_dq_atomic;
  r.dq_gemm = layer.plan().attn_dq_gemm;
  r.dq_fused = layer.plan().attn_dq_fused;
  r.dq_reduce = layer.plan().attn_dq_reduce;
  r.dq_ring = layer.plan().attn_dq_ring;
  r.dot_in_dkdv = layer.plan().attn_dot_in_dkdv;
  r.fwd_stages = layer.plan().attn_fwd_stages;
  r.fwd_wgmma = layer.plan().attn_fwd_wgmma;
  r.fwd_wg_stages = layer.plan().attn_fwd_wg_stages;
  r.bwd_wgmma = layer.plan().attn_bwd_wgmma;
  r.bwd_wgs = layer.plan().attn_bwd_wgs;
  r.bwd_cluster = layer.plan().attn_bwd_cluster;
  r.tma_stores = layer.plan().attn_tma_stores;
  r.bwd_persist = layer.plan().attn_bwd_persist;
  r.dq_wgmma = layer.plan().attn_dq_wgmma;
  if (poison) DSKC_CU(cuMemsetD8Async(layer.tensor("grad_qkv"), 0xFF, rows * 3 * H * eb, ctx.stream()));
  layer.backward(dyb.ptr(), dxb.ptr());
  if (layer.plan().attn_keep_bits) {  // after backward: the workspace copy is written there
    const size_t words = rows * c.heads * ((S + 31) / 32);
    const std::vector<float> raw = download(ctx, layer.tensor("attn_dropout_bits"), words, DType::F32);  // 4-byte copies
    r.bits.resize(words);
    std::memcpy(r.bits.data(), raw.data(), words * 4);
  }
  r.dx = download(ctx, dxb.ptr(), n, t);
  r.dqkv = download(ctx, layer.tensor("grad_qkv"), rows * 3 * H, t);
  r.grads = layer.get_grads();
  return r;
}

// Errors of a [rows, width] token-major tensor restricted to columns [c0, c0 + H) (one of Q/K/V,
// or the whole context), with the first element off by more than atol + rtol·|ref| named as
// (b, head, row, col).
struct Diff {
  double max_abs = 0, rel = 0;
  bool mismatch = false;
  int b = -1, head = -1, row = -1, col = -1;
  double got = 0, want = 0;
};

template <typename Ref>
Diff diff(const std::vector<float>& a, const std::vector<Ref>& ref, int B, int S, int width, int c0, int H, int d,
          double atol, double rtol, double norm_floor = 0) {
  Diff r;
  double num = 0, den = 0;
  for (int b = 0; b < B; ++b)
    for (int s = 0; s < S; ++s)
      for (int c = 0; c < H; ++c) {
        const size_t i = (static_cast<size_t>(b) * S + s) * width + c0 + c;
        const double g = a[i], w = static_cast<double>(ref[i]), e = std::fabs(g - w);
        if (!std::isfinite(g)) {
          num = std::numeric_limits<double>::infinity();
        } else {
          num += e * e;
        }
        den += w * w;
        r.max_abs = std::max(r.max_abs, std::isfinite(g) ? e : std::numeric_limits<double>::infinity());
        if (!r.mismatch && (!std::isfinite(g) || e > atol + rtol * std::fabs(w))) {
          r.mismatch = true;
          r.b = b;
          r.head = c / d;
          r.row = s;
          r.col = c % d;
          r.got = g;
          r.want = w;
        }
      }
  r.rel = std::sqrt(num / std::max({den, norm_floor * norm_floor, 1e-300}));
  return r;
}

void print(const char* what, const Diff& e) {
  if (e.mismatch)
    std::printf("  %-26s max abs %.3e  rel %.3e  first mismatch (b %d, head %d, row %d, col %d): %.6g vs %.6g\n", what,
                e.max_abs, e.rel, e.b, e.head, e.row, e.col, e.got, e.want);
  else
    std::printf("  %-26s max abs %.3e  rel %.3e  (no element beyond tolerance)\n", what, e.max_abs, e.rel);
}

// The layer input x and output gradient dy (normal, seeds seed_x / seed_dy) and, with Case::mask,
// an additive padding mask (-10000 over the last (3b + 1) % S positions of batch b, never the whole
// row), all rounded to the dtype.
struct Inputs {
  std::vector<float> x, dy, mask;
};
Inputs inputs_of(const Case& k, int H, DType t, uint64_t seed_x, uint64_t seed_dy) {
  const int B = k.batch, S = k.seq;
  Inputs in{dskc_test::randn(static_cast<size_t>(B) * S * H, seed_x),
            dskc_test::randn(static_cast<size_t>(B) * S * H, seed_dy), std::vector<float>(static_cast<size_t>(B) * S, 0.f)};
  if (k.mask)
    for (int b = 0; b < B; ++b)
      for (int s = S - 1 - (3 * b + 1) % std::max(S, 1); s < S; ++s)
        if (s > 0) in.mask[static_cast<size_t>(b) * S + s] = -10000.f;
  for (auto* v : {&in.x, &in.dy, &in.mask})
    for (auto& e : *v) e = static_cast<float>(round_to_dtype(e, t));
  return in;
}

// The layer's initial parameters (seed), with attn_qkvw redrawn at 1.5/√H (qkvw_seed != 0: scores
// large enough to exercise the softmax), every value rounded to the dtype.
std::map<std::string, std::vector<float>> rounded_params(const LayerConfig& c, uint64_t seed, uint64_t qkvw_seed = 0) {
  auto params = init_layer_params(c, seed);
  if (qkvw_seed)
    params["attn_qkvw"] =
        dskc_test::randn(params["attn_qkvw"].size(), qkvw_seed, 1.5f / std::sqrt(static_cast<float>(c.hidden_size)));
  for (auto& [name, v] : params)
    for (auto& e : v) e = static_cast<float>(round_to_dtype(e, c.dtype()));
  return params;
}

void check_case(const Case& k, bool verbose) {
  if (!selected(k.name)) return;
  const LayerConfig c = config_of(k);
  const DType t = c.dtype();
  const int B = k.batch, S = k.seq, H = c.hidden_size, d = c.head_dim(), NH = c.heads;
  INFO("case " << k.name << ": B=" << B << " S=" << S << " H=" << H << " heads=" << NH << " d=" << d << " "
               << dtype_name(t) << " attn_p=" << k.attn_p << (k.mask ? " masked" : ""));
  const Progress progress(k.name);
  Context ctx;
  auto params = rounded_params(c, 5, 77);
  params["attn_qkvb"] = dskc_test::randn(params["attn_qkvb"].size(), 78, 0.1f);
  for (auto& e : params["attn_qkvb"]) e = static_cast<float>(round_to_dtype(e, t));
  auto [x, dy, mask] = inputs_of(k, H, t, 1, 2);

  const Result f = run(ctx, c, AttentionPath::FusedWhereSupported, params, x, mask, dy, B, S,
                       k.mask_kernel ? "kernel" : "inline", true,
                       k.stochastic && !k.dq_src ? "atomic" : k.dq_src);
  const Result u = run(ctx, c, AttentionPath::Unfused, params, x, mask, dy, B, S);
  REQUIRE(f.fused);
  REQUIRE_FALSE(u.fused);
  // stochastic_mode with DSKC_ATTN_DQ=reduce: the TMA-reduced dQ where the wgmma kernel runs.
  const bool sto_reduce = k.stochastic && k.dq_src && std::strcmp(k.dq_src, "reduce") == 0;
  CHECK(f.dq_atomic == (k.stochastic && !sto_reduce));
  CHECK(f.dq_reduce == (sto_reduce && f.bwd_wgmma));
  // The default (DSKC_ATTN_DQ=fused): dQ in the wgmma kernel where it applies, elsewhere (and with
  // DSKC_ATTN_DQ=gemm) from dSᵀ by a batched GEMM.
  // DSKC_ATTN_DQ=ring: the same up to 128 keys, and from 129 to 512 the ring of one-warpgroup blocks.
  const bool fused_dq_src = !k.dq_src || std::strcmp(k.dq_src, "fused") == 0;
  const bool ring_src = k.dq_src && std::strcmp(k.dq_src, "ring") == 0;
  const bool ring = ring_src && f.bwd_wgmma && f.bwd_wgs == 1 && k.max_seq > 128 && k.max_seq <= 512;
  CHECK(f.dq_fused == ((!k.stochastic && (fused_dq_src || ring_src) && f.bwd_wgmma && k.max_seq <= 128) || ring));
  CHECK(f.dq_ring == ring);
  CHECK(f.dq_gemm == !(f.dq_atomic || f.dq_fused || f.dq_reduce));
  CHECK(f.dot_in_dkdv == (f.dq_fused && f.bwd_wgs == 1 && !ring));
  CHECK_FALSE(u.dq_atomic);
  CHECK(f.saves_bits == (k.attn_p > 0 && !k.adc));
  CHECK(f.bits.empty() == (k.attn_p == 0));
  CHECK_FALSE(u.saves_bits);

  // The keep bits are the Philox mask of (layer 2, step 11), zero past S.
  if (!f.bits.empty()) {
    const dskc_rng::DropoutKey key{c.seed, 2, 11};
    const uint32_t thr = dskc_rng::dropout_threshold(c.attn_dropout_ratio);
    const int W = (S + 31) / 32;
    size_t bad = 0;
    for (uint64_t row = 0; row < static_cast<uint64_t>(B) * NH * S; ++row)
      for (int j = 0; j < 32 * W; ++j) {
        const bool want = j < S && dskc_rng::dropout_keep(key, dskc_rng::kStreamAttnProbs, row * S + j, thr);
        const bool bit = (f.bits[row * W + j / 32] >> (j % 32)) & 1u;
        if (bit != want && bad++ < 5)
          std::printf("  keep bit mismatch at (b·heads + h) %llu, row %llu, key %d: %d vs Philox %d\n",
                      static_cast<unsigned long long>(row / S), static_cast<unsigned long long>(row % S), j, int(bit),
                      int(want));
      }
    CHECK_MESSAGE(bad == 0, bad << " keep bits disagree with the Philox mask");
  }

  // CPU reference (double) and a plain same-precision CPU implementation (every stored tensor rounded).
  CpuReferenceLayer exact(c, 2, DType::F32), plain(c, 2, t);
  CpuReferenceLayer::Tensors dp;
  for (auto& [name, v] : params) dp[name] = std::vector<double>(v.begin(), v.end());
  std::vector<double> xd(x.begin(), x.end()), md(mask.begin(), mask.end()), dyd(dy.begin(), dy.end());
  auto out_exact = exact.forward(xd, &md, B, S, 11, dp);
  plain.forward(xd, &md, B, S, 11, dp);
  auto g_exact = exact.backward(dyd);
  auto g_plain = plain.backward(dyd);
  const std::vector<double>& ctx_exact = exact.activation("context");
  const std::vector<double>& ctx_plain = plain.activation("context");

  // Fused vs reference vs unfused, attention tensors first.
  const double atol = t == DType::BF16 ? 2e-2 : 4e-3, rtol = t == DType::BF16 ? 4e-2 : 1e-2;
  const Diff ctx_f = diff(f.ctx, ctx_exact, B, S, H, 0, H, d, atol, rtol);
  const Diff ctx_u = diff(u.ctx, ctx_exact, B, S, H, 0, H, d, atol, rtol);
  const Diff ctx_p = diff(std::vector<float>(ctx_plain.begin(), ctx_plain.end()), ctx_exact, B, S, H, 0, H, d, atol, rtol);
  const Diff ctx_fu = diff(f.ctx, u.ctx, B, S, H, 0, H, d, atol, rtol);
  const char* part[3] = {"dQ", "dK", "dV"};
  // dQ / dK / dV errors are relative to the norm of the whole qkv gradient: at seq 1 the exact dQ
  // and dK are 0 (softmax over one key), and the fused path's D = rowsum(dO ⊙ O) from the stored O
  // leaves rounding-sized values there.
  double dqkv_norm = 0;
  for (float v : u.dqkv) dqkv_norm += static_cast<double>(v) * v;
  dqkv_norm = std::sqrt(dqkv_norm);
  Diff dq_fu[3];
  for (int p = 0; p < 3; ++p)
    dq_fu[p] = diff(f.dqkv, u.dqkv, B, S, 3 * H, p * H, H, d, 3 * atol, 3 * rtol, dqkv_norm);

  // Logsumexp against the reference: L_i = log Σ_j exp(s_ij) from the exact scores (+ mask).
  double lse_err = 0;
  int lse_at[3] = {-1, -1, -1};
  if (!f.lse.empty()) {
    const auto& scores = exact.activation("scores");  // [B, heads, S, S], already scaled by 1/√d
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h)
        for (int i = 0; i < S; ++i) {
          const size_t row = ((static_cast<size_t>(b) * NH + h) * S + i) * S;
          double mx = -1e300;
          for (int j = 0; j < S; ++j) mx = std::max(mx, scores[row + j] + md[static_cast<size_t>(b) * S + j]);
          double sum = 0;
          for (int j = 0; j < S; ++j) sum += std::exp(scores[row + j] + md[static_cast<size_t>(b) * S + j] - mx);
          const double want = mx + std::log(sum);
          const double got = f.lse[(static_cast<size_t>(b) * NH + h) * S + i];
          const double e = std::isfinite(got) ? std::fabs(got - want) : 1e300;
          if (e > lse_err) {
            lse_err = e;
            lse_at[0] = b, lse_at[1] = h, lse_at[2] = i;
          }
        }
  }

  // Whole-layer checks against the reference (the numerics test's rule: <= 2x the plain error).
  bool layer_ok = true;
  std::vector<std::string> lines;
  auto check = [&](const std::string& what, const std::vector<float>& gpu, const std::vector<double>& ex,
                   const std::vector<double>& pl) {
    auto eg = dskc_test::compare(gpu, ex);
    auto ep = dskc_test::compare(pl, ex);
    const double limit = 2.0 * ep.rel + 1e-6;
    lines.push_back(dskc_test::describe(what, eg, ep));
    const bool ok = eg.rel <= limit;
    layer_ok = layer_ok && ok;
    CHECK_MESSAGE(ok, what << ": fused-layer error " << eg.rel << " above limit " << limit);
  };
  check("output", f.out, out_exact, plain.activation("output"));
  check("grad_input", f.dx, g_exact.at("grad_input"), g_plain.at("grad_input"));
  for (const auto& [pname, v] : f.grads) check("grad_" + pname, v, g_exact.at("grad_" + pname), g_plain.at("grad_" + pname));

  // Fused attention must be about as accurate as the unfused path (both against the reference).
  const bool ctx_ok = ctx_f.rel <= 2.0 * std::max(ctx_u.rel, ctx_p.rel) + 1e-6;
  // Loose: the GPU scores come from its own rounded qkv (|s| ~ 2-3 here), the reference from exact qkv.
  const bool lse_ok = f.lse.empty() || lse_err <= (t == DType::BF16 ? 1.5e-1 : 3e-2);
  CHECK_MESSAGE(ctx_ok, "context: fused rel " << ctx_f.rel << ", unfused " << ctx_u.rel << ", plain " << ctx_p.rel);
  CHECK_MESSAGE(lse_ok, "logsumexp max abs error " << lse_err);
  bool dqkv_ok = true;
  for (int p = 0; p < 3; ++p) {
    const bool ok = dq_fu[p].rel <= (t == DType::BF16 ? 6e-2 : 2e-2);
    dqkv_ok = dqkv_ok && ok;
    CHECK_MESSAGE(ok, part[p] << ": fused vs unfused normwise rel " << dq_fu[p].rel);
  }
  if (verbose || !layer_ok || !ctx_ok || !lse_ok || !dqkv_ok) {
    std::printf("== %s (B %d, S %d, H %d, heads %d, d %d, %s, attn_p %.2f%s%s)\n", k.name, B, S, H, NH, d,
                dtype_name(t), k.attn_p, k.mask ? ", masked" : "", k.stochastic ? ", stochastic_mode" : "");
    print("context fused vs ref", ctx_f);
    print("context unfused vs ref", ctx_u);
    print("context plain-CPU vs ref", ctx_p);
    print("context fused vs unfused", ctx_fu);
    for (int p = 0; p < 3; ++p) print((std::string(part[p]) + " fused vs unfused").c_str(), dq_fu[p]);
    if (!f.lse.empty())
      std::printf("  logsumexp max abs error %.3e at (b %d, head %d, row %d)\n", lse_err, lse_at[0], lse_at[1], lse_at[2]);
    for (const auto& l : lines) std::printf("  %s\n", l.c_str());
  }
}

}  // namespace

TEST_CASE("fused attention vs unfused vs CPU reference: BERT-Large head dim 64, seq 128 / 127") {
  dskc_test::require_gpu();
  check_case({"d64-s128", 2, 128, 128, 1024, 16, DType::F16, true, 0.1, true}, /*verbose=*/true);
  check_case({"d64-s127-nodrop", 2, 128, 127, 1024, 16, DType::F16, true, 0.0, false}, false);
}

TEST_CASE("fused attention: sequence lengths 1, 7, 33, 381, 509 (partial tiles)") {
  dskc_test::require_gpu();
  check_case({"d64-s1", 3, 16, 1, 256, 4, DType::F16, true, 0.1, false}, false);
  check_case({"d32-s7", 2, 8, 7, 128, 4, DType::BF16, false, 0.1, true}, false);
  check_case({"d64-s33", 2, 40, 33, 256, 4, DType::F16, true, 0.2, true}, false);
  check_case({"d64-s381", 1, 384, 381, 128, 2, DType::F16, true, 0.1, true}, false);
  check_case({"d32-s509", 1, 512, 509, 128, 4, DType::BF16, true, 0.1, true}, false);
}

// Two runs of one layer and inputs gave the same keep bits, outputs, attention tensors and gradients, bit for bit.
void check_bitwise_equal(const Result& a, const Result& r) {
  CHECK(a.bits == r.bits);
  CHECK(a.out == r.out);
  CHECK(a.ctx == r.ctx);
  CHECK(a.lse == r.lse);
  CHECK(a.dqkv == r.dqkv);
  CHECK(a.dx == r.dx);
  for (const auto& [name, v] : a.grads) CHECK_MESSAGE(r.grads.at(name) == v, name);
}

// The same layer and inputs with the keep bits from every source: saved by attn_flash_fwd (no flag,
// DSKC_ATTN_MASK=inline), rewritten in backward by attn_dropout_bits_bwd (attn_dropout_checkpoint),
// written by attn_dropout_bits_fwd and read by attn_flash_fwd (DSKC_ATTN_MASK=kernel) or written by the
// first LayerNorm's launch in Pre-LN (=ln), and each with attn_dropout_checkpoint.
// The mask is the same, so outputs, gradients and the bits are bitwise identical.
void check_keep_bit_sources(const Case& k) {
  if (!selected(k.name)) return;
  Case kr = k;
  kr.adc = true;
  const LayerConfig c = config_of(k), cr = config_of(kr);
  const DType t = c.dtype();
  const int B = k.batch, S = k.seq, H = c.hidden_size;
  INFO("case " << k.name << ": keep bits saved vs rewritten vs from attn_dropout_bits_fwd, B=" << B << " S=" << S
               << " " << dtype_name(t));
  const Progress progress(std::string(k.name) + " keep-bit sources");
  // The mma.sync forward under every source (the wgmma forward reads the bits only; check_wgmma_fwd_vs_sync).
  const dskc_test::ScopedEnv env_fwd("DSKC_ATTN_FWD", "sync");
  Context ctx;
  const auto params = rounded_params(c, 6);
  auto x = dskc_test::randn(static_cast<size_t>(B) * S * H, 3), dy = dskc_test::randn(x.size(), 4);
  std::vector<float> mask(static_cast<size_t>(B) * S, 0.f);
  for (auto* v : {&x, &dy})
    for (auto& e : *v) e = static_cast<float>(round_to_dtype(e, t));
  const Result a = run(ctx, c, AttentionPath::FusedWhereSupported, params, x, mask, dy, B, S, "inline");
  REQUIRE(a.fused);
  CHECK(a.saves_bits);
  REQUIRE_FALSE(a.bits.empty());
  for (bool adc : {false, true})
    for (const char* mask_src : {"inline", "kernel", "ln"}) {
      if (!adc && std::string(mask_src) == "inline") continue;  // a itself
      INFO((adc ? "attn_dropout_checkpoint" : "no flag") << ", DSKC_ATTN_MASK=" << mask_src << " vs no flag, inline");
      const Result r = run(ctx, adc ? cr : c, AttentionPath::FusedWhereSupported, params, x, mask, dy, B, S, mask_src);
      REQUIRE(r.fused);
      CHECK(r.saves_bits == !adc);
      check_bitwise_equal(a, r);
    }
}

TEST_CASE("fused attention: keep bits saved, rewritten (attn_dropout_checkpoint), from attn_dropout_bits_fwd "
          "(DSKC_ATTN_MASK=kernel): bitwise equal, and vs reference") {
  dskc_test::require_gpu();
  check_keep_bit_sources({"d64-s128", 2, 128, 128, 1024, 16, DType::F16, true, 0.1, false});
  check_keep_bit_sources({"d64-s1", 3, 16, 1, 256, 4, DType::F16, true, 0.1, false});
  check_keep_bit_sources({"d32-s7", 2, 8, 7, 128, 4, DType::BF16, false, 0.1, false});
  check_keep_bit_sources({"d64-s33", 2, 40, 33, 256, 4, DType::F16, true, 0.2, false});
  check_keep_bit_sources({"d64-s127", 2, 128, 127, 256, 4, DType::F16, true, 0.3, false});
  check_keep_bit_sources({"d80-s381", 1, 384, 381, 160, 2, DType::BF16, false, 0.1, false});
  check_keep_bit_sources({"d32-s509", 1, 512, 509, 128, 4, DType::BF16, true, 0.1, false});
  check_keep_bit_sources({"d128-s200", 2, 256, 200, 256, 2, DType::F16, true, 0.1, false});
  // The other sources against the unfused path and the CPU reference as well.
  check_case({"d64-s127-adc", 2, 128, 127, 1024, 16, DType::F16, true, 0.1, true, true}, false);
  check_case({"d32-s509-adc", 1, 512, 509, 128, 4, DType::BF16, true, 0.1, true, true}, false);
  check_case({"d128-s200-adc", 2, 256, 200, 256, 2, DType::F16, true, 0.1, true, true}, false);
  check_case({"d64-s127-kernel", 2, 128, 127, 1024, 16, DType::F16, true, 0.1, true, false, true}, false);
  check_case({"d80-s381-kernel-adc", 1, 384, 381, 160, 2, DType::BF16, false, 0.1, true, true, true}, false);
}

// attn_flash_fwd with two K/V buffers (DSKC_ATTN_FWD_STAGES=2: the next tile prefetched by
// cp.async, where they fit) against one (the default): the same arithmetic in the same order, so
// every output and gradient is bitwise equal. Tile counts odd and even, partial last tiles, one
// tile, the 32-key tiles of head dims above 64, with and without attention dropout.
void check_fwd_stages(const Case& k, int want_stages) {
  if (!selected(k.name)) return;
  const LayerConfig c = config_of(k);
  const DType t = c.dtype();
  const int B = k.batch, S = k.seq, H = c.hidden_size;
  INFO("case " << k.name << ": two K/V buffers vs one, B=" << B << " S=" << S << " " << dtype_name(t));
  const Progress progress(std::string(k.name) + " K/V buffers");
  const dskc_test::ScopedEnv env_fwd("DSKC_ATTN_FWD", "sync");  // the buffers are the mma.sync kernel's
  Context ctx;
  const auto params = rounded_params(c, 9);
  auto [x, dy, mask] = inputs_of(k, H, t, 7, 8);
  const Result one = run(ctx, c, AttentionPath::FusedWhereSupported, params, x, mask, dy, B, S, "kernel");
  Result two;
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_FWD_STAGES", "2");
    two = run(ctx, c, AttentionPath::FusedWhereSupported, params, x, mask, dy, B, S, "kernel");
  }
  REQUIRE(two.fused);
  CHECK(two.fwd_stages == want_stages);
  CHECK(one.fwd_stages == 1);
  check_bitwise_equal(one, two);
}

TEST_CASE("fused attention forward: two K/V buffers (cp.async prefetch) and one give bitwise equal results") {
  dskc_test::require_gpu();
  check_fwd_stages({"d64-s128", 2, 128, 128, 1024, 16, DType::F16, true, 0.1, true}, 2);
  check_fwd_stages({"d64-s1", 3, 16, 1, 256, 4, DType::F16, true, 0.1, false}, 2);
  check_fwd_stages({"d64-s65", 2, 72, 65, 256, 4, DType::BF16, false, 0.0, true}, 2);
  check_fwd_stages({"d64-s191", 1, 192, 191, 128, 2, DType::F16, true, 0.2, true}, 2);
  check_fwd_stages({"d32-s509", 1, 512, 509, 128, 4, DType::BF16, true, 0.1, true}, 2);
  check_fwd_stages({"d80-s381", 1, 384, 381, 160, 2, DType::BF16, false, 0.1, true}, 2);
  check_fwd_stages({"d96-s97", 2, 128, 97, 192, 2, DType::F16, true, 0.0, false}, 2);
  check_fwd_stages({"d128-s200", 2, 256, 200, 256, 2, DType::F16, true, 0.1, true}, 1);  // no room for two
}

TEST_CASE("fused attention: head dims 16, 48, 80, 96, 128") {
  dskc_test::require_gpu();
  check_case({"d16", 2, 64, 57, 128, 8, DType::F16, true, 0.1, true}, false);
  check_case({"d48", 2, 64, 50, 192, 4, DType::BF16, true, 0.1, true}, false);
  check_case({"d80", 2, 100, 99, 160, 2, DType::F16, false, 0.1, true}, false);
  check_case({"d96", 1, 160, 131, 192, 2, DType::BF16, true, 0.0, true}, false);
  check_case({"d128", 2, 256, 200, 256, 2, DType::F16, true, 0.1, true}, false);
}

// Another way to compute dQ against the default mode (dSᵀ from attn_flash_bwd_dkdv, dQ by a batched
// GEMM) on the same layer and inputs: stochastic_mode with DSKC_ATTN_DQ=atomic (single pass, dQ
// shares added with fp32 atomics) or DSKC_ATTN_DQ=kernel (attn_flash_bwd_dq recomputes P and dS per query tile). GEMM
// autotuning is off so both run the same GEMM algorithms: the forward is the same code (output,
// context, logsumexp, keep bits bitwise equal) and every variant computes dK, dV with the same
// attn_flash_bwd_dkdv code (bitwise equal); only dQ differs, by the order of its fp32 sums, and with
// it the gradients computed from grad_qkv: attn_qkvw, attn_qkvb, the input and, in Pre-LN, norm_w /
// norm_b (close: normwise relative difference within a few rounding units of the dtype). Gradients
// computed before the attention backward are bitwise equal. A second run gives the same again (dQ
// within rounding of the first; bitwise for the deterministic kernel). StochasticGemm is
// stochastic_mode as it runs by default (the same dQ GEMM): with autotuning off, every output and
// gradient equals the default mode's bit for bit. Reduce is stochastic_mode with DSKC_ATTN_DQ=reduce:
// there both runs use the wgmma dK/dV kernel (the default mode's with the dQ GEMM, stochastic_mode's
// adding dQ shares by TMA reductions), whose dK/dV code is the same, so the same checks hold.
// The 2-norm of a gradient (the qkv gradient's: the scale the dQ / dK / dV differences are measured against).
double norm_of(const std::vector<float>& v) {
  double n = 0;
  for (float x : v) n += static_cast<double>(x) * x;
  return std::sqrt(n);
}

// Two runs of one layer whose dQ differs by another fp32 summation order (`got` against `want`): the
// gradients computed before the attention backward (the LayerNorm and FFN parameters, the output
// projection) bitwise equal; the input gradient and every gradient computed from grad_qkv within `tol`
// (normwise relative). `from` ends the messages ("from the default mode").
void check_grads_after_dq(const LayerConfig& c, const Result& got, const Result& want, double tol, const char* from) {
  std::vector<std::string> before{"attn_ow", "attn_ob", "attn_nw",  "attn_nb",
                                  "inter_w", "inter_b", "output_w", "output_b"};
  if (!c.pre_layer_norm) before.insert(before.end(), {"norm_w", "norm_b"});
  auto close = [&](const std::string& what, const std::vector<float>& g, const std::vector<float>& w) {
    const auto e = dskc_test::compare(g, w);
    CHECK_MESSAGE(e.rel <= tol, what << ": normwise rel difference " << e.rel << " " << from);
  };
  close("grad_input", got.dx, want.dx);
  for (const auto& [name, v] : want.grads) {
    if (std::find(before.begin(), before.end(), name) != before.end())
      CHECK_MESSAGE(got.grads.at(name) == v, name << " (computed before the attention backward) differs");
    else
      close("grad_" + name, got.grads.at(name), v);
  }
}

enum class DqVariant { Stochastic, Kernel, StochasticGemm, Reduce };
void check_dq_vs_default(const Case& k, DqVariant variant) {
  if (!selected(k.name)) return;
  Case ks = k;
  ks.stochastic = variant != DqVariant::Kernel;
  const char* other_dq = variant == DqVariant::Kernel       ? "kernel"
                         : variant == DqVariant::Stochastic ? "atomic"
                         : variant == DqVariant::Reduce     ? "reduce"
                                                            : nullptr;
  const char* other_name = variant == DqVariant::Kernel       ? "DSKC_ATTN_DQ=kernel"
                           : variant == DqVariant::Stochastic ? "stochastic_mode + DSKC_ATTN_DQ=atomic"
                           : variant == DqVariant::Reduce     ? "stochastic_mode + DSKC_ATTN_DQ=reduce"
                                                              : "stochastic_mode (dQ GEMM)";
  const LayerConfig c = config_of(k), cs = config_of(ks);
  const DType t = c.dtype();
  const int B = k.batch, S = k.seq, H = c.hidden_size, d = c.head_dim();
  // dK/dV from the same kernel in every variant: the mma.sync one (the wgmma kernel, Hopper's default
  // at head dim 64, exists only with the dQ GEMM; check_wgmma_vs_sync compares the two).
  // (Reduce: the wgmma kernel in both modes, the default where it applies.)
  const dskc_test::ScopedEnv env_bwd("DSKC_ATTN_BWD", variant == DqVariant::Reduce ? nullptr : "sync");
  INFO("case " << k.name << ": " << other_name << " vs default, B=" << B << " S=" << S << " d=" << d << " "
               << dtype_name(t) << " attn_p=" << k.attn_p << (k.adc ? " attn_dropout_checkpoint" : ""));
  const Progress progress(std::string(k.name) + " " + other_name + " vs default");
  Context ctx;
  const auto params = rounded_params(c, 8, 79);
  auto [x, dy, mask] = inputs_of(k, H, t, 5, 6);
  const auto fused = AttentionPath::FusedWhereSupported;
  const Result a = run(ctx, c, fused, params, x, mask, dy, B, S, "inline", /*gemm_autotune=*/false);
  REQUIRE(a.fused);
  REQUIRE_FALSE(a.dq_atomic);
  REQUIRE(a.dq_gemm);
  if (variant == DqVariant::Reduce && !a.bwd_wgmma) {
    MESSAGE(k.name << ": not sm_90 (or not head dim 64): no wgmma dK/dV kernel, no TMA-reduced dQ to compare");
    return;
  }
  const double tol = t == DType::BF16 ? 1e-2 : 2e-3;  // a few units of rounding (fp16 2^-11, bf16 2^-8)
  const double dqkv_norm = norm_of(a.dqkv);
  std::vector<float> first_dqkv;
  for (int run_no = 0; run_no < 2; ++run_no) {
    INFO(other_name << " run " << run_no);
    const Result s = run(ctx, cs, fused, params, x, mask, dy, B, S, "inline", /*gemm_autotune=*/false, other_dq);
    REQUIRE(s.dq_atomic == (variant == DqVariant::Stochastic));
    REQUIRE(s.dq_gemm == (variant == DqVariant::StochasticGemm));
    REQUIRE(s.dq_reduce == (variant == DqVariant::Reduce));
    if (variant == DqVariant::StochasticGemm) {  // the same kernels and GEMM algorithms: bit for bit
      CHECK(s.out == a.out);
      CHECK(s.dqkv == a.dqkv);
      CHECK(s.dx == a.dx);
      for (const auto& [name, v] : a.grads) CHECK_MESSAGE(s.grads.at(name) == v, "grad_" << name << " differs");
      continue;
    }
    if (run_no == 0) first_dqkv = s.dqkv;
    else if (variant == DqVariant::Kernel) CHECK(s.dqkv == first_dqkv);  // no atomics: bitwise reruns
    CHECK(s.out == a.out);
    CHECK(s.ctx == a.ctx);
    CHECK(s.lse == a.lse);
    CHECK(s.bits == a.bits);
    size_t kv_diff = 0;
    for (size_t r = 0; r < static_cast<size_t>(B) * S; ++r)
      for (int col = H; col < 3 * H; ++col) kv_diff += s.dqkv[r * 3 * H + col] != a.dqkv[r * 3 * H + col];
    CHECK_MESSAGE(kv_diff == 0, kv_diff << " dK/dV elements differ from the default mode's");
    const Diff dq = diff(s.dqkv, a.dqkv, B, S, 3 * H, 0, H, d, 0, 0, dqkv_norm);
    std::printf("  %s %s run %d: dQ vs default: max abs %.3e, rel %.3e (of the qkv gradient's norm)\n", k.name,
                other_name, run_no, dq.max_abs, dq.rel);
    CHECK_MESSAGE(dq.rel <= tol, "dQ: normwise rel difference " << dq.rel);
    check_grads_after_dq(c, s, a, tol, "from the default mode");
  }
}

TEST_CASE("stochastic_mode + DSKC_ATTN_DQ=atomic: single-pass attention backward (attn_flash_bwd_dkdvdq) vs unfused "
          "vs CPU reference") {
  dskc_test::require_gpu();
  // Against the unfused path and the reference: same tolerances as the default mode's cases above.
  check_case({"d64-s128-sto", 2, 128, 128, 1024, 16, DType::F16, true, 0.1, true, false, false, true}, true);
  check_case({"d64-s127-sto", 2, 128, 127, 1024, 16, DType::F16, true, 0.1, true, false, false, true}, false);
  check_case({"d64-s127-bf16-sto", 2, 128, 127, 256, 4, DType::BF16, false, 0.3, true, false, false, true}, false);
  check_case({"d64-s1-sto", 3, 16, 1, 256, 4, DType::F16, true, 0.1, false, false, false, true}, false);
  check_case({"d32-s7-sto", 2, 8, 7, 128, 4, DType::BF16, false, 0.1, true, false, false, true}, false);
  check_case({"d16-s57-sto", 2, 64, 57, 128, 8, DType::F16, true, 0.0, true, false, false, true}, false);
  check_case({"d80-s381-adc-sto", 1, 384, 381, 160, 2, DType::BF16, false, 0.1, true, true, false, true}, false);
  check_case({"d32-s509-sto", 1, 512, 509, 128, 4, DType::BF16, true, 0.1, true, false, false, true}, false);
  check_case({"d128-s200-kernel-sto", 2, 256, 200, 256, 2, DType::F16, true, 0.1, true, false, true, true}, false);
}

TEST_CASE("stochastic_mode + DSKC_ATTN_DQ=atomic, DSKC_ATTN_DQ=kernel and stochastic_mode's dQ GEMM vs the default "
          "mode") {
  dskc_test::require_gpu();
  // Against the default mode (GEMM autotuning off): fp16 and bf16, partial tiles, dropout on and off.
  for (DqVariant v : {DqVariant::Stochastic, DqVariant::Kernel, DqVariant::StochasticGemm}) {
    check_dq_vs_default({"d64-s127", 2, 128, 127, 1024, 16, DType::F16, true, 0.1, true}, v);
    check_dq_vs_default({"d64-s127-bf16", 2, 128, 127, 256, 4, DType::BF16, false, 0.3, true}, v);
    check_dq_vs_default({"d32-s509-adc", 1, 512, 509, 128, 4, DType::BF16, true, 0.1, true, true}, v);
    check_dq_vs_default({"d128-s200-nodrop", 2, 256, 200, 256, 2, DType::F16, true, 0.0, false}, v);
    check_dq_vs_default({"d16-s7", 2, 8, 7, 128, 8, DType::F16, false, 0.1, true}, v);
  }
}

TEST_CASE("stochastic_mode + DSKC_ATTN_DQ=reduce: dQ shares added by TMA reductions in the wgmma dK/dV kernel vs "
          "unfused vs CPU reference, and vs the default mode") {
  dskc_test::require_gpu();
  // Head dim 64 (the wgmma kernel): partial query and key tiles (S = 509, 200, 129, 65, 1), one query tile
  // and several, masks, dropout on and off, attn_dropout_checkpoint's rewritten bits, fp16 / bf16,
  // Pre- and Post-LN; S <= 128 only when asked for (stochastic_mode's default there is the fused dQ).
  auto sto = [](Case k) {
    k.stochastic = true;
    k.dq_src = "reduce";
    return k;
  };
  check_case(sto({"d64-s509-red", 1, 512, 509, 128, 2, DType::F16, true, 0.1, true}), true);
  check_case(sto({"d64-s200-bf16-red", 2, 256, 200, 256, 4, DType::BF16, false, 0.3, true}), false);
  check_case(sto({"d64-s129-adc-red", 2, 256, 129, 128, 2, DType::F16, true, 0.1, true, true}), false);
  check_case(sto({"d64-s65-nodrop-red", 3, 128, 65, 128, 2, DType::BF16, true, 0.0, false}), false);
  check_case(sto({"d64-s1-red", 3, 16, 1, 128, 2, DType::F16, false, 0.1, true}), false);
  // Against the default mode (dQ GEMM), GEMM autotuning off: forward and dK/dV bitwise, dQ and what
  // follows from it within rounding; a rerun within rounding of the first.
  check_dq_vs_default({"d64-s509", 1, 512, 509, 256, 4, DType::F16, true, 0.1, true}, DqVariant::Reduce);
  check_dq_vs_default({"d64-s300-bf16-adc", 2, 384, 300, 128, 2, DType::BF16, false, 0.1, true, true}, DqVariant::Reduce);
  check_dq_vs_default({"d64-s200-nodrop", 2, 256, 200, 128, 2, DType::F16, true, 0.0, false}, DqVariant::Reduce);
}

// The gradients of a run with one of the wgmma attention kernels (w, and its rerun w2) against the
// mma.sync run a of the same layer and inputs: dQ, dK and dV normwise within a few rounding units of
// the dtype relative to the norm of the qkv gradient (with `label`, each printed), grad_input and
// every parameter gradient likewise, and the rerun's parameter gradients bitwise equal.
void check_grads_vs_sync(const Case& k, const Result& a, const Result& w, const Result& w2, const char* label) {
  const int B = k.batch, S = k.seq, H = k.hidden, d = k.hidden / k.heads;
  const double tol = k.dtype == DType::BF16 ? 1e-2 : 2e-3;
  const double dqkv_norm = norm_of(a.dqkv);
  const char* part[3] = {"dQ", "dK", "dV"};
  for (int p = 0; p < 3; ++p) {
    const Diff e = diff(w.dqkv, a.dqkv, B, S, 3 * H, p * H, H, d, 0, 0, dqkv_norm);
    if (label) std::printf("  %s %s: %s vs sync: max abs %.3e, rel %.3e\n", k.name, label, part[p], e.max_abs, e.rel);
    CHECK_MESSAGE(e.rel <= tol, part[p] << ": normwise rel difference " << e.rel << " from the mma.sync run");
  }
  const auto dx = dskc_test::compare(w.dx, a.dx);
  CHECK_MESSAGE(dx.rel <= tol, "grad_input: normwise rel difference " << dx.rel);
  for (const auto& [name, v] : a.grads) {
    const auto e = dskc_test::compare(w.grads.at(name), v);
    CHECK_MESSAGE(e.rel <= tol, "grad_" << name << ": normwise rel difference " << e.rel);
    CHECK_MESSAGE(w2.grads.at(name) == w.grads.at(name), "grad_" << name << " differs between two runs");
  }
}

// DSKC_ATTN_BWD=wgmma / wgmma2 (on Hopper at head dim 64 the default: attn_flash_bwd_dkdv on warpgroup
// MMA, templates/attn_flash_bwd_wgmma.cuh, one or two math warpgroups per block) against
// DSKC_ATTN_BWD=sync (the mma.sync kernel) on the same layer and inputs: the forward is the same code
// (output, logsumexp, keep bits bitwise equal); dQ, dK and dV agree within a few rounding units of the
// dtype (same rounded operands, other fp32 summation order), relative to the norm of the qkv gradient,
// and so does every gradient computed from them; a second run is bitwise equal to the first (no
// atomics). Partial key and query tiles (S = 1, 33, 127, 200, 509), one or two warpgroups past S,
// masks, dropout on and off, the rewritten bits of attn_dropout_checkpoint, fp16 and bf16.
// With dq = "fused" (DSKC_ATTN_DQ=fused) the wgmma kernel also computes dQ where its warpgroups cover
// every key (max_seq <= 128: one warpgroup up to 64; above, two 64-key halves: the blocks of a cluster
// with wgmma, the warpgroups of one block with wgmma2; also with S <= 64 there, where the second half's
// keys are all past S), else the dQ GEMM stays; `wgs` 0 = as the plan picks then. With dq = "ring"
// (DSKC_ATTN_DQ=ring) the same up to 128 keys, and from 129 to 512 with one warpgroup per block the
// ring of ceil(max_seq/64) cluster blocks (D from attn_flash_bwd_dot); grad_qkv is then filled with NaN
// before the backward, so an element the ring's blocks do not write shows.
void check_wgmma_vs_sync(const Case& k, const char* variant, int wgs, const char* dq = nullptr) {
  if (!selected(k.name)) return;
  const LayerConfig c = config_of(k);
  const DType t = c.dtype();
  const int B = k.batch, S = k.seq, H = c.hidden_size;
  const bool ring_src = dq && std::strcmp(dq, "ring") == 0;
  const bool ring = ring_src && std::strcmp(variant, "wgmma") == 0 && k.max_seq > 128 && k.max_seq <= 512;
  const bool fused_dq = (dq && (std::strcmp(dq, "fused") == 0 || ring_src) && k.max_seq <= 128) || ring;
  const bool halves = fused_dq && !ring && k.max_seq > 64;
  if (dq && wgs == 0) wgs = std::strcmp(variant, "wgmma2") == 0 && (!fused_dq || halves) ? 2 : 1;
  INFO("case " << k.name << ": DSKC_ATTN_BWD=" << variant << (dq ? " DSKC_ATTN_DQ=" : "") << (dq ? dq : "")
               << " vs sync, B=" << B << " S=" << S << " "
               << dtype_name(t) << " attn_p=" << k.attn_p << (k.adc ? " attn_dropout_checkpoint" : ""));
  const Progress progress(std::string(k.name) + " " + variant + " vs sync");
  Context ctx;
  const auto params = rounded_params(c, 12, 81);
  auto [x, dy, mask] = inputs_of(k, H, t, 13, 14);
  const auto fused = AttentionPath::FusedWhereSupported;
  Result a, w[2];
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_BWD", "sync");
    a = run(ctx, c, fused, params, x, mask, dy, B, S);
  }
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_BWD", variant);
    for (auto& r : w) r = run(ctx, c, fused, params, x, mask, dy, B, S, "inline", true, dq, ring_src);
  }
  REQUIRE(a.fused);
  REQUIRE_FALSE(a.bwd_wgmma);
  if (!w[0].bwd_wgmma) {
    MESSAGE("DSKC_ATTN_BWD=" << variant << ": this GPU is not sm_90, the layer keeps the mma.sync kernel");
    return;
  }
  CHECK(w[0].bwd_wgs == wgs);
  CHECK(w[0].dq_fused == fused_dq);
  CHECK(w[0].dq_gemm == !fused_dq);
  CHECK(w[0].dq_ring == ring);
  CHECK(w[0].bwd_cluster == (ring ? (k.max_seq + 63) / 64 : halves && wgs == 1 ? 2 : 1));
  CHECK(w[0].dot_in_dkdv == (fused_dq && wgs == 1 && !ring));
  CHECK(w[0].out == a.out);
  CHECK(w[0].lse == a.lse);
  CHECK(w[0].bits == a.bits);
  CHECK(w[1].dqkv == w[0].dqkv);
  CHECK(w[1].dx == w[0].dx);
  const std::string label = std::string(variant) + (ring ? " ring dQ" : fused_dq ? " fused dQ" : "");
  check_grads_vs_sync(k, a, w[0], w[1], label.c_str());
}

TEST_CASE("fused attention backward on warpgroup MMA (DSKC_ATTN_BWD=wgmma, wgmma2) vs the mma.sync kernel, the "
          "unfused path and the CPU reference") {
  dskc_test::require_gpu();
  struct Variant {
    const char* bwd;
    int wgs;         // 0: as the plan picks for the fused dQ
    const char* dq;  // DSKC_ATTN_DQ
  };
  const Variant variants[] = {{"wgmma", 1, "gemm"}, {"wgmma2", 2, "gemm"}, {"wgmma", 0, "fused"}, {"wgmma2", 0, "fused"}};
  for (const auto& [v, wgs, dq] : variants) {
    check_wgmma_vs_sync({"d64-s128", 2, 128, 128, 1024, 16, DType::F16, true, 0.1, true}, v, wgs, dq);
    check_wgmma_vs_sync({"d64-s1", 3, 16, 1, 256, 4, DType::F16, true, 0.1, false}, v, wgs, dq);
    check_wgmma_vs_sync({"d64-s33-bf16", 2, 40, 33, 256, 4, DType::BF16, false, 0.2, true}, v, wgs, dq);
    check_wgmma_vs_sync({"d64-m128-s50", 2, 128, 50, 256, 4, DType::F16, true, 0.1, true}, v, wgs, dq);
    check_wgmma_vs_sync({"d64-m128-s65-adc", 3, 128, 65, 256, 4, DType::BF16, true, 0.1, true, true}, v, wgs, dq);
    check_wgmma_vs_sync({"d64-s127-nodrop", 2, 128, 127, 256, 4, DType::F16, true, 0.0, true}, v, wgs, dq);
    check_wgmma_vs_sync({"d64-s200-adc", 2, 256, 200, 256, 4, DType::BF16, true, 0.1, true, true}, v, wgs, dq);
    check_wgmma_vs_sync({"d64-s509", 1, 512, 509, 128, 2, DType::F16, false, 0.3, true}, v, wgs, dq);
    // The same kernels against the unfused path and the double-precision reference.
    const dskc_test::ScopedEnv env("DSKC_ATTN_BWD", v);
    const char* f = dq;
    check_case({"d64-s127-wg", 2, 128, 127, 1024, 16, DType::F16, true, 0.1, true, false, false, false, f}, false);
    check_case({"d64-s77-bf16-wg", 3, 128, 77, 256, 4, DType::BF16, false, 0.1, true, false, false, false, f}, false);
    check_case({"d64-m64-s64-wg", 2, 64, 64, 256, 4, DType::F16, true, 0.1, true, false, false, false, f}, false);
    check_case({"d64-s381-adc-wg", 1, 384, 381, 128, 2, DType::F16, true, 0.1, true, true, false, false, f}, false);
  }
}

// DSKC_ATTN_FWD=wgmma / wgmma3 (on Hopper at head dim 64 the default: attn_flash_fwd on warpgroup MMA,
// templates/attn_flash_fwd_wgmma.cuh, two or three K/V stages) against DSKC_ATTN_FWD=sync (the mma.sync
// kernel) on the same layer and inputs, the keep flags from attn_dropout_bits_fwd (DSKC_ATTN_MASK=kernel):
// the keep bits are bitwise equal; the context, the logsumexp, the layer output, dQ/dK/dV and every
// gradient agree within a few rounding units of the dtype (the same rounded operands, another fp32
// summation order in the products); a second run is bitwise equal to the first. Partial key and query
// tiles (S = 1, 33, 65, 127, 200, 509: one to eight key tiles, the K/V stages refilled and wrapped),
// masks, dropout on and off, attn_dropout_checkpoint, fp16 and bf16, Pre-/Post-LN.
void check_wgmma_fwd_vs_sync(const Case& k, const char* variant, int stages) {
  if (!selected(k.name)) return;
  const LayerConfig c = config_of(k);
  const DType t = c.dtype();
  const int B = k.batch, S = k.seq, H = c.hidden_size, d = c.head_dim();
  INFO("case " << k.name << ": DSKC_ATTN_FWD=" << variant << " vs sync, B=" << B << " S=" << S << " "
               << dtype_name(t) << " attn_p=" << k.attn_p << (k.adc ? " attn_dropout_checkpoint" : ""));
  const Progress progress(std::string(k.name) + " fwd " + variant + " vs sync");
  Context ctx;
  const auto params = rounded_params(c, 14, 83);
  auto [x, dy, mask] = inputs_of(k, H, t, 15, 16);
  const auto fused = AttentionPath::FusedWhereSupported;
  Result a, w[2];
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_FWD", "sync");
    a = run(ctx, c, fused, params, x, mask, dy, B, S, "kernel");
  }
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_FWD", variant);
    for (auto& r : w) r = run(ctx, c, fused, params, x, mask, dy, B, S, "kernel");
  }
  REQUIRE(a.fused);
  REQUIRE_FALSE(a.fwd_wgmma);
  if (!w[0].fwd_wgmma) {
    MESSAGE("DSKC_ATTN_FWD=" << variant << ": this GPU is not sm_90, the layer keeps the mma.sync kernel");
    return;
  }
  CHECK(w[0].fwd_wg_stages == stages);
  CHECK(w[0].bwd_wgmma == a.bwd_wgmma);
  CHECK(w[0].bits == a.bits);
  CHECK(w[1].ctx == w[0].ctx);
  CHECK(w[1].lse == w[0].lse);
  CHECK(w[1].out == w[0].out);
  CHECK(w[1].dqkv == w[0].dqkv);
  CHECK(w[1].dx == w[0].dx);
  const double tol = t == DType::BF16 ? 1e-2 : 2e-3;
  const Diff ctx_e = diff(w[0].ctx, a.ctx, B, S, H, 0, H, d, 0, 0);
  std::printf("  %s fwd %s: context vs sync: max abs %.3e, rel %.3e\n", k.name, variant, ctx_e.max_abs, ctx_e.rel);
  CHECK_MESSAGE(ctx_e.rel <= tol, "context: normwise rel difference " << ctx_e.rel << " from the mma.sync kernel");
  REQUIRE(w[0].lse.size() == a.lse.size());
  double lse_err = 0;
  for (size_t i = 0; i < a.lse.size(); ++i)
    lse_err = std::max(lse_err, std::isfinite(w[0].lse[i]) ? std::fabs(static_cast<double>(w[0].lse[i]) - a.lse[i]) : 1e300);
  CHECK_MESSAGE(lse_err <= 1e-4, "logsumexp: max abs difference " << lse_err << " from the mma.sync kernel");
  const auto out = dskc_test::compare(w[0].out, a.out);
  CHECK_MESSAGE(out.rel <= tol, "output: normwise rel difference " << out.rel);
  check_grads_vs_sync(k, a, w[0], w[1], nullptr);
}

TEST_CASE("fused attention forward on warpgroup MMA (DSKC_ATTN_FWD=wgmma, wgmma3) vs the mma.sync kernel, the "
          "unfused path and the CPU reference") {
  dskc_test::require_gpu();
  const std::pair<const char*, int> variants[] = {{"wgmma", 2}, {"wgmma3", 3}};
  for (const auto& [v, stages] : variants) {
    check_wgmma_fwd_vs_sync({"d64-s128", 2, 128, 128, 1024, 16, DType::F16, true, 0.1, true}, v, stages);
    check_wgmma_fwd_vs_sync({"d64-s1", 3, 16, 1, 256, 4, DType::F16, true, 0.1, false}, v, stages);
    check_wgmma_fwd_vs_sync({"d64-s33-bf16", 2, 40, 33, 256, 4, DType::BF16, false, 0.2, true}, v, stages);
    check_wgmma_fwd_vs_sync({"d64-s65", 2, 72, 65, 256, 4, DType::F16, true, 0.1, true}, v, stages);
    check_wgmma_fwd_vs_sync({"d64-s127-nodrop", 2, 128, 127, 256, 4, DType::F16, true, 0.0, true}, v, stages);
    check_wgmma_fwd_vs_sync({"d64-s200-adc", 2, 256, 200, 256, 4, DType::BF16, true, 0.1, true, true}, v, stages);
    check_wgmma_fwd_vs_sync({"d64-s509", 1, 512, 509, 128, 2, DType::F16, false, 0.3, true}, v, stages);
    // The same kernels against the unfused path and the double-precision reference.
    const dskc_test::ScopedEnv env("DSKC_ATTN_FWD", v);
    check_case({"d64-s127-fwg", 2, 128, 127, 1024, 16, DType::F16, true, 0.1, true, false, true}, false);
    check_case({"d64-s77-bf16-fwg", 3, 128, 77, 256, 4, DType::BF16, false, 0.1, true, false, true}, false);
    check_case({"d64-s381-adc-fwg", 1, 384, 381, 128, 2, DType::F16, true, 0.1, true, true, true}, false);
    check_case({"d64-s200-nodrop-fwg", 2, 256, 200, 256, 4, DType::BF16, true, 0.0, true}, false);
  }
}

// DSKC_ATTN_STORE=tma (the default: the wgmma attention kernels stage each 64 x 64 output tile in shared
// memory and store it by TMA, rows past S clipped) against DSKC_ATTN_STORE=rows (4-byte stores from the
// accumulator layout) on the same layer and inputs: the same values, so the context, the logsumexp, the
// output, dQ/dK/dV (grad_qkv) and every gradient are bitwise equal, with both written tensors poisoned
// (NaN) first so that an element the TMA stores leave out shows. Partial query and key tiles (S = 1, 33,
// 50, 65, 127, 509), a second key half wholly past S (max_seq 128, S = 50), one and two warpgroups per
// block, the fused dQ (clusters, or two warpgroups) and the dQ GEMM, attn_dropout_checkpoint, fp16, bf16.
void check_tma_vs_rows(const Case& k, const char* bwd, const char* dq) {
  if (!selected(k.name)) return;
  const LayerConfig c = config_of(k);
  const int B = k.batch, S = k.seq;
  INFO("case " << k.name << ": DSKC_ATTN_STORE=tma vs rows, DSKC_ATTN_BWD=" << bwd << " DSKC_ATTN_DQ=" << dq
               << ", B=" << B << " S=" << S << " " << dtype_name(c.dtype()));
  const Progress progress(std::string(k.name) + " tma vs rows stores, " + bwd + " " + dq);
  Context ctx;
  const auto params = rounded_params(c, 16, 85);
  auto [x, dy, mask] = inputs_of(k, c.hidden_size, c.dtype(), 17, 18);
  const dskc_test::ScopedEnv env_bwd("DSKC_ATTN_BWD", bwd);
  Result r[2];
  for (int i = 0; i < 2; ++i) {
    const dskc_test::ScopedEnv env("DSKC_ATTN_STORE", i == 0 ? "rows" : "tma");
    r[i] = run(ctx, c, AttentionPath::FusedWhereSupported, params, x, mask, dy, B, S, "kernel", false, dq, true);
  }
  REQUIRE(r[1].fused);
  if (!r[1].fwd_wgmma || !r[1].bwd_wgmma) {
    MESSAGE("this GPU is not sm_90: the layer has no wgmma attention kernels");
    return;
  }
  CHECK_FALSE(r[0].tma_stores);
  CHECK(r[1].tma_stores);
  const bool ring = std::strcmp(dq, "ring") == 0 && std::strcmp(bwd, "wgmma") == 0 && k.max_seq > 128;
  CHECK(r[1].dq_ring == ring);
  CHECK(r[1].dq_fused == (((std::strcmp(dq, "fused") == 0 || std::strcmp(dq, "ring") == 0) && k.max_seq <= 128) || ring));
  CHECK(r[1].ctx == r[0].ctx);
  CHECK(r[1].lse == r[0].lse);
  CHECK(r[1].out == r[0].out);
  CHECK(r[1].dqkv == r[0].dqkv);
  CHECK(r[1].dx == r[0].dx);
  for (const auto& [name, g] : r[0].grads) CHECK_MESSAGE(r[1].grads.at(name) == g, "grad_" << name << " differs");
}

TEST_CASE("wgmma attention kernels: outputs stored by TMA (DSKC_ATTN_STORE=tma) and by 4-byte stores are "
          "bitwise equal") {
  dskc_test::require_gpu();
  const std::pair<const char*, const char*> variants[] = {{"wgmma", "fused"}, {"wgmma2", "fused"}, {"wgmma", "gemm"}};
  for (const auto& [bwd, dq] : variants) {
    check_tma_vs_rows({"d64-s128", 2, 128, 128, 1024, 16, DType::F16, true, 0.1, true}, bwd, dq);
    check_tma_vs_rows({"d64-s1", 3, 16, 1, 256, 4, DType::F16, true, 0.1, false}, bwd, dq);
    check_tma_vs_rows({"d64-s33-bf16", 2, 40, 33, 256, 4, DType::BF16, false, 0.2, true}, bwd, dq);
    check_tma_vs_rows({"d64-m128-s50", 2, 128, 50, 256, 4, DType::F16, true, 0.1, true}, bwd, dq);
    check_tma_vs_rows({"d64-m128-s65-adc", 3, 128, 65, 256, 4, DType::BF16, true, 0.1, true, true}, bwd, dq);
    check_tma_vs_rows({"d64-s127-nodrop", 2, 128, 127, 256, 4, DType::F16, true, 0.0, true}, bwd, dq);
    check_tma_vs_rows({"d64-s509", 1, 512, 509, 128, 2, DType::F16, false, 0.3, true}, bwd, dq);
  }
}

// DSKC_ATTN_BWD_PERSIST (templates/attn_flash_bwd_wgmma.cuh, attn_flash_bwd_wgmma_persist_impl): the
// clustered fused-dQ dK/dV kernel (65 .. 128 keys) with each cluster walking heads (the default) against
// one cluster per head (DSKC_ATTN_BWD_PERSIST=off), on the same layer and inputs: the same arithmetic in the same order, so dQ/dK/dV
// (grad_qkv, poisoned to NaN first) and every gradient are bitwise equal. Cluster caps of 1, 3 and
// 5 make clusters walk several heads (odd and even counts: both K/V buffers, every barrier phase);
// "on" takes as many clusters as fit (more heads than that in the 384-head case). One query tile
// per head (S <= 64 at max_seq 128: the second key half wholly past S, no hand-over) and two, partial
// tiles, masks, dropout on and off, attn_dropout_checkpoint, fp16 and bf16, Pre- and Post-LN.
void check_persist_vs_grid(const Case& k, const char* persist) {
  if (!selected(k.name)) return;
  const LayerConfig c = config_of(k);
  const int B = k.batch, S = k.seq;
  INFO("case " << k.name << ": DSKC_ATTN_BWD_PERSIST=" << persist << " vs off, B=" << B << " S=" << S << " "
               << dtype_name(c.dtype()));
  const Progress progress(std::string(k.name) + " persistent dK/dV (" + persist + ") vs a cluster per head");
  Context ctx;
  const auto params = rounded_params(c, 19, 86);
  auto [x, dy, mask] = inputs_of(k, c.hidden_size, c.dtype(), 20, 21);
  Result r[2];
  for (int i = 0; i < 2; ++i) {
    const dskc_test::ScopedEnv env("DSKC_ATTN_BWD_PERSIST", i == 0 ? "off" : persist);
    r[i] = run(ctx, c, AttentionPath::FusedWhereSupported, params, x, mask, dy, B, S, "kernel", false, nullptr, true);
  }
  REQUIRE(r[1].fused);
  if (!r[1].bwd_wgmma) {
    MESSAGE("this GPU is not sm_90: the layer has no wgmma attention backward");
    return;
  }
  CHECK_FALSE(r[0].bwd_persist);
  REQUIRE(r[1].bwd_persist);
  CHECK(r[1].bwd_cluster == 2);
  CHECK(r[1].lse == r[0].lse);
  CHECK(r[1].out == r[0].out);
  CHECK(r[1].dqkv == r[0].dqkv);
  CHECK(r[1].dx == r[0].dx);
  for (const auto& [name, g] : r[0].grads) CHECK_MESSAGE(r[1].grads.at(name) == g, "grad_" << name << " differs");
  size_t nan = 0;
  for (float v : r[1].dqkv) nan += std::isnan(v) ? 1 : 0;
  CHECK_MESSAGE(nan == 0, nan << " grad_qkv elements left unwritten");
}

TEST_CASE("persistent clustered attention backward (DSKC_ATTN_BWD_PERSIST) and a cluster per head are bitwise equal") {
  dskc_test::require_gpu();
  const Case cases[] = {
      {"d64-s128", 2, 128, 128, 1024, 16, DType::F16, true, 0.1, true},
      {"d64-m128-s50", 2, 128, 50, 256, 4, DType::F16, true, 0.1, true},
      {"d64-m128-s65-adc", 3, 128, 65, 256, 4, DType::BF16, true, 0.1, true, true},
      {"d64-s127-nodrop", 2, 128, 127, 256, 4, DType::F16, true, 0.0, true},
      {"d64-m100-s100-post", 5, 100, 100, 256, 4, DType::BF16, false, 0.2, true},
  };
  for (const char* persist : {"1", "3", "5", "on"})
    for (const Case& k : cases) check_persist_vs_grid(k, persist);
  // More heads than resident clusters: 24 × 16 = 384.
  check_persist_vs_grid({"d64-s128-b24", 24, 128, 128, 1024, 16, DType::F16, true, 0.1, true}, "on");
}

// DSKC_ATTN_DQ=ring: from 129 to 512 keys the wgmma dK/dV kernel's blocks (64 keys each, clusters of
// ceil(max_seq/64)) sum each query tile's dQ by passing it around a ring (templates/attn_flash_bwd_wgmma.cuh,
// kRing). Against the mma.sync kernel (dQ, dK, dV and every gradient within rounding, a rerun bitwise equal,
// grad_qkv poisoned first), the unfused path and the CPU reference, and its TMA stores against its 4-byte
// stores (bitwise). Rings of 3, 4, 6 and 8 blocks; sequences shorter than the ring (S = 100 and 1 at
// max_seq 512: blocks wholly past S that only take part in the barriers, rings of 2 and 1), partial tiles,
// masks, dropout on and off, attn_dropout_checkpoint, fp16 and bf16, Pre- and Post-LN; with two warpgroups
// per block (wgmma2) the dQ GEMM stays above 128 keys.
// Head dim 64 above 128 keys (the ring's and attn_dq_wgmma's cases): partial tiles (S = 509, 200, 129),
// full ones (512), sequences far below max_seq (100 and 1 at 512), masks, dropout on and off,
// attn_dropout_checkpoint, fp16 and bf16, Pre- and Post-LN, several heads and batches.
static const Case kAbove128Cases[] = {
    {"d64-s509", 1, 512, 509, 128, 2, DType::F16, false, 0.3, true},
    {"d64-s512-bf16", 2, 512, 512, 256, 4, DType::BF16, true, 0.1, true},
    {"d64-m512-s100", 2, 512, 100, 256, 4, DType::F16, true, 0.1, true},
    {"d64-m512-s1", 3, 512, 1, 128, 2, DType::F16, true, 0.1, false},
    {"d64-s200-adc", 2, 256, 200, 256, 4, DType::BF16, true, 0.1, true, true},
    {"d64-m192-s129-nodrop", 2, 192, 129, 256, 4, DType::F16, false, 0.0, true},
};

TEST_CASE("fused dQ around a ring of cluster blocks (DSKC_ATTN_DQ=ring) vs the mma.sync kernel, the unfused path "
          "and the CPU reference; TMA and 4-byte stores bitwise equal") {
  dskc_test::require_gpu();
  std::vector<Case> cases(std::begin(kAbove128Cases), std::end(kAbove128Cases));
  cases.push_back({"d64-s381", 1, 384, 381, 128, 2, DType::F16, true, 0.1, true});
  for (const Case& k : cases) {
    check_wgmma_vs_sync(k, "wgmma", 0, "ring");
    check_tma_vs_rows(k, "wgmma", "ring");
  }
  check_wgmma_vs_sync({"d64-s200-wg2", 2, 256, 200, 256, 4, DType::F16, true, 0.1, true}, "wgmma2", 0, "ring");
  const dskc_test::ScopedEnv env("DSKC_ATTN_BWD", "wgmma");
  check_case({"d64-s509-ring", 1, 512, 509, 128, 2, DType::F16, true, 0.1, true, false, false, false, "ring"}, false);
  check_case({"d64-s300-bf16-adc-ring", 2, 320, 300, 256, 4, DType::BF16, false, 0.1, true, true, false, false, "ring"},
             false);
  check_case({"d64-m256-s77-ring", 3, 256, 77, 256, 4, DType::F16, true, 0.1, true, false, false, false, "ring"}, false);
}

namespace {
// DSKC_ATTN_DQ_GEMM=wgmma: above 128 keys the wgmma backward's dQ = dS·K/√d by attn_dq_wgmma
// (templates/attn_dq_wgmma.cuh: dSᵀ and K by TMA through a ring of stages, one warpgroup per 128
// queries) instead of cuBLAS's batched GEMM, on the same layer and inputs (grad_qkv filled with NaN
// before the backward, so an element it does not write shows): the forward, the keep bits, dK / dV
// and every gradient computed before the attention backward are bitwise equal; dQ within a few
// rounding units of the dtype (the same rounded dSᵀ and K, another fp32 summation order), relative to
// the qkv gradient's norm, and every gradient computed from it within the same; a second run is
// bitwise equal to the first (no atomics).
void check_dq_wgmma_vs_cublas(const Case& k) {
  if (!selected(k.name)) return;
  const LayerConfig c = config_of(k);
  const DType t = c.dtype();
  const int B = k.batch, S = k.seq, H = c.hidden_size, d = c.head_dim();
  INFO("case " << k.name << ": DSKC_ATTN_DQ_GEMM=wgmma vs cublas, B=" << B << " S=" << S << " max_seq=" << k.max_seq
               << " " << dtype_name(t) << " attn_p=" << k.attn_p << (k.adc ? " attn_dropout_checkpoint" : "")
               << (k.pre_ln ? " Pre-LN" : " Post-LN"));
  const Progress progress(std::string(k.name) + " attn_dq_wgmma vs cuBLAS");
  Context ctx;
  const auto params = rounded_params(c, 15, 83);
  auto [x, dy, mask] = inputs_of(k, H, t, 16, 17);
  const auto fused = AttentionPath::FusedWhereSupported;
  Result a, w[2];
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_DQ_GEMM", "cublas");
    a = run(ctx, c, fused, params, x, mask, dy, B, S, "inline", true, nullptr, true);
  }
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_DQ_GEMM", "wgmma");
    for (auto& r : w) r = run(ctx, c, fused, params, x, mask, dy, B, S, "inline", true, nullptr, true);
  }
  REQUIRE(a.fused);
  REQUIRE(a.dq_gemm);
  CHECK_FALSE(a.dq_wgmma);
  if (!w[0].bwd_wgmma) {
    MESSAGE(k.name << ": this GPU is not sm_90, the layer keeps the mma.sync kernel and cuBLAS's dQ GEMM");
    CHECK_FALSE(w[0].dq_wgmma);
    return;
  }
  REQUIRE(w[0].dq_gemm);
  REQUIRE(w[0].dq_wgmma);
  CHECK(w[0].out == a.out);
  CHECK(w[0].ctx == a.ctx);
  CHECK(w[0].lse == a.lse);
  CHECK(w[0].bits == a.bits);
  CHECK(w[1].dqkv == w[0].dqkv);
  CHECK(w[1].dx == w[0].dx);
  size_t kv_diff = 0, nonfinite = 0;
  for (size_t r = 0; r < static_cast<size_t>(B) * S; ++r)
    for (int col = 0; col < 3 * H; ++col) {
      const float v = w[0].dqkv[r * 3 * H + col];
      nonfinite += !std::isfinite(v);
      if (col >= H) kv_diff += v != a.dqkv[r * 3 * H + col];
    }
  CHECK_MESSAGE(nonfinite == 0, nonfinite << " grad_qkv elements not written (NaN poison) or not finite");
  CHECK_MESSAGE(kv_diff == 0, kv_diff << " dK/dV elements differ from the cuBLAS run's");
  const double tol = t == DType::BF16 ? 1e-2 : 2e-3;
  const double dqkv_norm = norm_of(a.dqkv);
  size_t dq_diff = 0;
  for (size_t r = 0; r < static_cast<size_t>(B) * S; ++r)
    for (int col = 0; col < H; ++col) dq_diff += w[0].dqkv[r * 3 * H + col] != a.dqkv[r * 3 * H + col];
  const Diff dq = diff(w[0].dqkv, a.dqkv, B, S, 3 * H, 0, H, d, 0, 0, dqkv_norm);
  std::printf("  %s attn_dq_wgmma vs cuBLAS: dQ %zu of %zu elements differ, max abs %.3e, rel %.3e (of the qkv "
              "gradient's norm)\n",
              k.name, dq_diff, static_cast<size_t>(B) * S * H, dq.max_abs, dq.rel);
  CHECK_MESSAGE(dq.rel <= tol, "dQ: normwise rel difference " << dq.rel);
  check_grads_after_dq(c, w[0], a, tol, "from the cuBLAS run");
}
}  // namespace

TEST_CASE("dQ by attn_dq_wgmma (DSKC_ATTN_DQ_GEMM=wgmma) vs cuBLAS's batched dQ GEMM, the unfused path and the CPU "
          "reference") {
  dskc_test::require_gpu();
  // Partial query blocks of 128 (S = 509, 200, 129, 100, 1) and full ones (512), partial key blocks.
  for (const Case& k : kAbove128Cases) check_dq_wgmma_vs_cublas(k);
  const dskc_test::ScopedEnv env("DSKC_ATTN_DQ_GEMM", "wgmma");
  check_case({"d64-s509-dqwg", 1, 512, 509, 128, 2, DType::F16, true, 0.1, true}, false);
  check_case({"d64-s300-bf16-adc-dqwg", 2, 320, 300, 256, 4, DType::BF16, false, 0.1, true, true}, false);
}
