// Optimizers of the DeepSpeed JSON ("optimizer": {"type": ..., "params": {...}}) with
// DeepSpeed's semantics, on fp32 master weights, one parameter tensor at a time. The CPU
// backend calls optimizer_update directly; a GPU backend must implement the same math (this
// file is its oracle).
//
// Every update first forms the gradient it uses from the accumulated (loss-scaled) one:
//   g = grad / grad_scale · clip_coef
// where grad_scale is the loss scale and clip_coef comes from clip_coefficient() (global-norm
// clipping, DeepSpeed's unscale_and_clip_grads).
//
// Adam / AdamW (DeepSpeed FusedAdam). DeepSpeed's "Adam" is AdamW unless the params say
// "adam_w_mode": false; "AdamW" is always AdamW. With t = step, bc1 = 1 − β1^t, bc2 = 1 − β2^t
// (both 1 when bias_correction is false):
//   L2 mode (adam_w_mode false): g += wd·p
//   m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²
//   u = (m / bc1) / (sqrt(v) / sqrt(bc2) + eps)  [+ wd·p in AdamW mode]
//   p -= lr·u
// Lamb (DeepSpeed FusedLamb): m, v as Adam; u = m / (sqrt(v) + eps) + wd·p;
//   trust = ‖p‖ / ‖u‖ clamped to [min_coeff, max_coeff] (1 when either norm is 0);
//   step_size = bias_correction ? lr·sqrt(bc2)/bc1 : lr;  p -= step_size·trust·u
// Weight decay applies to a tensor only when ModelParamSpec::weight_decay() says so.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace dskc {

enum class OptimizerType { Adam, AdamW, Lamb };

struct OptimizerSettings {
  OptimizerType type = OptimizerType::Adam;
  double lr = 1e-3;  // base learning rate; the LR schedule scales it per step
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool bias_correction = true;
  bool adam_w_mode = true;  // "Adam" only; "AdamW" forces true
  double max_coeff = 10.0, min_coeff = 0.01;  // Lamb's trust-ratio clamp
  double max_grad_norm = 0.0;                 // global-norm clipping; 0 = off
};

const char* optimizer_name(OptimizerType t);  // "Adam" | "AdamW" | "Lamb"

struct UpdateArgs {
  double lr = 0.0;          // this step's learning rate (schedule applied)
  double grad_scale = 1.0;  // the loss scale the gradients carry
  double clip_coef = 1.0;   // from clip_coefficient()
  int64_t step = 1;         // 1-based count of applied updates (bias correction)
};

// DeepSpeed's clipping: with unscaled global norm n and limit c > 0, coef = c / (n + 1e-6)
// when (n + 1e-6) / c > 1, else 1. A limit of 0 (or less) means no clipping.
double clip_coefficient(double grad_norm, double max_grad_norm);

// Updates one tensor in place: p (master weights), m, v (moments) from g, all n long.
// `decay`: whether weight decay applies to this tensor. Arithmetic in double.
void optimizer_update(const OptimizerSettings& s, const UpdateArgs& a, bool decay, float* p, const float* g,
                      float* m, float* v, size_t n);

}  // namespace dskc
