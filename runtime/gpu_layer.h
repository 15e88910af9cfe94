// GpuLayer: what the CUDA training backend (trainer/bert_cuda*) needs from one BERT transformer
// layer on the GPU. Two implementations compute the same function with the same parameters
// (DeepSpeed names and kernel layout, SPEC §4) and the same Philox dropout masks (docs/DESIGN.md):
//   TransformerLayer       (runtime/transformer_layer.h) the fused JIT DeepSpeed-style layer
//   PlainTransformerLayer  (runtime/plain_layer.h)       an unfused, PyTorch-style layer
// Contract of both: the caller owns input, mask and output and keeps them alive until backward();
// backward() refers to the most recent forward() and overwrites every parameter gradient.
#pragma once
#include <cuda.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/config.h"

namespace dskc {

class GpuLayer {
 public:
  virtual ~GpuLayer() = default;

  virtual const LayerConfig& config() const = 0;

  // Parameters and their gradients (dtype of the config), by DeepSpeed name; Error(Input) for an
  // unknown name (and for grad() of a layer built with training = false).
  virtual CUdeviceptr param(const std::string& name) const = 0;
  virtual CUdeviceptr grad(const std::string& name) const = 0;
  virtual void set_params(const std::map<std::string, std::vector<float>>& host) = 0;  // converts to dtype
  virtual std::map<std::string, std::vector<float>> get_params() const = 0;
  virtual std::map<std::string, std::vector<float>> get_grads() const = 0;
  // Every parameter gradient in one contiguous buffer (dtype; the gaps between tensors stay
  // zero): the data-parallel backend all-reduces it in place. 0 bytes without training.
  virtual CUdeviceptr grads_base() const = 0;
  virtual size_t grads_bytes() const = 0;

  // input, output: [batch, seq, H]; mask: [batch, seq] additive (0 = none). step keys dropout.
  virtual void forward(CUdeviceptr input, CUdeviceptr mask, CUdeviceptr output, int batch, int seq,
                       uint32_t step) = 0;
  // grad_output, grad_input: [batch, seq, H] of the last forward. Writes every param gradient.
  virtual void backward(CUdeviceptr grad_output, CUdeviceptr grad_input) = 0;
};

}  // namespace dskc
