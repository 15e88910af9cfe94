// PlainTransformerLayer: the unfused GPU BERT layer that runs when --deepspeed_transformer_kernel
// is off (SPEC §5), written the way a straightforward PyTorch BertLayer runs: one simple kernel per
// elementary op (bias add, dropout, residual add, two-pass LayerNorm, mask add, softmax, GELU,
// head split/merge, column sums; templates/plain/*.cuh compiled through NVRTC, one module per
// config, compiler/plain_codegen.h) and cuBLAS GEMMs (runtime/gemm.h; attention through
// strided-batched GEMMs on [B, heads, S, d] copies). Same parameters, math and Philox dropout
// masks (docs/DESIGN.md) as the fused TransformerLayer, so both agree up to rounding.
// It keeps every intermediate tensor between forward and backward (no memory flags:
// attn_dropout_checkpoint, normalize_invertible, gelu_checkpoint and stochastic_mode are
// ignored, as by an unfused model). Buffers are sized for the config's batch_size ×
// max_seq_length at construction. The caller owns input, mask and output and keeps them alive
// until backward().
#pragma once
#include <cuda.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/config.h"
#include "runtime/context.h"
#include "runtime/gemm.h"
#include "runtime/gpu_layer.h"
#include "runtime/profiler.h"
#include "runtime/transformer_layer.h"  // LoadedModule, LayerOptions

namespace dskc {

class PlainTransformerLayer : public GpuLayer {
 public:
  // Error(Config) for an invalid config; Error(Compile) if the module does not build.
  PlainTransformerLayer(Context& ctx, const LayerConfig& cfg, const LayerOptions& opt = {});
  ~PlainTransformerLayer() override;

  const LayerConfig& config() const override { return cfg_; }

  CUdeviceptr param(const std::string& name) const override;
  CUdeviceptr grad(const std::string& name) const override;
  CUdeviceptr grads_base() const override { return grads_.ptr(); }
  size_t grads_bytes() const override { return grads_.bytes(); }
  void set_params(const std::map<std::string, std::vector<float>>& host) override;
  std::map<std::string, std::vector<float>> get_params() const override;
  std::map<std::string, std::vector<float>> get_grads() const override;

  void forward(CUdeviceptr input, CUdeviceptr mask, CUdeviceptr output, int batch, int seq, uint32_t step) override;
  void backward(CUdeviceptr grad_output, CUdeviceptr grad_input) override;

  // Times every kernel and GEMM of later calls into `p` (nullptr: off).
  void set_profiler(Profiler* p) { prof_ = p; }
  // Bytes of activation and gradient buffers this layer holds.
  size_t buffers_bytes() const { return buffers_.bytes(); }

 private:
  CUdeviceptr b(const std::string& name) const;  // activation / gradient buffer
  void launch(const char* kernel, size_t grid, const void* params);
  void gemm(const char* name, const GemmShape& s, CUdeviceptr a, CUdeviceptr b_, CUdeviceptr c, float alpha = 1.f,
            float beta = 0.f);
  void gemm_strided(const char* name, const GemmShape& s, CUdeviceptr a, long long sa, CUdeviceptr b_, long long sb,
                    CUdeviceptr c, long long sc, int count, float alpha = 1.f);
  // The elementary ops (each one kernel launch).
  void bias_add(CUdeviceptr x, const char* bias, CUdeviceptr y, int rows, int cols);
  void add(CUdeviceptr a, CUdeviceptr b_, CUdeviceptr y, size_t n);
  void dropout(bool attn, uint32_t stream, CUdeviceptr x, CUdeviceptr y, size_t n);
  void layernorm_fwd(CUdeviceptr x, const char* gamma, const char* beta, CUdeviceptr y, const char* stats, int rows);
  // dx = LN'(x)ᵀ·dy, and the gamma/beta gradients.
  void layernorm_bwd(CUdeviceptr dy, CUdeviceptr x, const char* gamma, const char* beta, const char* stats,
                     CUdeviceptr dx, int rows);
  void colsum(CUdeviceptr x, int rows, int cols, const char* bias);
  void heads(bool to, CUdeviceptr src, CUdeviceptr dst, int ld, int col0);

  Context& ctx_;
  LayerConfig cfg_;
  LayerOptions opt_;
  std::unique_ptr<LoadedModule> module_;
  std::unique_ptr<Gemm> gemm_;
  DeviceBuffer params_, grads_, buffers_;
  std::map<std::string, size_t> param_offset_;
  std::map<std::string, size_t> buffer_offset_;
  int batch_ = 0, seq_ = 0;
  uint32_t step_ = 0;
  bool have_forward_ = false;
  CUdeviceptr input_ = 0, mask_ = 0, output_ = 0;
  Profiler* prof_ = nullptr;
};

}  // namespace dskc
