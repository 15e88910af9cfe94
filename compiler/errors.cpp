// Internal assertion failures: report the expression and location; these are dskc bugs.
#include "compiler/errors.h"

#include <fmt/format.h>

namespace dskc {
void throw_internal(const char* expr, const char* file, int line, const std::string& msg) {
  throw Error(ErrorKind::Internal,
              fmt::format("internal error: {} ({}:{}: check `{}` failed)", msg, file, line, expr));
}
}  // namespace dskc
