// TransformerLayer: one JIT-compiled BERT layer on the GPU (SPEC §4). Construction plans the
// layer, builds (or loads from the cache) its module, and allocates parameters, gradients and
// exactly the activation tensors the plan lists. forward() keeps those tensors; backward() uses
// them. The caller owns input, mask and output and keeps them alive until backward() (as
// autograd does): Post-LN / non-invertible LayerNorm backward reads them.
#pragma once
#include <cuda.h>

#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compiler/nvrtc_compile.h"
#include "compiler/plan.h"
#include "runtime/context.h"
#include "runtime/cuda_graph.h"
#include "runtime/gemm.h"
#include "runtime/kernel_params.h"
#include "runtime/gpu_layer.h"
#include "runtime/profiler.h"

namespace dskc {

class LoadedModule {
 public:
  LoadedModule(Context& ctx, const std::string& image);
  ~LoadedModule();
  // A kernel of the module: Error(Internal) when the module has no such kernel; other driver
  // failures (with lazy module loading the code goes to the device here, which can run out of
  // memory) throw the driver's error, so callers see CUDA_ERROR_OUT_OF_MEMORY as such.
  CUfunction function(const std::string& name) const;
  // Resolves (and so loads) every named kernel now, while device memory is still free.
  void load(const std::vector<std::string>& names) const;

 private:
  Context& ctx_;
  CUmodule module_ = nullptr;
  mutable std::map<std::string, CUfunction> functions_;
};

struct LayerOptions {
  uint32_t layer_id = 0;     // keys the dropout RNG together with seed and step
  std::string cache_dir;     // empty: default cache dir
  bool use_cache = true;
  // Fused attention where the layer supports it, or the unfused path (batched GEMMs + softmax
  // kernels); FromEnvironment honours DSKC_ATTENTION=unfused (compiler/plan.h).
  AttentionPath attention = AttentionPath::FromEnvironment;
  // stochastic_mode autotunes the GEMM algorithms (runtime/gemm.h) besides its single-pass attention
  // backward; false keeps the default algorithms, so tests can compare the attention backward of
  // both modes bitwise on identical GEMM results. No effect without stochastic_mode.
  bool gemm_autotune = true;
  // Backward runs the weight-gradient GEMMs (and, under attn_dropout_checkpoint / normalize_invertible,
  // the regenerated dropout keep bits / LayerNorm output) on the Context's side stream, overlapping
  // the main stream's chain of data-gradient GEMMs and kernels; the main stream waits for them where
  // it would overwrite what they read and before backward() returns. Same kernels, same results.
  // -1: from DSKC_LAYER_STREAMS ("2" or unset: on; "1": everything on the main stream). Always off
  // while a profiler is attached (its per-step times need one stream).
  int side_stream = -1;
  // Each forward and backward call after the first at its (batch, seq) is captured into a CUDA graph
  // and launched as one (runtime/cuda_graph.h GraphExec: re-captured every call with that call's
  // arguments, so every step gets its own dropout masks; the executable graph is updated in place
  // while the shapes stay): the same kernels and results, without the per-launch and cross-stream
  // costs of launching them one by one. A call that cannot be captured runs as usual. -1: from
  // DSKC_LAYER_GRAPHS ("1": on; unset, "" or "0": off). Off while a profiler is attached.
  int cuda_graphs = -1;
};
// DSKC_LAYER_STREAMS: unset, "" or "2" -> true; "1" -> false; else Error(Config) naming the variable.
bool layer_side_stream_from_env();
// DSKC_LAYER_GRAPHS: unset, "" or "0" -> false; "1" -> true; else Error(Config) naming the variable.
bool layer_graphs_from_env();
// DSKC_LN_BITS_BLOCKS: unset, "" or "waves" -> true; "all" -> false; else Error(Config).
bool ln_bits_whole_waves_from_env();
// Where a two-stream backward enqueues what the memory flags make it regenerate (the attention keep
// bits under attn_dropout_checkpoint, Pre-LN's first LayerNorm output under normalize_invertible):
// first on the side stream (Early), on the side stream after the FFN's output data gradient is
// enqueued (AfterOutputDgrad), or on the main stream where they are needed (Main, as on one stream).
// Same kernels, same results. DSKC_LAYER_REGEN: unset, "" or "early", "dgrad", "main".
enum class RegenPlacement { Early, AfterOutputDgrad, Main };
RegenPlacement layer_regen_from_env();
// DSKC_OUTPUT_BIAS_EARLY: unset, "" or "1" -> true (under gelu_checkpoint with column-sum bias
// gradients, output_b's sum goes to the side stream before the FFN's output data gradient); "0" ->
// false (next to the output_w gradient).
bool output_bias_early_from_env();
// The blocks of a layernorm_fwd_bits grid of `grid` blocks that draw the attention keep words, where
// wave_blocks blocks are resident at once on the GPU (0: every block draws): the grid less its last
// wave where that wave fills less than half the GPU, else the whole grid (bench/NOTES.md v46).
int ln_bits_word_blocks(int grid, int wave_blocks);

class TransformerLayer : public GpuLayer {
 public:
  TransformerLayer(Context& ctx, const LayerConfig& cfg, const LayerOptions& opt = {});
  ~TransformerLayer() override;

