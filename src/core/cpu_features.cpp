#include "core/cpu_features.h"

#include <array>
#include <fstream>
#include <string>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace bitnet {

namespace {

// Each flag with its name, in the order names() lists them.
std::array<std::pair<std::string_view, bool>, 12> flags(const CpuFeatures& f) {
  return {{{"avx2", f.avx2},
           {"fma", f.fma},
           {"f16c", f.f16c},
           {"bmi2", f.bmi2},
           {"avx_vnni", f.avx_vnni},
           {"avx512f", f.avx512f},
           {"avx512bw", f.avx512bw},
           {"avx512vl", f.avx512vl},
           {"avx512_vnni", f.avx512_vnni},
           {"neon", f.neon},
           {"dotprod", f.dotprod},
           {"i8mm", f.i8mm}}};
}

#if defined(__x86_64__) || defined(__i386__)
void detect_x86(CpuFeatures& f) {
  // __builtin_cpu_supports also checks that the OS saves the YMM/ZMM state (XGETBV).
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.bmi2 = __builtin_cpu_supports("bmi2");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512_vnni = __builtin_cpu_supports("avx512vnni");
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // F16C (leaf 1, ECX bit 29) and AVX-VNNI (leaf 7 subleaf 1, EAX bit 4) are VEX-encoded:
  // usable exactly when AVX2 is (the OS saves the YMM state).
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx)) f.amd = ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163;  // "AuthenticAMD"
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
    f.f16c = f.avx2 && (ecx & (1u << 29)) != 0;
    const int base = static_cast<int>((eax >> 8) & 0xf);
    f.family = base == 0xf ? base + static_cast<int>((eax >> 20) & 0xff) : base;
  }
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) f.avx_vnni = f.avx2 && (eax & (1u << 4)) != 0;
}
#endif

#if defined(__aarch64__)
void detect_arm(CpuFeatures& f) {
  f.neon = true;  // Advanced SIMD is mandatory on AArch64
  const unsigned long hwcap = getauxval(AT_HWCAP);
  const unsigned long hwcap2 = getauxval(AT_HWCAP2);
  f.dotprod = (hwcap & HWCAP_ASIMDDP) != 0;
  f.i8mm = (hwcap2 & HWCAP2_I8MM) != 0;
}
#endif

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || colon == 0) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    if (key == "model name") return colon + 2 <= line.size() ? line.substr(colon + 2) : "";
  }
  return "unknown";
}

}  // namespace

std::vector<std::string> CpuFeatures::names() const {
  std::vector<std::string> n;
  for (const auto& [name, set] : flags(*this)) {
    if (set) n.emplace_back(name);
  }
  return n;
}

bool CpuFeatures::has(std::string_view name) const {
  for (const auto& [flag, set] : flags(*this)) {
    if (flag == name) return set;
  }
  return false;
}

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  detect_x86(f);
#elif defined(__aarch64__)
  detect_arm(f);
#endif
  f.model_name = cpu_model_name();
  return f;
}

}  // namespace bitnet
