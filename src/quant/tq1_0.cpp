#include "quant/tq1_0.h"

#include "quant/bytes.h"

namespace bitnet::quant {
namespace {

constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};

// Trits t[0..count) (t[0] most significant), padded with zero trits to 5 -> one byte.
uint8_t pack_trits(const uint8_t* codes, int first, int stride, int count) {
  int t = 0;
  for (int n = 0; n < 5; ++n) t = 3 * t + (n < count ? codes[first + stride * n] : 0);
  return static_cast<uint8_t>((t * 256 + 242) / 243);  // ceiling division, 243 = 3^5
}

uint8_t unpack_trit(uint8_t q, int n) {
  const auto shifted = static_cast<uint8_t>(q * kPow3[n]);  // wraps mod 256 on purpose
  return static_cast<uint8_t>((shifted * 3) >> 8);
}

}  // namespace

void tq1_0_pack_block(const uint8_t* codes, uint16_t d, uint8_t* dst) {
  for (int m = 0; m < 32; ++m) dst[m] = pack_trits(codes, m, 32, 5);
  for (int m = 0; m < 16; ++m) dst[32 + m] = pack_trits(codes, 160 + m, 16, 5);
  for (int m = 0; m < 4; ++m) dst[48 + m] = pack_trits(codes, 240 + m, 4, 4);
  store_u16(dst + 52, d);
}

uint16_t tq1_0_unpack_block(const uint8_t* src, uint8_t* codes) {
  for (int m = 0; m < 32; ++m) {
    for (int n = 0; n < 5; ++n) codes[m + 32 * n] = unpack_trit(src[m], n);
  }
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 5; ++n) codes[160 + m + 16 * n] = unpack_trit(src[32 + m], n);
  }
  for (int m = 0; m < 4; ++m) {
    for (int n = 0; n < 4; ++n) codes[240 + m + 4 * n] = unpack_trit(src[48 + m], n);
  }
  return load_u16(src + 52);
}

}  // namespace bitnet::quant
