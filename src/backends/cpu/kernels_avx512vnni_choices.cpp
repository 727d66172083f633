// The AVX-512 VNNI set's choices by microarchitecture (kernels_avx512vnni.h), made from the
// CPU's features on first use (or set by tests). They need no AVX-512 to make: compiled without
// the set's ISA flags, so they may run before a feature check.
#include <atomic>
#include <cstdint>

#include "backends/cpu/kernels_avx512vnni.h"

namespace bitnet::cpu::avx512vnni {
namespace {

// One choice (an enum) held as an int, -1 until first asked; then `detect`'s answer for this
// CPU, or what a test set.
template <class Choice>
class CachedChoice {
 public:
  constexpr explicit CachedChoice(Choice (*detect)(const CpuFeatures&)) : detect_(detect) {}
  Choice get() {
    int c = value_.load(std::memory_order_relaxed);
    if (c < 0) {
      c = static_cast<int>(detect_(detect_cpu_features()));
      int unset = -1;
      if (!value_.compare_exchange_strong(unset, c, std::memory_order_relaxed)) c = unset;
    }
    return static_cast<Choice>(c);
  }
  void set(Choice c) { value_.store(static_cast<int>(c), std::memory_order_relaxed); }

 private:
  Choice (*detect_)(const CpuFeatures&);
  std::atomic<int> value_{-1};
};

T5Decode t5_decode_for(const CpuFeatures& f) { return f.amd && f.family >= 0x1a ? T5Decode::kCompare : T5Decode::kAverage; }

constinit CachedChoice<T5Decode> g_t5_decode(t5_decode_for);
constinit CachedChoice<RowPrefetch> g_row_prefetch(row_prefetch_for);

}  // namespace

T5Decode t5_decode() { return g_t5_decode.get(); }
void set_t5_decode(T5Decode d) { g_t5_decode.set(d); }

RowPrefetch row_prefetch_for(const CpuFeatures& f) { return f.amd && f.family == 0x19 ? RowPrefetch::kL2 : RowPrefetch::kL1; }
RowPrefetch row_prefetch() { return g_row_prefetch.get(); }
void set_row_prefetch(RowPrefetch p) { g_row_prefetch.set(p); }

int64_t t5_decode_prefetch_bytes_for(const CpuFeatures& f) { return f.amd && f.family == 0x19 ? 4096 : 8192; }
int64_t t5_decode_prefetch_bytes() {
  static const int64_t bytes = t5_decode_prefetch_bytes_for(detect_cpu_features());
  return bytes;
}

TernaryLayout ternary_layout_for(const CpuFeatures& f, int n_threads) {
  return f.amd && f.family == 0x19 && n_threads == 1 ? TernaryLayout::k2Bit : TernaryLayout::k5Trit;
}

TernaryLayout ternary_layout_for_threads(int n_threads) { return ternary_layout_for(detect_cpu_features(), n_threads); }

}  // namespace bitnet::cpu::avx512vnni
