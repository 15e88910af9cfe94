// CudaBackend::forward_backward: one micro-batch through embeddings, the JIT encoder, the
// final LayerNorm (Pre-LN), the MLM and NSP heads, the losses, and back (the same math as
// CpuBackend::forward_backward; the comments name its steps). Host work per call: batch
// validation, the index tables (masked positions, [CLS] rows, the embedding-gradient groups)
// uploaded in one copy, and the loss download at the end.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "compiler/errors.h"
#include "compiler/model_codegen.h"
#include "runtime/driver.h"
#include "runtime/host_tensor.h"
#include "trainer/bert_cuda.h"
#include "trainer/bert_cuda_params.h"
#include "trainer/peer_sum.h"
#include "trainer/process_group.h"

namespace dskc {
namespace {

constexpr double kMaskedScore = -10000.0;
constexpr int32_t kPieceRows = 64;  // rows per piece of an embedding-gradient group
constexpr int kColSumCols = 32;     // columns per block of model_colsum_accumulate (templates/model/params.cuh)
constexpr size_t kAlignBytes = 256;
size_t align_up(size_t x) { return (x + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }
unsigned blocks_for(size_t n) { return static_cast<unsigned>((n + kModelBlock - 1) / kModelBlock); }

// Rows grouped by key (ascending key, rows ascending within a group): target[g], start[g..g+1],
// member[] — the CSR the grouped-rows kernel walks.
struct Groups {
  std::vector<int32_t> target, start, member;
};
Groups group_rows(const std::vector<int32_t>& key) {
  Groups g;
  g.member.resize(key.size());
  std::iota(g.member.begin(), g.member.end(), 0);
  std::stable_sort(g.member.begin(), g.member.end(), [&](int32_t a, int32_t b) { return key[a] < key[b]; });
  for (size_t i = 0; i < g.member.size(); ++i) {
    if (i == 0 || key[g.member[i]] != key[g.member[i - 1]]) {
      g.target.push_back(key[g.member[i]]);
      g.start.push_back(static_cast<int32_t>(i));
    }
  }
  g.start.push_back(static_cast<int32_t>(g.member.size()));
  return g;
}

// A micro-batch's host tables (CudaBackend::prepare): every int32 array the kernels read, as
// 256-byte-aligned parts of one buffer (one upload), and the additive attention mask in the dtype.
struct HostTables : PreparedBatch {
  std::vector<int32_t> ints;
  std::vector<uint8_t> mask;
  int predictions = 0;  // M: real masked-LM predictions
  size_t o_ids = 0, o_seg = 0, o_prow = 0, o_plab = 0, o_pstart = 0, o_nsp = 0, o_cls = 0, o_used = 0;
  size_t o_groups[3][3] = {};  // word / position / token-type groups: target, start, member
  int n_groups[3] = {};
  // Each group cut into pieces of at most kPieceRows member rows: piece boundaries [pieces + 1] and
  // each group's first piece [groups + 1] (model_grouped_rows_part / _finish).
  size_t o_piece[3] = {}, o_group_piece[3] = {};
  int n_pieces[3] = {};
  std::vector<int32_t> word_targets;  // the word groups' token ids (word_split)
};

// For a batch that check_batch accepted. `used` (word_split): a 0/1 flag per token id of the vocab.
std::unique_ptr<HostTables> make_tables(const Batch& batch, int vocab, DType dtype, bool used) {
  auto t = std::make_unique<HostTables>();
  const int B = batch.batch, S = batch.seq_len, P = batch.max_pred, rows = B * S;
  std::vector<int32_t> pred_rows, pred_labels, pred_start{0}, cls_rows;
  for (int b = 0; b < B; ++b) {
    for (int k = 0; k < P; ++k) {
      const int p = batch.masked_lm_positions[static_cast<size_t>(b) * P + k];
      if (p == 0) break;  // the first 0 ends the sample's predictions
      pred_rows.push_back(b * S + p);
      pred_labels.push_back(batch.masked_lm_ids[static_cast<size_t>(b) * P + k]);
    }
    pred_start.push_back(static_cast<int32_t>(pred_rows.size()));
    cls_rows.push_back(b * S);
  }
  t->predictions = static_cast<int>(pred_rows.size());
  std::vector<int32_t> pos_key(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) pos_key[r] = r % S;
  const Groups g_word = group_rows(batch.input_ids), g_pos = group_rows(pos_key), g_type = group_rows(batch.segment_ids);
  std::vector<int32_t>& ints = t->ints;
  auto put = [&](const std::vector<int32_t>& v) {
    const size_t at = ints.size();
    ints.insert(ints.end(), v.begin(), v.end());
    ints.resize(align_up(ints.size() * 4) / 4, 0);
    return at;
  };
  t->o_ids = put(batch.input_ids);
  t->o_seg = put(batch.segment_ids);
  t->o_prow = put(pred_rows);
  t->o_plab = put(pred_labels);
  t->o_pstart = put(pred_start);
  t->o_nsp = put(batch.next_sentence_labels);
  t->o_cls = put(cls_rows);
  const Groups* groups[3] = {&g_word, &g_pos, &g_type};
  for (int i = 0; i < 3; ++i) {
    const Groups& g = *groups[i];
    t->o_groups[i][0] = put(g.target);
    t->o_groups[i][1] = put(g.start);
    t->o_groups[i][2] = put(g.member);
    t->n_groups[i] = static_cast<int>(g.target.size());
    std::vector<int32_t> piece{0}, group_piece{0};
    for (size_t k = 0; k + 1 < g.start.size(); ++k) {
      for (int32_t b = g.start[k]; b < g.start[k + 1]; b += kPieceRows)
        piece.push_back(std::min(b + kPieceRows, g.start[k + 1]));
      group_piece.push_back(static_cast<int32_t>(piece.size() - 1));
    }
    t->o_piece[i] = put(piece);
    t->o_group_piece[i] = put(group_piece);
    t->n_pieces[i] = static_cast<int>(piece.size() - 1);
  }
  t->word_targets = g_word.target;
  if (used) {
    std::vector<int32_t> flags(static_cast<size_t>(vocab), 0);
    for (int32_t id : batch.input_ids) flags[static_cast<size_t>(id)] = 1;
    t->o_used = put(flags);
  }
  std::vector<float> maskv(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) maskv[r] = batch.input_mask[r] ? 0.f : static_cast<float>(kMaskedScore);
  t->mask = to_dtype_bytes(maskv, dtype);
  return t;
}

}  // namespace

std::unique_ptr<PreparedBatch> CudaBackend::prepare(const Batch& batch) const {
  try {
    check_batch(batch, opt_);
  } catch (const Error&) {
    return nullptr;  // forward_backward reports it
  }
  return make_tables(batch, opt_.shape.vocab_size, dtype_, opt_.word_split);
}


void CudaBackend::accumulate_n(CUdeviceptr src, CUdeviceptr dst, size_t n, CUstream stream, bool onto_zero) const {
  mkp::Accumulate p{reinterpret_cast<const void*>(src), reinterpret_cast<float*>(dst), static_cast<uint64_t>(n)};
  launch_on(stream ? stream : ctx_->stream(), onto_zero ? "model_accumulate_first" : "model_accumulate",
            std::min(blocks_for(n), 4096u), &p);
}

void CudaBackend::accumulate(CUdeviceptr src, int idx) { accumulate_n(src, grad(idx), numel(idx)); }

void CudaBackend::accumulate_layer(int l, CUstream stream, bool onto_zero) const {
  const GpuLayer& layer = *layers_[static_cast<size_t>(l)];
  for (int k = 0; k < kLayerParams; ++k) {
    const int idx = layer_idx_[static_cast<size_t>(l)][static_cast<size_t>(k)];
    accumulate_n(layer.grad(layer_param_names_[static_cast<size_t>(k)]), grad(idx), numel(idx), stream, onto_zero);
  }
}

void CudaBackend::ln_param_grad(const char* part_kernel, const mkp::LnParamGrad& args) {
  mkp::LnParamGrad p = args;
  constexpr int kChunkRows = 64;  // rows per partial sum: 128 chunks x 4 column blocks at 64 x 128
  const unsigned col_blocks = blocks_for(static_cast<size_t>(opt_.shape.hidden_size));
  const unsigned chunks = static_cast<unsigned>((std::max(p.rows, 1) + kChunkRows - 1) / kChunkRows);
  p.part = reinterpret_cast<float*>(
      ln_part_.ensure(*ctx_, static_cast<size_t>(chunks) * 2 * opt_.shape.hidden_size * sizeof(float)));
  p.chunk_rows = kChunkRows;
  launch(part_kernel, col_blocks * chunks, &p);
  launch("model_layernorm_param_grad_finish", col_blocks, &p);
}

void CudaBackend::colsum(CUdeviceptr src, int rows, int cols, int ld, int idx) {
  mkp::ColSum p{reinterpret_cast<const void*>(src), reinterpret_cast<float*>(grad(idx)), rows, cols, ld};
  launch("model_colsum_accumulate", static_cast<unsigned>((cols + kColSumCols - 1) / kColSumCols), &p);
}

void CudaBackend::gemm(const GemmShape& s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr bias) {
  gemm_->run(s, a, b, c, 1.f, 0.f, bias);
}

void CudaBackend::reduce_word_rows(CUdeviceptr group_start, CUdeviceptr group_member,
                                   const std::vector<int32_t>& targets) {
  const int H = opt_.shape.hidden_size, V = opt_.shape.vocab_size;
  pg_->wait_host_copy("the gradient all-reduce");  // its first part: the token-id union
  const std::vector<int32_t> h = union_rows(union_host_, V, targets);
  const size_t U = h.size() / 2;
  DSKC_ASSERT(U > 0, "token-id union of a non-empty batch");
  // Through page-locked memory: an asynchronous copy (the host does not wait for backward).
  int32_t* staged = union_host_ + V;
  std::copy(h.begin(), h.end(), staged);
  const CUdeviceptr idx = word_rows_idx_.ptr();
  DSKC_CU(cuMemcpyHtoDAsync(idx, staged, 2 * U * sizeof(int32_t), ctx_->stream()));
  const CUdeviceptr rows = word_rows_.ptr();
  const auto* ids = reinterpret_cast<const int*>(idx);
  mkp::GroupedRowsCompact c{reinterpret_cast<const float*>(emb_dsum_.ptr()), ids + U,
                            reinterpret_cast<const int*>(group_start), reinterpret_cast<const int*>(group_member),
                            reinterpret_cast<void*>(rows), static_cast<int>(U)};
  launch("model_grouped_rows_compact", static_cast<unsigned>(U), &c);
  pg_->wait_for_compute();
  pg_->all_reduce(rows, U * static_cast<size_t>(H), nccl_dtype());
  mkp::ScatterRows sc{reinterpret_cast<const void*>(rows), ids, reinterpret_cast<float*>(grad(word_)), static_cast<int>(U)};
  launch_on(pg_->stream(), "model_scatter_add_rows", static_cast<unsigned>(U), &sc);
}

StepLoss CudaBackend::forward_backward(const Batch& batch, const MicroStep& m) {
  return forward_backward_prepared(batch, m, nullptr);
}

StepLoss CudaBackend::forward_backward_prepared(const Batch& batch, const MicroStep& m, const PreparedBatch* prepared) {
  check_batch(batch, opt_);
  ctx_->make_current();
  sumsq_.reset();  // the gradients change
  widen_pending_layers();  // a second micro-batch overwrites the layers' buffers
  // The first call after zero_grads assigns the layers' gradients, so its deferred memset covers
  // the other parameters only. Should this call throw before the layers are done, the accumulators
  // count as zero again (the next reader clears them all): what they were before the call.
  layers_onto_zero_ = grads_zero_ && !pg_;  // one GPU only (zero_grads)
  // ... or leaves them in the layers' own buffers (BackendOptions::defer_layer_grads)
  const bool defer_layers = layers_onto_zero_ && defer_layer_grads_;
  // An update in flight (BackendOptions::optimizer_overlap): the embedding and head tensors' group
  // before their gradients are cleared and the embeddings read, each layer's right before its forward.
  wait_optimizer_group(0);
  // ... but for the word table's elements, which the MLM decoder's gradient assigns (or, without
  // predictions, a memset after the heads) before the embeddings' rows are added.
  const bool word_onto_zero = zero_pending_;
  if (zero_pending_) {
    for (const auto& [off, n] : zero_ranges_less_word_)
      DSKC_CU(cuMemsetD8Async(grads_.ptr() + off * 4, 0, n * 4, ctx_->stream()));
    zero_pending_ = false;
  }
  struct FirstCallGuard {
    CudaBackend& b;
    bool armed;
    ~FirstCallGuard() {
      if (armed) b.grads_zero_ = b.zero_pending_ = true;
    }
  } first_call{*this, layers_onto_zero_};
  syncing_ = pg_ != nullptr && m.sync_grads;
  if (syncing_) tracker_->reset();  // a call that threw half-way leaves no stale marks
  // The only micro-batch of the step (accumulators still zero): reduce the layers' own dtype
  // gradients instead of the accumulators' staging copies.
  layers_in_place_ = syncing_ && reduce_in_dtype_ && grads_zero_ && opt_.allreduce_in_place;
  if (layers_in_place_ && peer_) peer_->next_step();
  word_split_ = syncing_ && reduce_in_dtype_ && opt_.allreduce_in_place && opt_.word_split;
  grads_zero_ = false;
  deferred_layers_.clear();
  const BertShape& shape = opt_.shape;
  const int B = batch.batch, S = batch.seq_len, H = shape.hidden_size, V = shape.vocab_size;
  const int rows = B * S, Vp = vocab_pad_, N = shape.num_hidden_layers;
  const size_t eb = eb_, hbytes = static_cast<size_t>(H) * eb;
  const double coef = m.loss_scale / m.accumulation;
  const kp::DropoutArgs rng{opt_.seed, 0, m.rng_step};
  auto P_ = [](CUdeviceptr x) { return reinterpret_cast<void*>(x); };
  auto F_ = [](CUdeviceptr x) { return reinterpret_cast<float*>(x); };
  auto I_ = [](CUdeviceptr x) { return reinterpret_cast<const int*>(x); };

  // ---- host index tables (from the read-ahead thread where the trainer has one), one upload each
  // for the int32 tables and the mask, through page-locked memory: the host does not wait for them
  std::unique_ptr<HostTables> own;
  const HostTables* tab = dynamic_cast<const HostTables*>(prepared);
  if (!tab) {
    own = make_tables(batch, V, dtype_, opt_.word_split);
    tab = own.get();
  }
  DSKC_ASSERT(!word_split_ || opt_.word_split, "word_split_ without opt_.word_split");
  const int M = tab->predictions;
  const size_t ints_bytes = tab->ints.size() * 4, staged = align_up(ints_bytes) + tab->mask.size();
  if (staging_done_) DSKC_CU(cuEventSynchronize(staging_done_));  // the previous call's copies (long done)
  if (staging_bytes_ < staged) {
    if (staging_) DSKC_CU(cuMemFreeHost(staging_));
    staging_ = nullptr;
    DSKC_CU(cuMemAllocHost(reinterpret_cast<void**>(&staging_), staged));
    staging_bytes_ = staged;
  }
  std::memcpy(staging_, tab->ints.data(), ints_bytes);
  std::memcpy(staging_ + align_up(ints_bytes), tab->mask.data(), tab->mask.size());
  const CUdeviceptr ib = ints_.ensure(*ctx_, ints_bytes);
  auto at = [&](size_t o) { return ib + o * 4; };
  DSKC_CU(cuMemcpyHtoDAsync(ib, staging_, ints_bytes, ctx_->stream()));
  DSKC_CU(cuMemcpyHtoDAsync(mask_.ptr(), staging_ + align_up(ints_bytes), tab->mask.size(), ctx_->stream()));
  if (!staging_done_) DSKC_CU(cuEventCreate(&staging_done_, CU_EVENT_DISABLE_TIMING));
  DSKC_CU(cuEventRecord(staging_done_, ctx_->stream()));
  if (word_split_) {
    pg_->wait_for_compute();
    pg_->all_reduce_to_host(at(tab->o_used), static_cast<size_t>(V), union_host_);
  }
  mark(phase::kBatchUpload);

  // ---- per-call buffers: MLM [M, ...] (grown on demand), fixed-size ones carved from members
  // The decoder's vocabulary dimension (DSKC_HEAD_GEMMS): Vp, or V.
  const int Nv = pad_vocab_ ? Vp : V;
  const size_t mrows = static_cast<size_t>(std::max(M, 1));
  const size_t mh = align_up(mrows * hbytes);
  const size_t mlog = align_up(mrows * Vp * eb);
  const size_t mf = align_up(mrows * 4);
  const CUdeviceptr mb = mlm_.ensure(*ctx_, 5 * mh + mlog + 3 * mf);
  const CUdeviceptr hm = mb, t = mb + mh, gl = mb + 2 * mh, u = mb + 3 * mh, du = mb + 4 * mh, logits = mb + 5 * mh;
  const CUdeviceptr u_mean = logits + mlog, u_rstd = u_mean + mf, row_loss = u_rstd + mf;
  const size_t rows_max = static_cast<size_t>(opt_.micro_batch) * opt_.max_seq_length;
  const CUdeviceptr emb_mean = stats_.ptr(), emb_rstd = emb_mean + rows_max * 4, fin_mean = emb_rstd + rows_max * 4,
                    fin_rstd = fin_mean + rows_max * 4;
  const size_t bh = static_cast<size_t>(opt_.micro_batch) * hbytes;
  const CUdeviceptr cls = nsp_bufs_.ptr(), pooled = cls + bh, dpooled = pooled + bh, dcls = dpooled + bh;
  const CUdeviceptr nsp_loss = nsp_bufs_.ptr() + align_up(4 * bh), nsp_dl = nsp_loss + opt_.micro_batch * 4;
  const CUdeviceptr wtmp = wgrad_.buf.ptr();

  // ---- embeddings: LN(word[id] + pos[s] + type[seg]), then dropout (stream 4, layer 0)
  {
    mkp::EmbeddingFwd p{I_(at(tab->o_ids)), I_(at(tab->o_seg)), P_(weight(word_)), P_(weight(pos_)), P_(weight(type_)),
                        P_(weight(emb_ln_w_)), P_(weight(emb_ln_b_)), F_(emb_sum_.ptr()), F_(emb_mean), F_(emb_rstd),
                        P_(acts_[0].ptr()), rng, rows, S};
    launch("model_embedding_fwd", static_cast<unsigned>(rows), &p);
  }
  mark(phase::kEmbeddingsFwd);
  // ---- encoder
  for (int l = 0; l < N; ++l) {
    wait_optimizer_group(l + 1);
    layers_[l]->forward(acts_[l].ptr(), mask_.ptr(), acts_[l + 1].ptr(), B, S, m.rng_step);
  }
  opt_in_flight_ = false;  // every group waited for
  mark(phase::kEncoderFwd);
  const CUdeviceptr x_out = acts_[static_cast<size_t>(N)].ptr();
  CUdeviceptr y = x_out;
  if (final_ln_w_ >= 0) {
    y = final_out_.ptr();
    mkp::LnFwd p{P_(x_out), P_(weight(final_ln_w_)), P_(weight(final_ln_b_)), P_(y), F_(fin_mean), F_(fin_rstd), rows};
    launch("model_layernorm_fwd", static_cast<unsigned>(rows), &p);
  }

  // ---- MLM head at the real predictions
  if (M > 0) {
    mkp::GatherRows gr{P_(y), I_(at(tab->o_prow)), P_(hm), M};
    launch("model_gather_rows", static_cast<unsigned>(M), &gr);
    // t = hm·trᵀ + b; g = GELU(t); u = LN(g); logits = u·wordᵀ + dec_b       [M,H], [M,V] (ld Vp)
    gemm({false, true, M, H, H, H, H, H}, hm, weight(tr_w_), t, weight(tr_b_));
    mkp::Activation ga{P_(t), P_(gl), static_cast<uint64_t>(M) * H};
    launch("model_gelu_fwd", std::min(blocks_for(ga.n), 4096u), &ga);
    mkp::LnFwd ln{P_(gl), P_(weight(tr_ln_w_)), P_(weight(tr_ln_b_)), P_(u), F_(u_mean), F_(u_rstd), M};
    launch("model_layernorm_fwd", static_cast<unsigned>(M), &ln);
    // logits columns V..Vp-1 (Nv = Vp): the zero rows of the word table plus the zero bias
    gemm({false, true, M, Nv, H, H, H, Vp}, u, weight(word_), logits, weight(dec_b_));
    // loss rows and dlogits = (softmax − onehot)·coef/M, in place; columns V..Vp-1 zero
    mkp::Xent xe{P_(logits), I_(at(tab->o_plab)), F_(row_loss), static_cast<float>(coef / M), M, V, Vp};
    launch("model_xent", static_cast<unsigned>(M), &xe);
    // decoder backward: du = dlogits·word; dword += dlogitsᵀ·u; ddec_b += Σ dlogits (the padding
    // adds exact zeros)
    gemm({false, false, M, H, Nv, Vp, H, H}, logits, weight(word_), du);
    gemm({true, false, Nv, H, M, Vp, H, H}, logits, u, wtmp);  // rows V..Vp-1 (Nv = Vp) zero, not added
    accumulate_n(wtmp, grad(word_), numel(word_), nullptr, word_onto_zero);
    colsum(logits, M, V, Vp, dec_b_);
    // transform LayerNorm + GELU backward: du -> dt (in place)
    ln_param_grad("model_layernorm_param_grad_part",
                  {P_(du), P_(gl), F_(u_mean), F_(u_rstd), F_(grad(tr_ln_w_)), F_(grad(tr_ln_b_)), nullptr, M, 0});
    mkp::LnBwd lb{P_(du), P_(gl), F_(u_mean), F_(u_rstd), P_(weight(tr_ln_w_)), P_(t), P_(du), {}, M};
    launch("model_layernorm_gelu_bwd", static_cast<unsigned>(M), &lb);
    // dense backward: dtr_w += dtᵀ·hm; dtr_b += Σ dt; dhm = dt·tr_w (into gl)
    gemm({true, false, H, H, M, H, H, H}, du, hm, wtmp);
    accumulate(wtmp, tr_w_);
    colsum(du, M, H, H, tr_b_);
    gemm({false, false, M, H, H, H, H, H}, du, weight(tr_w_), gl);
  }
  if (M == 0 && word_onto_zero)
    DSKC_CU(cuMemsetD8Async(grad(word_), 0, numel(word_) * 4, ctx_->stream()));
  // word_split_: the decoder's dense share of the word-table gradient (and earlier micro-batches'
  // rows) now, on every rank (even one without predictions), overlapped with the encoder.
  if (word_split_) reduce_range(word_, word_ + 1);
  for (int idx : {dec_b_, tr_ln_w_, tr_ln_b_, tr_w_, tr_b_}) grad_ready(idx);

  // ---- NSP head: classifier(tanh(pooler(h_[CLS])))
  {
    mkp::GatherRows gr{P_(y), I_(at(tab->o_cls)), P_(cls), B};
    launch("model_gather_rows", static_cast<unsigned>(B), &gr);
    gemm({false, true, B, H, H, H, H, H}, cls, weight(pool_w_), pooled, weight(pool_b_));
    mkp::Activation ta{P_(pooled), P_(pooled), static_cast<uint64_t>(B) * H};
    launch("model_tanh_fwd", std::min(blocks_for(ta.n), 4096u), &ta);
    mkp::Nsp ns{P_(pooled), P_(weight(nsp_w_)), P_(weight(nsp_b_)), I_(at(tab->o_nsp)), F_(nsp_loss), F_(nsp_dl),
                P_(dpooled), static_cast<float>(coef / B), B};
    launch("model_nsp", static_cast<unsigned>(B), &ns);
    mkp::NspParamGrad npg{P_(pooled), F_(nsp_dl), F_(grad(nsp_w_)), F_(grad(nsp_b_)), B};
    launch("model_nsp_param_grad", blocks_for(static_cast<size_t>(H)), &npg);
    gemm({true, false, H, H, B, H, H, H}, dpooled, cls, wtmp);
    accumulate(wtmp, pool_w_);
    colsum(dpooled, B, H, H, pool_b_);
    gemm({false, false, B, H, H, H, H, H}, dpooled, weight(pool_w_), dcls);
  }
  for (int idx : {nsp_w_, nsp_b_, pool_w_, pool_b_}) grad_ready(idx);

  // ---- gradient wrt the encoder output (after the final LN): [CLS] rows and masked rows
  CUdeviceptr cur = dgrad_a_.ptr(), other = dgrad_b_.ptr();
  {
    mkp::HeadScatter hs{P_(cur), P_(dcls), P_(gl), I_(at(tab->o_pstart)), I_(at(tab->o_prow)), S};
    launch("model_head_grad_scatter", static_cast<unsigned>(rows), &hs);  // writes every row
  }
  if (final_ln_w_ >= 0) {
    ln_param_grad("model_layernorm_param_grad_part", {P_(cur), P_(x_out), F_(fin_mean), F_(fin_rstd),
                                                      F_(grad(final_ln_w_)), F_(grad(final_ln_b_)), nullptr, rows, 0});
    mkp::LnBwd lb{P_(cur), P_(x_out), F_(fin_mean), F_(fin_rstd), P_(weight(final_ln_w_)), nullptr, P_(other), {}, rows};
    launch("model_layernorm_bwd", static_cast<unsigned>(rows), &lb);
    std::swap(cur, other);
    grad_ready(final_ln_w_);
    grad_ready(final_ln_b_);
  }
  mark(phase::kHeads);

  // ---- encoder backward; each layer's gradients (overwritten per call) go into the accumulators
  for (int l = N - 1; l >= 0; --l) {
    layers_[l]->backward(cur, other);
    if (defer_layers) {
      // read where they are (sum_squares, adam_multi) or widened by settle_grads
    } else if (!layers_in_place_) {
      accumulate_layer(l, nullptr, layers_onto_zero_);
    } else if (opt_.delay_allreduce) {
      deferred_layers_.push_back(l);
    } else {
      reduce_layer_in_place(l);
    }
    for (int k = 0; k < kLayerParams; ++k) grad_ready(layer_idx_[static_cast<size_t>(l)][k]);
    std::swap(cur, other);
  }
  mark(phase::kEncoderBwd);

  // ---- embeddings backward: dropout, LayerNorm, then the three tables (grouped by row key)
  {
    mkp::LnBwd lb{P_(cur), P_(emb_sum_.ptr()), F_(emb_mean), F_(emb_rstd), P_(weight(emb_ln_w_)), nullptr,
                  P_(emb_dsum_.ptr()), rng, rows};
    launch("model_embedding_layernorm_bwd", static_cast<unsigned>(rows), &lb);
    ln_param_grad("model_embedding_layernorm_param_grad_part", {P_(cur), P_(emb_sum_.ptr()), F_(emb_mean),
                                                                F_(emb_rstd), F_(grad(emb_ln_w_)),
                                                                F_(grad(emb_ln_b_)), nullptr, rows, 0});
    const int table[3] = {word_, pos_, type_};
    for (int i = 0; i < 3; ++i) {
      if (i == 0 && word_split_) {
        reduce_word_rows(at(tab->o_groups[0][1]), at(tab->o_groups[0][2]), tab->word_targets);
        continue;
      }
      // Two stages (pieces of at most 64 rows, then each group's pieces in order): the padding id and
      // the two token types hold thousands of rows, which one block per group walked alone.
      float* part = F_(grouped_part_.ensure(*ctx_, static_cast<size_t>(tab->n_pieces[i]) * H * sizeof(float)));
      mkp::GroupedRowsPart gp{F_(emb_dsum_.ptr()), I_(at(tab->o_groups[i][2])), I_(at(tab->o_piece[i])), part,
                              tab->n_pieces[i]};
      launch("model_grouped_rows_part", static_cast<unsigned>(tab->n_pieces[i]), &gp);
      mkp::GroupedRowsFinish gf{part, I_(at(tab->o_groups[i][0])), I_(at(tab->o_group_piece[i])), F_(grad(table[i])),
                                tab->n_groups[i]};
      launch("model_grouped_rows_finish", static_cast<unsigned>(tab->n_groups[i]), &gf);
    }
  }
  for (int l : deferred_layers_) reduce_layer_in_place(l);
  first_call.armed = false;  // every layer's gradients are in
  layers_pending_ = defer_layers;
  for (int idx : {word_, pos_, type_, emb_ln_w_, emb_ln_b_}) grad_ready(idx);
  mark(phase::kEmbeddingsBwd);
  if (syncing_) {
    tracker_->finish_step();  // every bucket was released (Error(Internal) names a forgotten one)
    pg_->wait_all_reduces("the gradient all-reduce");
    syncing_ = false;
    mark(phase::kAllReduceWait);
  }

  // ---- losses (the only device -> host copies of the step)
  StepLoss loss;
  loss.predictions = M;
  loss.sequences = B;
  if (M > 0) {
    const std::vector<float> l = download(*ctx_, row_loss, static_cast<size_t>(M), DType::F32);
    double s = 0;
    for (float v : l) s += v;
    loss.mlm_loss = s / M;
  }
  const std::vector<float> nl = download(*ctx_, nsp_loss, static_cast<size_t>(B), DType::F32);
  double s = 0;
  for (float v : nl) s += v;
  loss.nsp_loss = s / B;
  mark(phase::kLossDownload);
  return loss;
}

}  // namespace dskc
