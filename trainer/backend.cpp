// Checks and set-up shared by every TrainBackend (see backend.h).
#include "trainer/backend.h"

#include <fmt/format.h>

#include "compiler/errors.h"

namespace dskc {

LayerConfig backend_layer_config(const BackendOptions& opt) {
  EncoderLayerOptions lo;
  lo.micro_batch = opt.micro_batch;
  lo.max_seq_length = opt.max_seq_length;
  lo.dtype = opt.dtype;
  lo.attention_dropout_checkpoint = opt.attention_dropout_checkpoint;
  lo.normalize_invertible = opt.normalize_invertible;
  lo.gelu_checkpoint = opt.gelu_checkpoint;
  lo.stochastic_mode = opt.stochastic_mode;
  lo.seed = opt.seed;
  lo.local_rank = opt.local_rank;
  return encoder_layer_config(opt.shape, lo, "model config");
}

void check_batch(const Batch& b, const BackendOptions& opt) {
  const BertShape& s = opt.shape;
  auto fail = [](const std::string& msg) { throw Error(ErrorKind::Input, "batch: " + msg); };
  if (b.batch < 1 || b.batch > opt.micro_batch)
    fail(fmt::format("batch of {} sequences; the backend takes 1 to {} (the micro batch)", b.batch, opt.micro_batch));
  if (b.seq_len < 1 || b.seq_len > opt.max_seq_length || b.seq_len > s.max_position_embeddings)
    fail(fmt::format("sequence length {} exceeds max_seq_length {} or max_position_embeddings {}", b.seq_len,
                     opt.max_seq_length, s.max_position_embeddings));
  const size_t tokens = static_cast<size_t>(b.batch) * b.seq_len, preds = static_cast<size_t>(b.batch) * b.max_pred;
  if (b.input_ids.size() != tokens || b.input_mask.size() != tokens || b.segment_ids.size() != tokens ||
      b.masked_lm_positions.size() != preds || b.masked_lm_ids.size() != preds ||
      b.next_sentence_labels.size() != static_cast<size_t>(b.batch))
    fail("tensor sizes do not match batch, seq_len and max_pred");
  for (size_t i = 0; i < tokens; ++i) {
    if (b.input_ids[i] < 0 || b.input_ids[i] >= s.vocab_size)
      fail(fmt::format("token id {} is outside the model's vocab_size {}", b.input_ids[i], s.vocab_size));
    if (b.segment_ids[i] < 0 || b.segment_ids[i] >= s.type_vocab_size)
      fail(fmt::format("segment id {} is outside type_vocab_size {}", b.segment_ids[i], s.type_vocab_size));
  }
  for (size_t i = 0; i < preds; ++i) {
    if (b.masked_lm_positions[i] < 0 || b.masked_lm_positions[i] >= b.seq_len)
      fail(fmt::format("masked position {} is outside the sequence length {}", b.masked_lm_positions[i], b.seq_len));
    if (b.masked_lm_ids[i] < 0 || b.masked_lm_ids[i] >= s.vocab_size)
      fail(fmt::format("masked_lm_id {} is outside the model's vocab_size {}", b.masked_lm_ids[i], s.vocab_size));
  }
  for (int32_t l : b.next_sentence_labels)
    if (l != 0 && l != 1) fail(fmt::format("next_sentence_label {} is not 0 or 1", l));
}

}  // namespace dskc
