// doctest main shared by every test executable. GPU tests call dskc_test::require_gpu(), which
// exits with DSKC_GPU_TEST_SKIP (77, "skipped" for CTest) and says so when no device exists.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

int main(int argc, char** argv) {
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  return ctx.run();
}