  const LayerConfig& config() const override { return plan_.cfg; }
  const LayerPlan& plan() const { return plan_; }
  bool module_from_cache() const { return from_cache_; }
  double module_build_ms() const { return build_ms_; }

  // Parameters and their gradients (dtype of the config), by DeepSpeed name.
  CUdeviceptr param(const std::string& name) const override;
  CUdeviceptr grad(const std::string& name) const override;
  CUdeviceptr params_base() const { return params_.ptr(); }
  CUdeviceptr grads_base() const override { return grads_.ptr(); }
  size_t grads_bytes() const override { return grads_.bytes(); }
  size_t params_bytes() const { return params_.bytes(); }
  void set_params(const std::map<std::string, std::vector<float>>& host) override;  // converts to dtype
  std::map<std::string, std::vector<float>> get_params() const override;
  std::map<std::string, std::vector<float>> get_grads() const override;

  // input, output: [batch, seq, H]; mask: [batch, seq] additive (0 = none). step keys dropout.
  void forward(CUdeviceptr input, CUdeviceptr mask, CUdeviceptr output, int batch, int seq, uint32_t step) override;
  // grad_output, grad_input: [batch, seq, H] of the last forward. Writes every param gradient.
  void backward(CUdeviceptr grad_output, CUdeviceptr grad_input) override;

  // Times every kernel and GEMM of later calls into `p` (nullptr: off).
  void set_profiler(Profiler* p) { prof_ = p; }

  // LayerOptions::cuda_graphs: forward and backward calls launched as CUDA graphs so far, and of
  // those the ones that updated the previous graph in place (the rest instantiated a new one).
  size_t graph_launches() const { return graph_launches_; }
  size_t graph_updates() const { return graph_updates_; }

  // Bytes this layer holds between forward and backward (the plan's saved tensors).
  size_t saved_bytes_allocated() const { return saved_.bytes(); }

  // A saved or workspace tensor of the plan as the last forward / backward left it (tests and
  // debugging: e.g. attn_context, attn_lse, grad_qkv). Workspace tensors are scratch shared with
  // other layers of the same Context: read them before another layer runs.
  CUdeviceptr tensor(const std::string& name) const { return t(name); }

 private:
  struct Impl;
  CUdeviceptr t(const std::string& name) const;  // saved or workspace tensor of the current call
  void launch(const std::string& kernel, unsigned grid_x, unsigned grid_y, const void* params, CUstream stream);
  unsigned grid_for(const KernelInfo& k, int rows) const;
  // On the main stream, or with on_side on the side stream after it waited for the main stream's work.
  void run_kernel(const std::string& name, const void* params, int rows, bool on_side = false);
  // Pre-LN's first LayerNorm (forward, and normalize_invertible's re-run in backward): with
  // plan_.attn_bits_in_ln the kernel also takes the keep-bits params (bits.bits == nullptr: none written).
  void run_layernorm_norm(const kp::LayerNormFwd& p, const kp::AttnDropoutBits& bits, bool on_side = false);
  // Side-stream bookkeeping of one backward (all no-ops when side_ is false): fork() makes the side
  // stream wait for what the main stream has enqueued; side_done(bufs) records that the side work
  // enqueued so far reads or writes bufs; main_waits_for(buf) makes the main stream wait for the
  // side work that touches buf (before the main stream overwrites it or reads what it wrote);
  // join() makes the main stream wait for all side work.
  void fork();
  void side_done(std::initializer_list<CUdeviceptr> bufs);
  void main_waits_for(CUdeviceptr buf);
  void join();
  void prepare_call(int batch, int seq);
  void forward_calls(CUdeviceptr input, CUdeviceptr mask, CUdeviceptr output, int batch, int seq, uint32_t step);
  void backward_calls(CUdeviceptr grad_output, CUdeviceptr grad_input);
  // LayerOptions::cuda_graphs: runs `issue` captured into `exec` and launches it where this is not the
  // first call of its kind at this shape (`warm`) and nothing forbids it; else (or where the capture
  // fails: it ran nothing) runs `issue` as it is.
  void run_maybe_graphed(GraphExec& exec, std::set<std::pair<int, int>>& warm, int batch, int seq, const char* what,
                         const std::function<void()>& issue);
  void reduce(const std::string& kernel, CUdeviceptr part, int parts, CUdeviceptr out0, CUdeviceptr out1);

