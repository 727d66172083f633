// The AVX-512 VNNI set's choices by microarchitecture that need no AVX-512 to make
// (kernels_avx512vnni.h): compiled without the set's ISA flags, so they may run before a
// feature check.
#include "backends/cpu/kernels_avx512vnni.h"

namespace bitnet::cpu::avx512vnni {

TernaryLayout ternary_layout_for(const CpuFeatures& f, int n_threads) {
  return f.amd && f.family == 0x19 && n_threads == 1 ? TernaryLayout::k2Bit : TernaryLayout::k5Trit;
}

TernaryLayout ternary_layout_for_threads(int n_threads) { return ternary_layout_for(detect_cpu_features(), n_threads); }

RowPrefetch row_prefetch_for(const CpuFeatures& f) { return f.amd && f.family == 0x19 ? RowPrefetch::kL2 : RowPrefetch::kL1; }

}  // namespace bitnet::cpu::avx512vnni
