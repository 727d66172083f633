// What the host CPU offers, for the probe and (later) for picking SIMD kernels at run time.
#pragma once

#include <string>
#include <vector>

namespace bitnet {

struct CpuFeatures {
  std::string model_name;   // "AMD EPYC ..." from /proc/cpuinfo, or "unknown"
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512_vnni = false;
  bool neon = false;
  std::vector<std::string> names() const;  // {"avx2", "fma", ...}
};

CpuFeatures detect_cpu_features();

}  // namespace bitnet
