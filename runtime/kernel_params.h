// Host mirrors of the kernels' params structs (templates/*.cuh), passed by value to
// cuLaunchKernel. Member order and types must match the device structs exactly; sizes are
// pinned by static_asserts here (the device side is the same C++ layout).
#pragma once
#include <cuda.h>  // CUtensorMap

#include <cstddef>
#include <cstdint>

namespace dskc::kp {

using Ptr = const void*;

struct DropoutArgs {
  uint64_t seed;
  uint32_t layer;
  uint32_t step;
};

struct LayerNormFwd {
  Ptr x, gamma, beta, y;
  float *mean, *rstd;
  int rows;
};
struct BiasDropoutResidualLn {
  Ptr x, bias, resid, s, gamma, beta, y;
  float *mean, *rstd;
  int rows;
  DropoutArgs rng;
};
struct BiasDropoutResidual {
  Ptr x, bias, resid, out;
  int rows;
  DropoutArgs rng;
};
struct BiasGeluFwd {
  Ptr h, bias, g;
  int rows;
};
struct AttnSoftmaxFwd {
  Ptr scores, mask, probs_drop;
  int batch, seq, seq_pad;
  DropoutArgs rng;
};
struct AttnSoftmaxBwd {
  Ptr grad, probs;
  int batch, seq, seq_pad;
  DropoutArgs rng;
};
struct AttnDropoutRecompute {
  Ptr probs, probs_drop;
  int batch, seq, seq_pad;
  DropoutArgs rng;
};
struct LayerNormBwd {
  Ptr dy, residual, xy, gamma, beta;
  const float *mean, *rstd;
  Ptr dx;
  float* part;
  int rows;
  Ptr dx_drop;
  DropoutArgs rng;
};
struct ParamGradReduce {
  const float* part;
  Ptr out0, out1;
  int parts;
};
struct DropoutBiasGrad {
  Ptr dy, dx;
  float* part;
  int rows;
  DropoutArgs rng;
};
struct BiasGeluBwd {
  Ptr dg, h, g;
  float* part;
  int rows;
};

// Fused attention (templates/attn_flash_fwd.cuh, attn_flash_bwd_dot.cuh, attn_flash_bwd.cuh,
// attn_dropout_bits.cuh).
struct AttnFlashFwd {
  Ptr qkv, mask, ctx;
  float* lse;      // nullptr in inference
  uint32_t* bits;  // attn_dropout_bits, written (kAttnFwdStoresBits) or read (kAttnFwdLoadsBits); else nullptr
  int batch, seq;
  DropoutArgs rng;
};
struct AttnFlashDot {
  Ptr ctx, dctx;
  float* dot;
  float* dq_acc;         // attn_dq_acc, zeroed (stochastic_mode: kDqAtomic, kDqReduce); else nullptr
  uint32_t* dq_tickets;  // attn_dq_tickets, zeroed (stochastic_mode); else nullptr
  int batch, seq;
};
struct AttnFlashBwd {
  Ptr qkv, mask, dctx;
  const float *lse, *dot;
  const uint32_t* bits;  // attn_dropout_bits (with attention dropout); else nullptr
  Ptr dqkv;
  float* dq_acc;         // attn_dq_acc (attn_flash_bwd_dkdvdq, stochastic_mode); else nullptr
  uint32_t* dq_tickets;  // attn_dq_tickets (attn_flash_bwd_dkdvdq); else nullptr
  Ptr ds;                // grad_scores: dSᵀ for the dQ GEMM (plan attn_dq_gemm); else nullptr
  int batch, seq;
};
// templates/attn_flash_bwd_wgmma.cuh (AttnFlashBwdWgParams): TMA maps first, like GemmSm90.
struct AttnFlashBwdWg {
  CUtensorMap qkv, dctx, ds, ctx;  // ds: plan attn_dq_gemm only; ctx (O): attn_dot_in_dkdv only
  CUtensorMap dq_acc;              // fp32 [B][S][H]: plan attn_dq_reduce only
  CUtensorMap dqkv_out;            // grad_qkv [B][S][3H]: plan attn_tma_stores with attn_dq_fused only
  Ptr mask;
  const float *lse, *dot;
  const uint32_t* bits;
  Ptr dqkv;
  int batch, seq;
};
// templates/attn_dq_wgmma.cuh (AttnDqWgParams).
struct AttnDqWg {
  CUtensorMap ds;        // grad_scores [B·heads][S][padded S] dSᵀ
  CUtensorMap qkv;       // [B][S][3H]
  CUtensorMap dqkv_out;  // grad_qkv [B][S][3H]
  int batch, seq;
};
// templates/attn_dq_convert.cuh (AttnDqConvertParams).
struct AttnDqConvert {
  const float* acc;
  Ptr dqkv;
  int rows;
};
// templates/attn_flash_fwd_wgmma.cuh (AttnFlashFwdWgParams).
struct AttnFlashFwdWg {
  CUtensorMap qkv;
  CUtensorMap ctx_out;  // the context [B][S][H]: plan attn_tma_stores only
  Ptr mask, ctx;
  float* lse;            // nullptr in inference
  const uint32_t* bits;  // attn_dropout_bits from attn_dropout_bits_fwd (with attention dropout); else nullptr
  int batch, seq;
};
struct AttnDropoutBits {
  uint32_t* bits;
  int batch, seq;
  DropoutArgs rng;
};
// attn_flash_bwd_dot_bits (LayerPlan::attn_bits_bwd_in_dot).
struct AttnFlashDotBits {
  AttnFlashDot dot;
  AttnDropoutBits bits;
};
// layernorm_fwd_bits (LayerPlan::attn_bits_in_ln): bits.bits == nullptr for the LayerNorm alone;
// blocks [0, word_blocks) draw the words (runtime/transformer_layer.h: ln_bits_word_blocks).
struct LayerNormFwdBits {
  LayerNormFwd ln;
  AttnDropoutBits bits;
  int word_blocks;
};

// gemm_sm90 (templates/gemm_sm90.cuh): TMA descriptors (runtime/tma.h) of A [m, K], B [N, K] and
// the epilogue's [m, N] tensors; passed as a __grid_constant__ parameter.
struct GemmSm90 {
  CUtensorMap a, b;
  CUtensorMap out;   // h (forward), dh (backward) or C (plain epilogues) stores
  CUtensorMap gelu;  // GELU(h) stores (forward; backward under gelu_checkpoint)
  CUtensorMap pre;   // GELU input h loads (backward)
  Ptr bias;          // [N] (forward GELU, kBias, kBiasDropoutResidual)
  int m;
  DropoutArgs rng;   // kBiasDropoutResidual (the FFN output's hidden dropout)
  Ptr sched;         // kGemmDynamicTiles: [2] uint32 counters, zero between launches
};
struct WeightTranspose {
  Ptr in, out;
};

static_assert(sizeof(CUtensorMap) == 128 && alignof(CUtensorMap) == 128);
static_assert(sizeof(GemmSm90) == 768);
static_assert(offsetof(GemmSm90, bias) == 640 && offsetof(GemmSm90, sched) == 672);
static_assert(sizeof(WeightTranspose) == 16);
static_assert(sizeof(DropoutArgs) == 16);
static_assert(sizeof(AttnFlashFwd) == 64);
static_assert(sizeof(AttnFlashDot) == 48);
static_assert(sizeof(AttnFlashDotBits) == 80);
static_assert(sizeof(AttnFlashBwd) == 88);
static_assert(sizeof(AttnFlashBwdWg) == 896 && offsetof(AttnFlashBwdWg, mask) == 768);
static_assert(sizeof(AttnDqConvert) == 24);
static_assert(sizeof(AttnDqWg) == 512 && offsetof(AttnDqWg, batch) == 384);
static_assert(sizeof(AttnFlashFwdWg) == 384 && offsetof(AttnFlashFwdWg, mask) == 256);
static_assert(sizeof(AttnDropoutBits) == 32);
static_assert(sizeof(LayerNormFwd) == 56);
static_assert(sizeof(LayerNormFwdBits) == 96);
static_assert(sizeof(BiasDropoutResidualLn) == 96);
static_assert(sizeof(BiasDropoutResidual) == 56);
static_assert(sizeof(BiasGeluFwd) == 32);
static_assert(sizeof(AttnSoftmaxFwd) == 56);
static_assert(sizeof(AttnSoftmaxBwd) == 48);
static_assert(sizeof(LayerNormBwd) == 104);
static_assert(sizeof(ParamGradReduce) == 32);
static_assert(sizeof(DropoutBiasGrad) == 48);
static_assert(sizeof(BiasGeluBwd) == 40);

}  // namespace dskc::kp
