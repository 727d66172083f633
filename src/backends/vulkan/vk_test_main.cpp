// The Vulkan tests' main: the loader warns when XDG_RUNTIME_DIR is unset (harmless), so set it
// here, for the tests only; the library reads no environment.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("XDG_RUNTIME_DIR", "/tmp", /*overwrite=*/0);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
