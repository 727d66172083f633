#include "quant/i2s.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/check.h"
#include "core/fp16.h"
#include "quant/bytes.h"
#include "quant/tq.h"
#include "quant/tq2_0.h"

namespace bitnet::quant {
namespace {

Status check_n(int64_t n) {
  if (n <= 0 || n % kTqBlockElems != 0) {
    return unsupported(
        fmt::format("I2_S <-> TQ2_0 needs a positive multiple of 256 elements, got {}", n));
  }
  return Status::ok_status();
}

bool all_zero_weights(const uint8_t* tq2_0_block) {
  // Code 1 in all four fields is 0b01010101.
  return std::all_of(tq2_0_block, tq2_0_block + 64, [](uint8_t q) { return q == 0x55; });
}

}  // namespace

void i2s_pack_group(const uint8_t* codes, uint8_t* dst) {
  for (int p = 0; p < 32; ++p) {
    dst[p] = static_cast<uint8_t>((codes[p] << 6) | (codes[p + 32] << 4) | (codes[p + 64] << 2) |
                                  codes[p + 96]);
  }
}

void i2s_unpack_group(const uint8_t* src, uint8_t* codes) {
  for (int p = 0; p < 32; ++p) {
    codes[p] = (src[p] >> 6) & 3;
    codes[p + 32] = (src[p] >> 4) & 3;
    codes[p + 64] = (src[p] >> 2) & 3;
    codes[p + 96] = src[p] & 3;
  }
}

void i2s_quantize(const float* x, int64_t n, uint8_t* dst) {
  BITNET_CHECK(n % kI2sGroupElems == 0);
  // bitnet.cpp takes the max in double; the max of floats is a float, so nothing rounds.
  float scale = 0.0f;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(x[i]));
  uint8_t codes[kI2sGroupElems];
  for (int64_t g = 0; g < n / kI2sGroupElems; ++g) {
    const float* xg = x + g * kI2sGroupElems;
    for (int64_t j = 0; j < kI2sGroupElems; ++j) {
      const double v = xg[j];
      codes[j] = std::fabs(v) < 1e-6 ? 1 : (v > 0 ? 2 : 0);
    }
    i2s_pack_group(codes, dst + g * kI2sGroupBytes);
  }
  uint8_t* trailer = dst + n / 4;
  store_f32(trailer, scale);
  std::memset(trailer + 4, 0, kI2sTrailerBytes - 4);
}

Result<std::vector<uint8_t>> i2s_to_tq2_0(std::span<const uint8_t> src, int64_t n) {
  BITNET_RETURN_IF_ERROR(check_n(n));
  if (src.size() != static_cast<uint64_t>(n / 4 + kI2sTrailerBytes)) {
    return invalid_argument(fmt::format("I2_S of {} elements is {} bytes, got {}", n,
                                        n / 4 + kI2sTrailerBytes, src.size()));
  }
  const float scale = load_f32(src.data() + n / 4);
  const uint16_t d = fp32_to_fp16(scale);
  const int64_t n_blocks = n / kTqBlockElems;
  std::vector<uint8_t> dst(static_cast<size_t>(n_blocks * kTq2_0BlockBytes));
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* in = src.data() + b * 64;
    uint8_t* out = dst.data() + b * kTq2_0BlockBytes;
    for (int i = 0; i < 64; ++i) {
      if ((in[i] & 0xaa) & ((in[i] & 0x55) << 1)) {
        return corrupt_file(fmt::format("I2_S code 3 (unused) in byte {}", b * 64 + i));
      }
      out[i] = reverse_bit_pairs(in[i]);
    }
    const bool zero = all_zero_weights(out);
    if (!zero && fp16_to_fp32(d) != scale) {
      return unsupported(
          fmt::format("I2_S scale {} is not exact in fp16: TQ2_0 would round it", scale));
    }
    store_u16(out + 64, zero ? uint16_t{0} : d);
  }
  return dst;
}

Result<std::vector<uint8_t>> tq2_0_to_i2s(std::span<const uint8_t> src, int64_t n) {
  BITNET_RETURN_IF_ERROR(check_n(n));
  const int64_t n_blocks = n / kTqBlockElems;
  if (src.size() != static_cast<uint64_t>(n_blocks * kTq2_0BlockBytes)) {
    return invalid_argument(fmt::format("TQ2_0 of {} elements is {} bytes, got {}", n,
                                        n_blocks * kTq2_0BlockBytes, src.size()));
  }
  std::vector<uint8_t> dst(static_cast<size_t>(n / 4 + kI2sTrailerBytes), 0);
  bool have_scale = false;
  float scale = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* in = src.data() + b * kTq2_0BlockBytes;
    uint8_t* out = dst.data() + b * 64;
    const float d = fp16_to_fp32(load_u16(in + 64));
    for (int i = 0; i < 64; ++i) {
      if ((in[i] & 0xaa) & ((in[i] & 0x55) << 1)) {
        return corrupt_file(fmt::format("TQ2_0 code 3 (unused) in block {}", b));
      }
    }
    if (d == 0.0f || all_zero_weights(in)) {
      std::memset(out, 0x55, 64);  // every weight of the block is 0: code 1
      continue;
    }
    if (!(d > 0.0f) || (have_scale && d != scale)) {
      return unsupported(fmt::format(
          "TQ2_0 block {} has d = {}, I2_S holds one positive scale per tensor ({})", b, d, scale));
    }
    have_scale = true;
    scale = d;
    for (int i = 0; i < 64; ++i) out[i] = reverse_bit_pairs(in[i]);
  }
  store_f32(dst.data() + n / 4, scale);
  return dst;
}

}  // namespace bitnet::quant
