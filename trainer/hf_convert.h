// `dskc convert`: weights between the kernel layout (bert_model.h) and Hugging Face BERT names.
//
// Per encoder layer i (prefix bert.encoder.layer.{i}.):
//   attn_qkvw [3H,H] <-> attention.self.{query,key,value}.weight  (rows [0,H), [H,2H), [2H,3H))
//   attn_qkvb [3H]   <-> attention.self.{query,key,value}.bias
//   attn_ow / attn_ob <-> attention.output.dense.weight / .bias
//   inter_w / inter_b <-> intermediate.dense.weight / .bias
//   output_w / output_b <-> output.dense.weight / .bias
//   Post-LN (Hugging Face's BertLayer):
//     attn_nw / attn_nb <-> attention.output.LayerNorm.weight / .bias
//     norm_w / norm_b   <-> output.LayerNorm.weight / .bias
//   Pre-LN: Hugging Face's BERT is Post-LN and has no names for these, so the HF side uses the
//   names of DeepSpeed's own unfused Pre-LN BERT (bing_bert's modelingpreln.py), which the
//   stock transformers BertModel cannot load as-is:
//     norm_w / norm_b   <-> PreAttentionLayerNorm.weight / .bias   (LN before attention)
//     attn_nw / attn_nb <-> PostAttentionLayerNorm.weight / .bias  (LN before the FFN)
//     bert.encoder.FinalLayerNorm.* stays as it is.
// Every other name (embeddings, pooler, cls.*) is the same in both layouts. The MLM decoder
// weight is tied to the word embeddings and not stored (as Hugging Face saves it).
// On hf -> kernel: "LayerNorm.gamma/beta" (old TF-converted names) read as weight/bias;
// "bert.embeddings.position_ids" and a tied "cls.predictions.decoder.weight" equal to the
// word embeddings are dropped; "cls.predictions.decoder.bias" is "cls.predictions.bias".
// Metadata is kept, with "layout" set to the target's, so kernel -> hf -> kernel is
// bit-identical (tensors are moved as bytes; no dtype conversion ever happens).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "runtime/safetensors.h"
#include "trainer/bert_model.h"

namespace dskc {

struct ConvertResult {
  SafeTensorsFile file;
  std::vector<std::string> notes;  // what was dropped or renamed, for the user
};

// `shape` (from --cf), when given, is checked against the tensors and written as the
// "model_config" metadata. Error(Input) naming `source` and the tensor for anything missing,
// misshapen or of the wrong layout.
ConvertResult convert_kernel_to_hf(const SafeTensorsFile& in, const std::string& source,
                                   const std::optional<BertShape>& shape);
ConvertResult convert_hf_to_kernel(const SafeTensorsFile& in, const std::string& source,
                                   const std::optional<BertShape>& shape);

}  // namespace dskc
