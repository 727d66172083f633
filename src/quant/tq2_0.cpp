#include "quant/tq2_0.h"

#include "quant/bytes.h"

namespace bitnet::quant {

void tq2_0_pack_block(const uint8_t* codes, uint16_t d, uint8_t* dst) {
  for (int h = 0; h < 2; ++h) {
    for (int m = 0; m < 32; ++m) {
      uint8_t q = 0;
      for (int n = 0; n < 4; ++n) q |= static_cast<uint8_t>(codes[128 * h + m + 32 * n] << (2 * n));
      dst[32 * h + m] = q;
    }
  }
  store_u16(dst + 64, d);
}

uint16_t tq2_0_unpack_block(const uint8_t* src, uint8_t* codes) {
  for (int h = 0; h < 2; ++h) {
    for (int m = 0; m < 32; ++m) {
      const uint8_t q = src[32 * h + m];
      for (int n = 0; n < 4; ++n) codes[128 * h + m + 32 * n] = (q >> (2 * n)) & 3;
    }
  }
  return load_u16(src + 64);
}

}  // namespace bitnet::quant
