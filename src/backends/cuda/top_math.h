// The top-k selection of top_k.cu (Backend::compute_top on the device) as __host__ __device__
// steps, and the host twin that runs the kernel's algorithm serially (top_math_test.cpp checks
// it against hal::select_top). The kernel's arguments are a hal::TopPlan.
//
// The algorithm, per logits row: a radix select over 32-bit keys that order as the logits do
// (top_key), one 8-bit digit at a time from the top: a histogram of the digit among the keys
// that match the prefix so far picks the digit of the need-th largest key (top_digit). After 4
// digits the prefix is the k-th largest key T, and `need` says how many entries of key T the
// top k take: every entry above T is taken, and of those at T, all of them when they are
// exactly `need` (the usual case: no tie at the boundary), else the first `need` by index.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/cuda/w2a8_math.h"  // BITNET_HD

namespace bitnet::cuda {

// One entry of a row's part: hal::TokenLogit's layout.
struct TopEntry {
  int32_t id;
  float logit;
};

// An unsigned key that orders as ranks_before (hal/top.h) does by value: a larger logit, a
// larger key; -0 as +0; a NaN below every number (key 0).
BITNET_HD uint32_t top_key(float v) {
  if (v != v) return 0u;
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  uint32_t u = __float_as_uint(v);
#else
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
#endif
  if (u == 0x80000000u) u = 0u;
  return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

// Of a 256-bin histogram (bin b at hist[b * stride]) of one digit among the matching keys: the
// digit of the need-th largest key (1-based; need <= the histogram's total). `need` becomes its
// rank among the keys with that digit, `count` their number.
BITNET_HD uint32_t top_digit(const uint32_t* hist, int stride, uint32_t& need, uint32_t& count) {
  uint32_t above = 0;
  for (int b = 255; b >= 0; --b) {
    const uint32_t h = hist[b * stride];
    if (above + h >= need) {
      need -= above;
      count = h;
      return static_cast<uint32_t>(b);
    }
    above += h;
  }
  count = 0;
  return 0;
}

// The kernel's selection of one row, serially: the k largest entries (by index order within
// the taken ones: the kernel's order differs, the set does not).
inline void top_select_twin(const float* row, int64_t n_cols, int64_t k, std::vector<TopEntry>& out) {
  out.clear();
  if (k <= 0) return;
  uint32_t prefix = 0, mask = 0, need = static_cast<uint32_t>(k), count = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    uint32_t hist[256] = {};
    for (int64_t i = 0; i < n_cols; ++i) {
      const uint32_t key = top_key(row[i]);
      if ((key & mask) == prefix) ++hist[(key >> shift) & 255u];
    }
    prefix |= top_digit(hist, 1, need, count) << shift;
    mask |= 0xffu << shift;
  }
  uint32_t taken = 0;
  for (int64_t i = 0; i < n_cols; ++i) {
    const uint32_t key = top_key(row[i]);
    if (key > prefix || (key == prefix && (need == count || taken++ < need))) out.push_back({static_cast<int32_t>(i), row[i]});
  }
}

}  // namespace bitnet::cuda
