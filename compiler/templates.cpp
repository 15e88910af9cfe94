// Lookup of embedded templates by path.
#include "compiler/templates.h"

#include "compiler/errors.h"

namespace dskc {
const std::string& template_text(const std::string& path) {
  for (const auto& t : embedded_templates())
    if (t.path == path) return t.text;
  DSKC_ASSERT(false, "no embedded template '" + path + "'");
  static const std::string empty;
  return empty;
}
}  // namespace dskc
