// Test helper: compile a generated module through NVRTC and check that every kernel it names
// reached ptxas and nothing spills registers.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/errors.h"
#include "compiler/nvrtc_compile.h"

namespace dskc_test {

inline void check_module_compiles(const std::string& source, const std::string& name, const char* arch,
                                  const std::vector<std::string>& kernel_names) {
  using namespace dskc;
  CompiledModule m;
  try {
    m = nvrtc_compile(source, name, {arch, EmitKind::Cubin, {}});
  } catch (const Error& e) {
    FAIL(e.what());
  }
  CHECK(!m.image.empty());
  for (const auto& k : kernel_names) {
    const bool found = std::any_of(m.resources.begin(), m.resources.end(),
                                   [&](const KernelResources& r) { return r.name == k; });
    CHECK_MESSAGE(found, k << " missing from the ptxas log");
  }
  for (const auto& r : m.resources) CHECK_MESSAGE(r.spill_bytes <= 0, r.name << " spills registers");
}

}  // namespace dskc_test
