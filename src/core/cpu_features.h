// What the host CPU offers, for the probe and for picking a CPU kernel set at run time
// (src/backends/cpu/kernel_set.h). Each flag means "the CPU has it and the OS saves its state".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace bitnet {

struct CpuFeatures {
  std::string model_name;    // "AMD EPYC ..." from /proc/cpuinfo, or "unknown"
  // x86-64: the vendor, and the display family (AMD: 0x17 Zen 1-2, 0x19 Zen 3-4, 0x1A Zen 5),
  // for the few choices a kernel set makes by microarchitecture; 0 elsewhere.
  bool amd = false;
  int family = 0;
  // x86-64
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool bmi2 = false;
  bool avx_vnni = false;     // 256-bit vpdpbusd (VEX): cpuid leaf 7 subleaf 1, EAX bit 4
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_vnni = false;  // 512-bit vpdpbusd (EVEX)
  // AArch64
  bool neon = false;
  bool dotprod = false;      // sdot/udot (HWCAP_ASIMDDP)
  bool i8mm = false;         // smmla/usdot (HWCAP2_I8MM)

  // The names of the flags that are set, in the order above: {"avx2", "fma", ...}.
  std::vector<std::string> names() const;
  // Whether the flag called `name` (one of the names above) is set; false for unknown names.
  bool has(std::string_view name) const;
};

CpuFeatures detect_cpu_features();

}  // namespace bitnet
