// `dskc convert --from kernel|hf --to hf|kernel IN.safetensors OUT.safetensors [--cf model.json]`:
// BERT weights between the DeepSpeed transformer-kernel layout and Hugging Face names
// (mapping in trainer/hf_convert.h). A checkpoint's model.safetensors converts directly.
// The output is written atomically; nothing is written when the input is bad.
#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "compiler/errors.h"
#include "runtime/safetensors.h"
#include "trainer/bert_model.h"
#include "trainer/hf_convert.h"

namespace dskc::cli {

int cmd_convert(const Args& args) {
  std::string from, to, cf;
  std::vector<std::string> files;
  ArgParser p("convert",
              "Convert BERT weights between the DeepSpeed transformer-kernel layout (attn_qkvw, ...) and\n"
              "Hugging Face BERT names (attention.self.query/key/value, ...). Round trips are bit-identical.");
  p.add_option("from", &from, "LAYOUT", "kernel or hf");
  p.add_option("to", &to, "LAYOUT", "hf or kernel");
  p.add_option("cf", &cf, "FILE", "BERT model config: checks the shapes and records it in the output");
  p.add_positionals(&files, "IN.safetensors OUT.safetensors", "input and output files");
  if (!p.parse(args)) return 0;
  auto layout_ok = [](const std::string& l) { return l == "kernel" || l == "hf"; };
  if (!layout_ok(from) || !layout_ok(to) || from == to)
    throw Error(ErrorKind::Usage, "dskc convert: give --from kernel --to hf, or --from hf --to kernel");
  if (files.size() != 2)
    throw Error(ErrorKind::Usage, "dskc convert: expected two files: IN.safetensors OUT.safetensors");
  std::optional<BertShape> shape;
  if (!cf.empty()) shape = load_bert_model_config(cf).shape;
  SafeTensorsFile in = read_safetensors(files[0]);
  ConvertResult r = from == "kernel" ? convert_kernel_to_hf(in, files[0], shape) : convert_hf_to_kernel(in, files[0], shape);
  write_safetensors(files[1], r.file);
  for (const std::string& n : r.notes) std::printf("convert: %s\n", n.c_str());
  std::printf("convert: wrote %s (%zu tensors, %s layout)\n", files[1].c_str(), r.file.tensors.size(),
              to == "hf" ? "Hugging Face" : "kernel");
  return 0;
}

}  // namespace dskc::cli
