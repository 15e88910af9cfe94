// The two steps every library dskc loads at first use goes through (the driver in driver.cpp,
// cuBLAS in cublas_api.cpp, NCCL in nccl_api.cpp): dlopen by soname (falling back to the plain
// name) and typed dlsym, each failure one Error(Device) that says what is missing and what to do.
#pragma once
#include <dlfcn.h>
#include <fmt/format.h>

#include <string>

#include "compiler/errors.h"

namespace dskc::dl {

// dlopen(soname), else dlopen(plain); Error(Device) "cannot load SONAME (WHAT): <dlerror>; HINT".
inline void* open(const char* soname, const char* plain, const std::string& what, const std::string& hint) {
  void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h && plain) h = dlopen(plain, RTLD_NOW | RTLD_LOCAL);
  if (!h) throw Error(ErrorKind::Device, fmt::format("cannot load {} ({}): {}; {}", soname, what, dlerror(), hint));
  return h;
}

// fn = the symbol `name` (or `alt`) of `lib`; Error(Device) "LIB has no symbol NAME<suffix>".
template <typename F>
void symbol(void* lib, F& fn, const char* lib_name, const char* name, const char* alt = nullptr,
            const char* suffix = "") {
  void* s = dlsym(lib, name);
  if (!s && alt) s = dlsym(lib, alt);
  if (!s) throw Error(ErrorKind::Device, fmt::format("{} has no symbol {}{}", lib_name, name, suffix));
  fn = reinterpret_cast<F>(s);
}

}  // namespace dskc::dl