  Context& ctx_;
  LayerPlan plan_;
  LayerOptions opt_;
  std::unique_ptr<LoadedModule> module_;
  std::unique_ptr<Gemm> gemm_;
  bool from_cache_ = false;
  double build_ms_ = 0;
  DeviceBuffer params_, grads_, saved_, ptr_arrays_, zero_mask_;
  DeviceBuffer gemm_sched_;  // plan gemm_dynamic_tiles: gemm_sm90's two counters
  DeviceBuffer ones_;  // [batch_size·max_seq] of 1 in T: the column-sum GEMMs' left operand (bias_grad_gemv)
  std::map<std::string, size_t> param_offset_;
  std::map<std::string, size_t> saved_offset_;      // at max batch/seq
  std::map<std::string, size_t> workspace_offset_;  // for the current call
  CUdeviceptr workspace_ = 0;
  int batch_ = 0, seq_ = 0;
  uint32_t step_ = 0;
  bool have_forward_ = false;
  CUdeviceptr input_ = 0, mask_ = 0, output_ = 0;
  int arrays_batch_ = -1, arrays_seq_ = -1;
  CUdeviceptr arrays_workspace_ = 0;
  Profiler* prof_ = nullptr;
  int sm_count_ = 1;          // multiprocessors (persistent gemm_sm90 grids)
  int ln_bits_wave_blocks_ = 0;  // resident layernorm_fwd_bits blocks of the GPU (0: every block draws words)
  int attn_bwd_clusters_ = 1;    // clusters of the persistent attn_flash_bwd_dkdv (plan attn_bwd_persist)
  RegenPlacement regen_ = RegenPlacement::Early;  // DSKC_LAYER_REGEN at construction
  bool output_bias_early_ = true;                 // DSKC_OUTPUT_BIAS_EARLY at construction
  bool side_enabled_ = true;  // LayerOptions::side_stream resolved
  bool side_ = false;         // the current backward uses the side stream
  GemmLane side_lane_;
  CUevent fork_event_ = nullptr;
  std::vector<CUevent> side_events_;  // pool, reused every backward
  size_t side_events_used_ = 0;
  std::vector<std::pair<CUdeviceptr, CUevent>> side_touched_;  // buffer, side event after its last use
  bool graphs_ = false;  // LayerOptions::cuda_graphs resolved
  GraphExec fwd_graph_, bwd_graph_;
  std::set<std::pair<int, int>> fwd_warm_, bwd_warm_;  // (batch, seq) that ran once without a capture
  size_t graph_launches_ = 0, graph_updates_ = 0;
  // gemm_sm90's params for C [rows, n] = A [rows, k] · B [n, k]ᵀ (both K-major; b_n_major: C = A · B
  // with B [k, n] as stored, for a kernel planned with kBNMajor) with the TMA descriptors of A, B and
  // the epilogue's [rows, n] tensors (0: not used) set.
  kp::GemmSm90 gemm_sm90_operands(CUdeviceptr a, CUdeviceptr b, int rows, int n, int k, CUdeviceptr out,
                                  CUdeviceptr gelu = 0, CUdeviceptr pre = 0, bool b_n_major = false) const;
  // A linear GEMM as a gemm_sm90 kernel with a plain epilogue (plan_.linear_gemm_sm90's forward ones:
  // out = A·Bᵀ (+ bias); plan_.dgrad_gemm_sm90's data gradients: the same, or out = A·B with b_n_major).
  void gemm_sm90_linear(const char* name, CUdeviceptr a, CUdeviceptr b, int rows, int n, int k, CUdeviceptr out,
                        CUdeviceptr bias = 0, bool b_n_major = false);
  // A weight-gradient GEMM: on the side stream when side_, else as gemm().
  // (bias_grad with plan_.bias_grad_gemv: its column sum first, as bias_sum.)
  void gemm_side(const char* name, const GemmShape& s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c,
                 CUdeviceptr bias_grad);
  // The column-sum GEMM of the weight gradient s's bias (step "<name>_bias"): bias_grad = ones·A, by
  // itself, on the side stream when side_.
  void bias_sum(const char* name, const GemmShape& s, CUdeviceptr a, CUdeviceptr bias_grad);
  static GemmShape bias_sum_shape(const GemmShape& s);
  // One GEMM on the side stream (already forked), bracketed for the profiler.
  void side_gemm(const std::string& name, const GemmShape& s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c,
                 CUdeviceptr bias_grad = 0);
  void gemm(const char* name, const GemmShape& s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, float alpha = 1.f,
            float beta = 0.f, CUdeviceptr bias = 0, CUdeviceptr bias_grad = 0);
  // plan_.gelu_in_gemm: with a bias, C = GELU(A·B + bias) and aux = A·B + bias (forward); without,
  // C = (A·B) ⊙ GELU'(aux) (backward). cuBLASLt's tanh GELU epilogues (Gemm::run_gelu).
  void gemm_gelu(const char* name, const GemmShape& s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr bias,
                 CUdeviceptr aux);
  void gemm_batched(const char* name, const GemmShape& s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, int count,
                    float alpha = 1.f);
};

}  // namespace dskc
