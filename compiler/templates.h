// Access to the CUDA templates embedded at build time (cmake/embed_templates.cmake).
// Paths are relative to templates/, e.g. "layernorm_fwd.cuh", "common/reduce.cuh".
#pragma once
#include <string>
#include <vector>

namespace dskc {
struct EmbeddedTemplate {
  std::string path;
  std::string text;
};
const std::vector<EmbeddedTemplate>& embedded_templates();
// Throws Error(Internal) when the template does not exist.
const std::string& template_text(const std::string& path);
}  // namespace dskc
