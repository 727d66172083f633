// Switches read from the environment (BITNET_STRICT_MODE, BITNET_CUDA_PROFILE): on when set to
// anything but "", "0" or "false".
#pragma once

#include <cstdlib>
#include <string_view>

namespace bitnet {

inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::string_view(v) != "0" && std::string_view(v) != "false";
}

}  // namespace bitnet
