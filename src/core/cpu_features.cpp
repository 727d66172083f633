#include "core/cpu_features.h"

#include <fstream>
#include <string>

namespace bitnet {

std::vector<std::string> CpuFeatures::names() const {
  std::vector<std::string> n;
  if (avx2) n.emplace_back("avx2");
  if (fma) n.emplace_back("fma");
  if (f16c) n.emplace_back("f16c");
  if (avx512f) n.emplace_back("avx512f");
  if (avx512_vnni) n.emplace_back("avx512_vnni");
  if (neon) n.emplace_back("neon");
  return n;
}

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512_vnni = __builtin_cpu_supports("avx512vnni");
#elif defined(__aarch64__)
  f.neon = true;  // Advanced SIMD is mandatory on AArch64
#endif
  f.model_name = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && f.model_name == "unknown") f.model_name = value;
    if (key == "flags" && value.find(" f16c") != std::string::npos) f.f16c = true;
  }
  return f;
}

}  // namespace bitnet
